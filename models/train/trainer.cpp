// The training loop, evaluation of checkpoints and the final report of `lsf train` /
// `lsf eval` (see trainer.h). The family-specific parts are the Task's (task.h); the run
// directory and metrics.jsonl are run_directory.h's; the progress line is progress.h's.
#include "lsformer/models/train/trainer.h"

#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "lsformer/engine/anomaly.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/engine/parallel.h"
#include "lsformer/engine/profiler.h"
#include "lsformer/engine/random.h"
#include "lsformer/engine/safetensors.h"
#include "lsformer/models/optim/adam.h"
#include "lsformer/models/optim/grad_scaler.h"
#include "lsformer/models/train/checkpoint.h"
#include "lsformer/models/train/curves.h"
#include "lsformer/models/train/data_parallel.h"
#include "lsformer/models/train/progress.h"
#include "lsformer/models/train/run_directory.h"

namespace lsf::train {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Doubles as text that reads back to the same value (checkpoint metadata).
std::string exact(double v) {
  std::ostringstream os;
  os << std::setprecision(17) << v;
  return os.str();
}

// A number of checkpoint `path`'s "extra.<key>" entry, the whole text parsed (std::stod would
// say only "stod", and accept "0.5abc").
double extra_number(const Metadata& extra, const std::string& key, const std::string& path) {
  const std::string& text = extra.at(key);
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  LSF_CHECK(ec == std::errc() && end == text.data() + text.size() && std::isfinite(value))
      << "--resume: '" << path << "': entry 'extra." << key << "' = \"" << text << "\" is not a finite number";
  return value;
}
int64_t extra_count(const Metadata& extra, const std::string& key, const std::string& path) {
  const std::string& text = extra.at(key);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  LSF_CHECK(ec == std::errc() && end == text.data() + text.size() && value >= 0)
      << "--resume: '" << path << "': entry 'extra." << key << "' = \"" << text << "\" is not a non-negative integer";
  return value;
}

// The signal that asked the run to stop (SIGINT, SIGTERM), 0 while none has; set by the handler.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void request_stop(int signal) { g_stop_signal = signal; }

// While alive (the training loop only: during data loading and the final evaluation there is no
// progress to save, and a signal ends the process at once as usual): SIGINT and SIGTERM ask the
// loop to stop after the current step. SA_RESETHAND restores the default action, so a second
// signal ends the process at once (last.safetensors is written atomically, so even then the
// previous checkpoint survives).
class StopSignals {
 public:
  explicit StopSignals(bool enabled) : enabled_(enabled) {
    g_stop_signal = 0;  // also without handlers: a flag left by an earlier run must not stop this one
    if (!enabled_) return;
    struct sigaction action {};
    action.sa_handler = request_stop;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignals() {
    if (!enabled_) return;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  bool enabled_;
  struct sigaction old_int_ {}, old_term_ {};
};

// "1 thread", "2 threads": the count the CPU work runs with.
std::string threads_text() {
  const int n = get_num_threads();
  return std::to_string(n) + (n == 1 ? " thread" : " threads");
}

json eval_json(const EvalResult& r) {
  json j = {{"split", r.split}, {"step", r.step}, {"loss", r.loss}};
  for (const Metric& m : r.metrics) j[m.name] = m.kind == Metric::Kind::Count ? json(int64_t(m.value)) : json(m.value);
  return j;
}

// The best checkpoint so far: the selection metric of its periodic dev evaluation.
struct Best {
  Selection rule;
  double score = 0.0;
  int64_t step = 0;
  bool any = false;
  bool improved_by(double value) const {
    return !any || (rule.higher_is_better ? value > score : value < score);
  }
};

// The "model.*" keys whose values differ between two configs, as "model.dim 16 → 32, ..." (the
// whole task when the tasks differ). Empty when they agree.
std::string model_differences(const RunConfig& from, const RunConfig& to) {
  if (from.task != to.task) return "data.task \"" + from.task + "\" → \"" + to.task + "\"";
  const json a = json::parse(to_json(from)).flatten(), b = json::parse(to_json(to)).flatten();
  std::string diff;
  for (const auto& [k, v] : b.items()) {
    if (k.rfind("/model/", 0) != 0 || a.value(k, json()) == v) continue;
    std::string key = k.substr(1);
    for (char& ch : key) ch = ch == '/' ? '.' : ch;
    diff += (diff.empty() ? "" : ", ") + key + " " + a.value(k, json()).dump() + " → " + v.dump();
  }
  return diff;
}

// What does not fit when checkpoint `path`'s weights are loaded into `model` (LoadReport::str:
// the missing, unexpected and mismatched tensors); empty when they fit or the file is unreadable.
std::string weight_mismatch(const std::string& path, const nn::Module& model) {
  try {
    SafetensorsContents file = load_safetensors(path);
    std::map<std::string, Tensor> weights;
    for (auto& [name, t] : file.tensors)
      if (name.rfind("optimizer.", 0) != 0 && name.rfind("task.", 0) != 0) weights.emplace(name, t);
    nn::LoadReport report = model.check_state_dict(weights);
    return report.ok() ? std::string() : report.str();
  } catch (const Error&) {
    return {};
  }
}

// Loads checkpoint `path`'s weights into `model` (strictly). When they do not fit, the error
// names `who`, the model keys of `config` that differ from the checkpoint's stored config, and
// the tensors; other errors (a missing or corrupt file) pass through unchanged.
CheckpointInfo load_weights(const std::string& who, const std::string& path, const RunConfig& config, nn::Module& model) {
  try {
    return load_checkpoint(path, model, nullptr, /*restore_rng=*/false);
  } catch (const Error&) {
    const std::string mismatch = weight_mismatch(path, model);
    if (mismatch.empty()) throw;
    std::string diff;
    try {
      diff = model_differences(checkpoint_config(path), config);
    } catch (const Error&) {  // no stored config: the tensors alone say what differs
    }
    LSF_FAIL() << who << ": the model of '" << path << "' does not have this config's shapes"
               << (diff.empty() ? std::string() : " (" + diff + ")") << ":\n" << mismatch;
  }
}

// The model of checkpoint `path` evaluated on the whole split: the one code path behind both
// the end of training and `lsf eval` (`who` names the caller in a mismatch error).
EvalResult evaluate_file(Task& task, const RunConfig& config, const std::string& path, const std::string& split,
                         const std::string& who) {
  const Device device = run_device(config);  // train.device (lsf eval: --set train.device=... chooses another)
  check_device_supported(task, device, config);
  auto model = task.build_model();
  CheckpointInfo info = load_weights(who, path, config, *model);
  model->to(device);
  EvalResult r = task.evaluate(*model, split, /*max_batches=*/0);
  r.step = info.step;
  return r;
}

// Everything the loop needs, built in the order that makes runs reproducible: data first, then
// the seed, then the model's initialisation.
struct Run {
  Run(RunConfig c, RunPaths p) : config(std::move(c)), paths(std::move(p)) {}
  RunConfig config;
  RunPaths paths;
  std::unique_ptr<Task> task;
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::Schedule> schedule;
  std::unique_ptr<optim::GradScaler> scaler;  // train.precision = "f16" only
  int64_t step = 0;  // steps done
  Best best;
  // Carried across a resume in last.safetensors: the open log window's sums (its metrics line
  // then equals an uninterrupted run's), the last logged mean loss, and the wall time of the
  // earlier invocations.
  double window_loss_sum = 0;
  int64_t window_steps = 0;
  Tally window_tally;
  double last_logged_loss = 0;
  double prior_wall_seconds = 0;
  std::unique_ptr<EventWriter> tb;  // RUN_DIR/tb; null on ranks other than 0
  DataParallel* dp = nullptr;       // this process's part of a data-parallel job (data_parallel.h)
};

Run start_run(const RunConfig& config, const TrainOptions& options, ProgressLine& progress, DataParallel& dp) {
  // A device this process lacks, or a config that cannot fit, is refused before the run
  // directory is made or data generated.
  Device device = run_device(config);
  // Data parallelism on GPUs: "cuda" without an index puts rank r on GPU r mod the GPUs there are
  // (one rank per GPU, as launched by mpirun -np <GPUs>); "cuda:N" puts every rank on GPU N.
  if (device.is_cuda() && dp.active() && config.train.device == "cuda")
    device = Device(DeviceType::CUDA, dp.rank() % cuda_device_count());
  std::unique_ptr<Task> task = make_task(config);
  check_device_supported(*task, device, config);
  check_memory_fits(task->estimate_memory(MemoryUse::Train), config, "");
  // Data parallelism: rank 0 chooses, locks and writes the run directory; the others use its path.
  RunPaths paths("");
  if (dp.is_root())
    paths = options.first_free_out_dir && !options.resume ? open_free_run_directory(config, options.out_dir)
                                                          : open_run_directory(config, options.out_dir, options.resume);
  const std::string dir = dp.active() ? dp.broadcast_string(paths.dir) : paths.dir;
  Run run(config, dp.is_root() ? std::move(paths) : RunPaths(dir));
  run.dp = &dp;
  if (config.train.threads > 0) set_num_threads(int(config.train.threads));
  dp.apply_default_threads(config);
  run.task = std::move(task);
  try {
    run.task->set_data_shard(dp.shard());
  } catch (const Error& e) {
    LSF_FAIL() << "data.task \"" << config.task << "\" on " << dp.size() << " ranks: " << e.what();
  }
  run.task->load_data({"train", "dev", "test"});
  manual_seed(config.train.seed);
  run.model = run.task->build_model();  // initialised on the CPU: the same weights on every device
  run.model->to(device);                // before the optimizer, whose state lives beside the parameters
  run.model->train();
  run.optimizer = make_optimizer(config, *run.model);
  run.schedule = make_schedule(config);
  if (config.train.precision == Precision::F16) run.scaler = std::make_unique<optim::GradScaler>();
  run.best.rule = run.task->selection();
  if (!options.init_from.empty()) {  // a new phase: the weights only (checked in train())
    CheckpointInfo info = load_weights("--init-from", options.init_from, config, *run.model);
    progress.message("initialised from '" + options.init_from + "' (step " + std::to_string(info.step) +
                     "); optimizer, schedule and task state start afresh");
  }
  if (options.resume) {
    CheckpointInfo info = load_checkpoint(run.paths.last, *run.model, run.optimizer.get(), /*restore_rng=*/true);
    run.step = info.step;
    run.task->restore_state(dp.cut_state(info.task_state));
    const std::string& last = run.paths.last;
    LSF_CHECK(run.step <= config.train.steps) << "--resume: '" << last << "' is at step " << run.step
                                              << ", beyond 'train.steps' (" << config.train.steps << ")";
    // "best_accuracy" (−1 before any evaluation): what checkpoints of LRA runs held before the
    // Task interface; read so that such runs still resume.
    const bool legacy = !info.extra.count("best_score") && info.extra.count("best_accuracy") &&
                        extra_number(info.extra, "best_accuracy", last) >= 0.0;
    if (info.extra.count("best_score") || legacy) {
      run.best.score = extra_number(info.extra, legacy ? "best_accuracy" : "best_score", last);
      LSF_CHECK(info.extra.count("best_step")) << "--resume: '" << last << "' records a best score but no 'extra.best_step'";
      run.best.step = extra_count(info.extra, "best_step", last);
      run.best.any = true;
    }
    if (info.extra.count("window_steps")) {  // absent in checkpoints older than this record
      run.window_steps = extra_count(info.extra, "window_steps", last);
      run.window_loss_sum = extra_number(info.extra, "window_loss_sum", last);
      json tally = json::parse(info.extra.count("window_tally") ? info.extra.at("window_tally") : "[]", nullptr, false);
      LSF_CHECK(tally.is_array()) << "--resume: '" << last << "': entry 'extra.window_tally' is not a JSON array";
      for (const json& entry : tally) {
        LSF_CHECK(entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_number())
            << "--resume: '" << last << "': entry 'extra.window_tally' holds " << entry.dump() << ", not [name, number]";
        run.window_tally.add(entry[0].get<std::string>(), entry[1].get<double>());
      }
    }
    if (info.extra.count("train_loss")) run.last_logged_loss = extra_number(info.extra, "train_loss", last);
    if (info.extra.count("wall_seconds")) run.prior_wall_seconds = extra_number(info.extra, "wall_seconds", last);
    if (run.scaler) {
      LSF_CHECK(info.extra.count("grad_scaler_scale") && info.extra.count("grad_scaler_growth_tracker"))
          << "--resume: '" << last << "' holds no loss-scaler state ('extra.grad_scaler_scale'), which a "
          << "train.precision = \"f16\" run saves";
      run.scaler->set_state(extra_number(info.extra, "grad_scaler_scale", last),
                            extra_count(info.extra, "grad_scaler_growth_tracker", last));
    }
    progress.message("resuming '" + run.paths.dir + "' at step " + std::to_string(run.step) + "/" +
                     std::to_string(config.train.steps));
  }
  dp.broadcast_module(*run.model);  // every rank starts from rank 0's parameters
  dp.seed_rank_generator();         // after any RNG restore: rank r's own dropout stream
  dp.attach(*run.model);
  if (!dp.is_root()) return run;    // rank 0 alone writes TensorBoard and prints
  run.tb = std::make_unique<EventWriter>(run.paths.tensorboard);
  // What the interrupted run logged after its last checkpoint is redone from step + 1 on.
  if (options.resume) run.tb->mark_restart(run.step + 1);
  // The resolved config as a Markdown code block (indented: plain Markdown, no extension needed).
  std::string config_text;
  std::istringstream lines(to_json(config));
  for (std::string line; std::getline(lines, line);) config_text += "    " + line + "\n";
  run.tb->add_text("config", config_text, run.step);
  run.tb->flush();
  std::ostringstream os;
  os << "training " << run.task->describe_data() << ", " << run.model->parameter_count() << " parameters, "
     << threads_text() << (dp.active() ? " per rank × " + std::to_string(dp.size()) + " ranks (" + dp.backend() + ")" : "")
     << (device.is_cuda() ? ", on " + device.str() : std::string()) << " → " << run.paths.dir;
  progress.message(os.str());
  return run;
}

// last.safetensors: the state to resume from, with the open log window (`window`), the last
// logged loss and the run's wall time so far (`started`: this invocation's start).
void save_last(const Run& run, const LogWindow& window, double last_logged_loss, Clock::time_point started) {
  NamedTensors task_state = run.dp->join_state(run.task->state());  // every rank's rows (a collective)
  if (!run.dp->is_root()) return;
  CheckpointInfo info;
  info.step = run.step;
  info.config = to_json(run.config);
  info.task_state = std::move(task_state);
  if (run.best.any) info.extra = {{"best_score", exact(run.best.score)}, {"best_step", std::to_string(run.best.step)}};
  json tally = json::array();
  for (const auto& [name, value] : window.tally().entries()) tally.push_back({name, value});
  info.extra["window_steps"] = std::to_string(window.steps());
  info.extra["window_loss_sum"] = exact(window.loss_sum());
  info.extra["window_tally"] = tally.dump();
  info.extra["train_loss"] = exact(last_logged_loss);
  info.extra["wall_seconds"] = exact(run.prior_wall_seconds + seconds_since(started));
  if (run.scaler) {
    info.extra["grad_scaler_scale"] = exact(run.scaler->get_scale());
    info.extra["grad_scaler_growth_tracker"] = std::to_string(run.scaler->growth_tracker());
  }
  save_checkpoint(run.paths.last, *run.model, run.optimizer.get(), info);
}

// A dev evaluation of the current model; a new best is saved as best.safetensors.
// Data parallelism: rank 0 evaluates and shares its result; it alone writes.
void evaluate_dev(Run& run, MetricsLog* metrics, ProgressLine& progress) {
  EvalResult r;
  if (run.dp->is_root()) r = run.task->evaluate(*run.model, "dev", run.config.train.eval_batches);
  r = run.dp->share(r);
  r.step = run.step;
  if (metrics) metrics->write_eval(r, /*final=*/false);
  if (run.tb) log_eval_scalars(*run.tb, r);
  std::ostringstream os;
  os << "step " << run.step << ": dev " << run.task->describe(r) << ", loss " << std::setprecision(4) << r.loss;
  const double score = r.metric(run.best.rule.metric);
  if (run.best.improved_by(score)) {
    run.best = {run.best.rule, score, run.step, true};
    CheckpointInfo info;
    info.step = run.step;
    info.config = to_json(run.config);
    info.extra = {{"dev_" + run.best.rule.metric, exact(score)}};
    if (run.dp->is_root()) save_checkpoint(run.paths.best, *run.model, nullptr, info);
    os << "  ★ best, saved";
  }
  progress.message(os.str());
  if (!run.dp->is_root()) return;
  // curves.svg follows the run; a failure to draw it must not end a run, so it is reported only.
  try {
    write_curves({run.paths.dir}, {}, run.paths.curves);
  } catch (const Error& e) {
    progress.message(std::string("could not redraw curves.svg: ") + e.what());
  }
}

// The loop: one step per batch, logging, periodic evaluation and checkpoints.
void run_loop(Run& run, int64_t end_step, MetricsLog* metrics, ProgressLine& progress, Clock::time_point started,
              TrainSummary& summary, bool profile_requested, std::ostream& log) {
  const LoopConfig& loop = run.config.train;
  const int64_t first_step = run.step;
  const Clock::time_point loop_started = Clock::now();  // the ETA leaves out data loading
  LogWindow window(loop_started);
  // The profile (TrainOptions::profile, LSF_PROFILE=1) covers training steps: evaluation and
  // checkpoint writes are paused out of it.
  const bool profile = profile_requested || profiler::enable_from_environment();
  if (profile) profiler::enable();
  window.restore(run.window_loss_sum, run.window_steps, run.window_tally, loop_started);
  summary.final_train_loss = run.last_logged_loss;
  for (; run.step < end_step;) {
    float loss = 0.0f;
    TrainStep s = forward_backward(*run.task, *run.model, *run.optimizer, *run.schedule, run.scaler.get(),
                                   loop.precision, run.step, loss, [&] { run.dp->before_backward(); });
    bool stop_requested = g_stop_signal != 0;
    {
      // Data parallelism: the gradients' mean over the ranks, and the step's logged numbers
      // (loss, units, tally, stop request) summed over them.
      profiler::PhaseScope phase("all-reduce");
      run.dp->after_backward();
      run.dp->reduce_step(loss, s, stop_requested);
    }
    const GradientCheck check = check_gradients(*run.model, *run.optimizer, run.scaler.get(), loss);
    const int64_t done = run.step + 1;
    const bool log_now = done % loop.log_every == 0 || done == loop.steps;
    double grad_norm = 0.0;  // of this step's gradients, before clipping: logged with the window
    if (check.faulty) {
      std::ostringstream what;
      what << "step " << done << ": non-finite " << (std::isfinite(loss) ? "gradient" : "loss") << " (loss "
           << loss << "; first parameter with a non-finite gradient: "
           << (check.bad_param.empty() ? std::string("none") : "'" + check.bad_param + "'") << ")";
      LSF_CHECK(loop.non_finite == NonFiniteAction::Skip)
          << what.str() << "; training stopped (train.non_finite = \"stop\"). The last checkpoint is '" << run.paths.last
          << "' if one was written; --set train.non_finite=skip skips such steps instead";
      progress.message("warning: " + what.str() + ": the update is skipped (train.non_finite = \"skip\")");
    } else if (check.update()) {  // (a scaler skip has nothing to do here: end_update lowers the scale)
      grad_norm = apply_update(*run.model, *run.optimizer, run.config.optimizer.grad_clip, log_now);
    }
    const bool updated = check.update();
    if (run.tb && updated && loop.tensorboard_every > 0 && done % loop.tensorboard_every == 0) {
      profiler::PauseScope not_a_step;
      log_histograms(*run.tb, *run.model, done);  // the updated parameters, this step's gradients
    }
    end_update(*run.optimizer, run.scaler.get());
    run.step = done;

    if (updated) window.add(loss, s);  // a skipped step's NaN would poison the window's mean
    const std::vector<Metric> shown = run.task->window_metrics(window.tally(), window.steps());
    const double eta = seconds_since(loop_started) / double(done - first_step) * double(loop.steps - done);
    progress.update(progress_text(done, loop.steps, window.mean_loss(), shown, run.optimizer->lr(), window.rate(),
                                  run.task->throughput_unit(), eta),
                    log_now);
    if (log_now) {
      summary.final_train_loss = window.mean_loss();
      std::vector<Metric> logged = shown;
      logged.push_back({"grad_norm", grad_norm, Metric::Kind::Number, ""});
      const double rate = window.rate();  // once: it reads the clock
      if (metrics) metrics->write_train(done, window.mean_loss(), logged, run.optimizer->lr(), run.task->throughput_unit(), rate,
                          run.prior_wall_seconds + seconds_since(started));
      if (run.tb) log_train_scalars(*run.tb, done, window.mean_loss(), shown, run.optimizer->lr(), run.task->throughput_unit(), rate,
                        grad_norm);
      window.restart(Clock::now());
    }
    profiler::PauseScope not_a_step;
    if ((loop.eval_every > 0 && done % loop.eval_every == 0) || done == loop.steps) evaluate_dev(run, metrics, progress);
    // SIGINT / SIGTERM: this step is done; save and stop (every rank after the same step).
    const bool stop = run.dp->active() ? stop_requested : g_stop_signal != 0;
    if ((loop.checkpoint_every > 0 && done % loop.checkpoint_every == 0) || done == end_step || stop)
      save_last(run, window, summary.final_train_loss, started);
    if (stop) break;
  }
  progress.finish();
  if (profile) {
    profiler::disable();
    log << "profile of " << (run.step - first_step) << " training steps (evaluation and checkpoints excluded):\n"
             << profiler::format_table(profiler::snapshot());
  }
}

// summary.json and the lines printed at the end of a run.
void report(const Run& run, const TrainSummary& summary, std::ostream& out) {
  json s = {{"steps", summary.steps},
            {"best_step", summary.best_step},
            {"dev", eval_json(summary.dev)},
            {"test", eval_json(summary.test)},
            {"final_train_loss", summary.final_train_loss},
            {"wall_seconds", summary.wall_seconds},
            {"threads", get_num_threads()},
            {"best_checkpoint", summary.best_checkpoint},
            {"last_checkpoint", summary.last_checkpoint},
            {"metrics", summary.metrics_path},
            {"config", summary.config_path},
            {"eval_command", summary.eval_command}};
  write_file_atomically(summary.summary_path, s.dump(2) + "\n");

  out << "\n"
      << "Finished " << summary.steps << " steps in " << format_duration(summary.wall_seconds) << " (" << threads_text() << ")\n"
      << "  dev " << run.task->describe(summary.dev) << "  best checkpoint: step " << summary.best_step << "\n"
      << "  test " << run.task->describe(summary.test) << "\n"
      << "  checkpoint     " << summary.best_checkpoint << "   (resume from " << summary.last_checkpoint << ")\n"
      << "  metrics        " << summary.metrics_path << "\n"
      << "  summary        " << summary.summary_path << "\n"
      << "  re-check       " << summary.eval_command << "\n";
}

}  // namespace

std::unique_ptr<optim::Optimizer> make_optimizer(const RunConfig& c, const nn::Module& model) {
  const OptimizerConfig& o = c.optimizer;
  // One group (every parameter decayed) unless optimizer.no_decay names some: then the decayed
  // group and the no-decay group, in that order (optim::decay_groups).
  auto build = [&](auto options) -> std::unique_ptr<optim::Optimizer> {
    using Options = decltype(options);
    using Optimizer = std::conditional_t<std::is_same_v<Options, optim::AdamWOptions>, optim::AdamW, optim::Adam>;
    if (o.no_decay.empty()) return std::make_unique<Optimizer>(model.named_parameters(), options);
    return std::make_unique<Optimizer>(optim::decay_groups(model.named_parameters(), options, o.no_decay));
  };
  switch (o.name) {
    case OptimizerKind::Adam:
      return build(optim::AdamOptions{.lr = o.lr, .betas = o.betas, .eps = o.eps, .weight_decay = o.weight_decay});
    case OptimizerKind::AdamW:
      return build(optim::AdamWOptions{.lr = o.lr, .betas = o.betas, .eps = o.eps, .weight_decay = o.weight_decay});
  }
  LSF_FAIL() << "internal: optimizer.name holds no OptimizerKind (" << int(o.name) << ")";
}

std::unique_ptr<optim::Schedule> make_schedule(const RunConfig& c) {
  const ScheduleConfig& s = c.schedule;
  const double lr = c.optimizer.lr;
  const int64_t steps = c.train.steps;
  switch (s.name) {
    case ScheduleKind::OneCycle:
      return std::make_unique<optim::OneCycle>(optim::OneCycleOptions{
          .max_lr = lr, .total_steps = steps, .pct_start = double(s.warmup_steps) / double(steps), .anneal = s.anneal,
          .cycle_momentum = s.cycle_momentum, .base_momentum = s.base_momentum, .max_momentum = s.max_momentum,
          .div_factor = s.div_factor, .final_div_factor = s.final_div_factor});
    case ScheduleKind::WarmupCosine:
      return std::make_unique<optim::WarmupCosine>(
          optim::WarmupCosineOptions{.lr = lr, .warmup_steps = s.warmup_steps, .total_steps = steps, .min_lr = s.min_lr,
                                     .warmup_start_factor = s.warmup_start_factor, .rebase = s.rebase});
    case ScheduleKind::WarmupConstant:
      return std::make_unique<optim::WarmupConstant>(optim::WarmupConstantOptions{.lr = lr, .warmup_steps = s.warmup_steps});
    case ScheduleKind::Linear:
      return std::make_unique<optim::LinearDecay>(
          optim::LinearDecayOptions{.lr = lr, .total_steps = steps, .warmup_steps = s.warmup_steps, .end_lr = s.min_lr});
    case ScheduleKind::Constant:
      return std::make_unique<optim::ConstantLR>(lr);
  }
  LSF_FAIL() << "internal: schedule.name holds no ScheduleKind (" << int(s.name) << ")";
}

std::string shell_quote(const std::string& s) {
  if (s.find_first_of(" \t'\"$\\`*?;&|<>()") == std::string::npos) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

RunConfig checkpoint_config(const std::string& path, const std::vector<std::string>& overrides) {
  SafetensorsContents file = load_safetensors(path);
  auto it = file.metadata.find("lsformer.config");
  LSF_CHECK(it != file.metadata.end() && !it->second.empty())
      << "'" << path << "' holds no run config (not a checkpoint written by lsf train?)";
  return parse_config(it->second, overrides, path + " (stored config)");
}

EvalResult evaluate_checkpoint(const std::string& path, const std::string& split, int threads,
                               const std::vector<std::string>& overrides) {
  LSF_CHECK(fs::exists(path)) << "checkpoint '" << path << "' does not exist";
  LSF_CHECK(split == "train" || split == "dev" || split == "test") << "unknown split '" << split << "' (expected train, dev or test)";
  RunConfig config = checkpoint_config(path, overrides);
  if (threads > 0) config.train.threads = threads;
  if (config.train.threads > 0) set_num_threads(int(config.train.threads));
  std::unique_ptr<Task> task = make_task(config);
  check_memory_fits(task->estimate_memory(MemoryUse::Eval), config, "evaluating '" + path + "'");
  task->load_data({split});
  return evaluate_file(*task, config, path, split, overrides.empty() ? "lsf eval" : "lsf eval with --set");
}

ConfusionMatrix checkpoint_confusion_matrix(const std::string& path, const std::string& split, int threads) {
  LSF_CHECK(fs::exists(path)) << "checkpoint '" << path << "' does not exist";
  RunConfig config = checkpoint_config(path);
  if (threads > 0) config.train.threads = threads;
  if (config.train.threads > 0) set_num_threads(int(config.train.threads));
  std::unique_ptr<Task> task = make_task(config);
  if (!task->has_confusion_matrix()) return {};
  check_memory_fits(task->estimate_memory(MemoryUse::Eval), config, "the confusion matrix of '" + path + "'");
  task->load_data({split});
  auto model = task->build_model();
  load_weights("the confusion matrix", path, config, *model);
  return task->confusion_matrix(*model, split);
}

std::string describe_result(const std::string& checkpoint, const EvalResult& result) {
  return make_task(checkpoint_config(checkpoint))->describe(result);
}

TrainSummary train(const RunConfig& config, const TrainOptions& options) {
  const Clock::time_point started = Clock::now();
  DataParallel dp(options.world, config, options.bucket_bytes);
  // Data parallelism: rank 0 prints; the others print one line at start and their errors.
  std::ostream silent(nullptr);
  std::ostream& rank_log = options.log ? *options.log : std::cerr;
  std::ostream& log = dp.is_root() ? rank_log : silent;
  std::ostream& out = !dp.is_root() ? silent : options.out ? *options.out : std::cout;
  const bool live = options.progress >= 0 ? options.progress == 1 : (options.log == nullptr && isatty(fileno(stderr)));
  ProgressLine progress(log, live);
  if (dp.active())
    rank_log << ("rank " + std::to_string(dp.rank()) + "/" + std::to_string(dp.size()) + ": pid " + std::to_string(getpid()) +
                 ", " + dp.backend() + "\n")  // one write: the ranks' lines do not interleave
             << std::flush;
  if (!options.init_from.empty()) {  // before the run directory is made
    LSF_CHECK(!options.resume) << "--init-from starts a new run from a checkpoint's weights; it cannot be combined with --resume";
    LSF_CHECK(fs::exists(options.init_from)) << "--init-from: checkpoint '" << options.init_from << "' does not exist";
  }

  Run run = start_run(config, options, progress, dp);
  TrainSummary summary;
  summary.run_dir = run.paths.dir;
  summary.config_path = run.paths.config;
  summary.metrics_path = run.paths.metrics;
  summary.summary_path = run.paths.summary;
  summary.best_checkpoint = run.paths.best;
  summary.last_checkpoint = run.paths.last;
  std::unique_ptr<MetricsLog> metrics;  // rank 0's
  if (dp.is_root()) metrics = std::make_unique<MetricsLog>(run.paths.metrics, options.resume, run.step);
  if (metrics)
    for (const std::string& warning : metrics->warnings()) progress.message("warning: " + warning);

  const int64_t end_step = options.stop_after > 0 ? std::min(options.stop_after, config.train.steps) : config.train.steps;
  {
    const StopSignals signals(options.handle_signals);
    std::optional<autograd::AnomalyMode> anomaly;  // --detect-anomaly: NaN / Inf named by op and module
    if (options.detect_anomaly) anomaly.emplace();
    try {
      run_loop(run, end_step, metrics.get(), progress, started, summary, options.profile, log);
    } catch (const Error& e) {
      if (!options.detect_anomaly || std::string(e.what()).rfind("anomaly:", 0) != 0) throw;
      throw Error("step " + std::to_string(run.step + 1) + ": " + e.what());
    }
  }
  summary.steps = run.step;
  summary.best_step = run.best.step;
  summary.best_periodic_score = run.best.score;
  summary.stop_signal = int(g_stop_signal);
  if (summary.stop_signal != 0) {  // SIGINT / SIGTERM: the loop saved last.safetensors after its step
    summary.wall_seconds = run.prior_wall_seconds + seconds_since(started);
    progress.message(std::string("interrupted by ") + (summary.stop_signal == SIGINT ? "SIGINT" : "SIGTERM") +
                     " after step " + std::to_string(run.step) + "/" + std::to_string(config.train.steps) + "; saved " +
                     run.paths.last + "\nresume with: " + options.program + " train --resume --out " +
                     shell_quote(run.paths.dir));
    return summary;
  }
  if (run.step < config.train.steps) {  // stopped early (stop_after): last.safetensors holds the state
    summary.wall_seconds = run.prior_wall_seconds + seconds_since(started);
    return summary;
  }
  summary.finished = true;
  const bool best_exists = dp.broadcast_string(dp.is_root() && fs::exists(run.paths.best) ? "1" : "0") == "1";
  if (!best_exists) {  // resumed a finished run whose best is gone
    run.best.any = false;
    evaluate_dev(run, metrics.get(), progress);
    summary.best_step = run.best.step;
    summary.best_periodic_score = run.best.score;
  }

  // The best checkpoint on the whole dev and test splits (what `lsf eval` computes).
  // Data parallelism: on rank 0, shared with the others.
  if (dp.is_root()) {
    summary.dev = evaluate_file(*run.task, run.config, run.paths.best, "dev", "the final evaluation");
    summary.test = evaluate_file(*run.task, run.config, run.paths.best, "test", "the final evaluation");
  }
  summary.dev = dp.share(summary.dev);
  summary.test = dp.share(summary.test);
  if (metrics) {
    metrics->write_eval(summary.dev, /*final=*/true);
    metrics->write_eval(summary.test, /*final=*/true);
    log_eval_scalars(*run.tb, summary.test);  // test/<metric> at the best checkpoint's step
  }
  summary.eval_command = options.program + " eval --checkpoint " + shell_quote(run.paths.best) + " --split test";
  summary.wall_seconds = run.prior_wall_seconds + seconds_since(started);
  if (dp.is_root()) report(run, summary, out);
  return summary;
}

}  // namespace lsf::train
