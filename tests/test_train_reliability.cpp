// Reliability of the training loop (issue #15): non-finite losses and gradients are caught by
// name (train.non_finite), resumes keep what an uninterrupted run writes (a log window that
// spans the resume, summary.json of a finished run, a missing best.safetensors, a torn last
// line of metrics.jsonl), and checkpoint entries out of range are errors naming them. A toy
// family (a two-layer linear regression that can be told to fail at a given step) keeps every
// case to a fraction of a second.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "helpers.h"
#include "run_helpers.h"
#include "lsformer/engine/anomaly.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/run_directory.h"
#include "lsformer/models/train/trainer.h"

namespace fs = std::filesystem;
using namespace lsf;
using Catch::Contains;

namespace {

struct FaultSections final : train::TaskSections {
  int64_t nan_loss_at = -1;  // data.nan_loss_at: the 0-based step whose loss is NaN (−1: none)
  int64_t inf_grad_at = -1;  // data.inf_grad_at: the step whose loss is finite but gives "1.weight" an infinite gradient
  std::unique_ptr<train::TaskSections> clone() const override { return std::make_unique<FaultSections>(*this); }
  void visit(train::FieldVisitor& v) override {
    v.field("data.nan_loss_at", nan_loss_at);
    v.field("data.inf_grad_at", inf_grad_at);
  }
};

// y = 3x + 1, batches a pure function of the step.
class FaultTask final : public train::Task {
 public:
  explicit FaultTask(const train::RunConfig& c) : config_(c), s_(c.sections_as<FaultSections>()) {}
  void load_data(const std::vector<std::string>&) override {}
  std::string describe_data() const override { return "fault regression"; }
  std::shared_ptr<nn::Module> build_model() override {
    auto seq = std::make_shared<nn::Sequential>();
    seq->push_back(std::make_shared<nn::Linear>(1, 4));
    seq->push_back(std::make_shared<nn::Linear>(4, 1));
    return seq;
  }
  train::TrainStep train_step(nn::Module& model, int64_t step) override {
    auto [x, y] = batch(step * 8, 8);
    train::TrainStep t;
    t.loss = mean(pow(sub(forward(model, x), y), 2));
    if (step == s_.nan_loss_at) t.loss = mul(t.loss, std::nan(""));
    if (step == s_.inf_grad_at) {
      // sqrt(w − w) adds 0 to the loss and an infinite gradient (1 / 2√0) to "1.weight" only.
      const Tensor w = model.named_parameters()[2].second;  // 0.weight, 0.bias, 1.weight, 1.bias
      t.loss = add(t.loss, sum(lsf::sqrt(sub(w, w.detach()))));
    }
    t.units = 8;
    t.tally.add("sq_error", t.loss.item<float>() * 8.0);
    t.tally.add("n", 8);
    return t;
  }
  std::vector<train::Metric> window_metrics(const train::Tally& sums, int64_t) const override {
    return {{"mse", sums.get("sq_error") / sums.get("n"), train::Metric::Kind::Number, "mse"}};
  }
  const char* throughput_unit() const override { return "points"; }
  train::EvalResult evaluate(nn::Module& model, const std::string& split, int64_t) override {
    NoGradGuard no_grad;
    auto [x, y] = batch(split == "dev" ? 1000 : 2000, 32);
    train::EvalResult r;
    r.split = split;
    r.loss = mean(pow(sub(forward(model, x), y), 2)).item<float>();
    r.metrics = {{"mse", r.loss, train::Metric::Kind::Number, "mse"}};
    return r;
  }
  train::Selection selection() const override { return {"mse", /*higher_is_better=*/false}; }
  std::string describe(const train::EvalResult& r) const override { return "mse " + std::to_string(r.metric("mse")); }

 private:
  static Tensor forward(nn::Module& model, const Tensor& x) { return dynamic_cast<nn::Sequential&>(model).forward(x); }
  static std::pair<Tensor, Tensor> batch(int64_t start, int64_t n) {
    std::vector<float> xs(n), ys(n);
    for (int64_t i = 0; i < n; ++i) {
      xs[i] = float(((start + i) * 7 % 97) / 48.5 - 1.0);
      ys[i] = 3.0f * xs[i] + 1.0f;
    }
    return {tensor(xs, {n, 1}), tensor(ys, {n, 1})};
  }
  train::RunConfig config_;
  FaultSections s_;
};

[[maybe_unused]] const bool kRegistered =
    train::register_task_family(train::task_family_of<FaultSections, FaultTask>("faults", {"fault_regression"}));

const std::string kFaults = R"({
  "data": {"task": "fault_regression"},
  "optimizer": {"lr": 0.05},
  "schedule": {"name": "constant"},
  "train": {"steps": 30, "batch_size": 8, "eval_every": 10, "log_every": 5, "checkpoint_every": 5, "seed": 2, "threads": 1}
})";

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("train_rel", name); }

std::vector<nlohmann::json> train_lines(const fs::path& dir) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.at("split") == "train") lines.push_back(j);
  }
  return lines;
}

// Rewrites checkpoint `path` with `meta` entries replaced (an empty value removes the key).
void edit_metadata(const fs::path& path, const std::map<std::string, std::string>& meta) {
  SafetensorsContents c = load_safetensors(path.string());
  for (const auto& [k, v] : meta) {
    if (v.empty()) c.metadata.erase(k);
    else c.metadata[k] = v;
  }
  save_safetensors(path.string(), NamedTensors(c.tensors.begin(), c.tensors.end()), c.metadata);
}

}  // namespace

TEST_CASE("a non-finite loss or gradient stops the run naming the step, the loss and the parameter", "[train][reliability]") {
  std::ostringstream log;
  const fs::path dir = fresh_dir("nonfinite");
  CHECK_THROWS_WITH(testing::run_training(train::parse_config(kFaults, {"data.inf_grad_at=6"}), dir, log),
                    Contains("step 7: non-finite gradient (loss ") &&
                        Contains("first parameter with a non-finite gradient: '1.weight'") &&
                        Contains("train.non_finite=skip"));
  fs::remove_all(dir);
  CHECK_THROWS_WITH(testing::run_training(train::parse_config(kFaults, {"data.nan_loss_at=3"}), dir, log),
                    Contains("step 4: non-finite loss (loss nan") && Contains("'0.weight'"));
  fs::remove_all(dir);
  CHECK_THROWS_WITH(train::parse_config(kFaults, {"train.non_finite=ignore"}),
                    Contains("'train.non_finite'") && Contains("stop") && Contains("skip"));
}

TEST_CASE("train.non_finite = skip skips the faulty update and goes on", "[train][reliability]") {
  std::ostringstream log;
  const fs::path dir = fresh_dir("skip");
  train::TrainSummary s = testing::run_training(train::parse_config(kFaults, {"data.inf_grad_at=6", "train.non_finite=skip"}), dir, log);
  CHECK(s.finished);
  CHECK_THAT(log.str(), Contains("warning: step 7: non-finite gradient") && Contains("'1.weight'") && Contains("skipped"));
  for (const auto& [name, t] : load_safetensors((dir / "last.safetensors").string()).tensors)
    for (float v : t.to(kF32).to_vector<float>()) REQUIRE(std::isfinite(v));
  // The skipped step's update and its loss are left out: the window of steps 6..10 averages 4.
  for (const auto& line : train_lines(dir)) CHECK(std::isfinite(line.at("loss").get<double>()));
  // Identical to a run whose step 7 does not exist? No: the batch of step 7 is skipped, not
  // replaced, so the step count still reaches train.steps.
  CHECK(s.steps == 30);
  fs::remove_all(dir);
}

TEST_CASE("a log window spanning a resume writes the line an uninterrupted run writes", "[train][reliability]") {
  const train::RunConfig config = train::parse_config(kFaults);
  std::ostringstream log;
  const fs::path a = fresh_dir("window_a"), b = fresh_dir("window_b");
  testing::run_training(config, a, log);
  testing::run_training(config, b, log, false, /*stop_after=*/7);  // steps 6 and 7 of the window 6..10 before the stop
  // A run killed while writing a line leaves it torn: dropped with a warning on resume.
  { std::ofstream(b / "metrics.jsonl", std::ios::app) << R"({"split": "train", "step": 8, "lo)"; }
  std::ostringstream resumed_log;
  testing::run_training(config, b, resumed_log, /*resume=*/true);
  CHECK_THAT(resumed_log.str(), Contains("warning: dropped line") && Contains("torn last line"));
  const auto la = train_lines(a), lb = train_lines(b);
  REQUIRE(la.size() == 6);
  REQUIRE(lb.size() == la.size());
  for (size_t i = 0; i < la.size(); ++i) {
    INFO("train line " << i);
    CHECK(lb[i].at("step") == la[i].at("step"));
    CHECK(lb[i].at("loss").get<double>() == la[i].at("loss").get<double>());  // bit for bit
    CHECK(lb[i].at("mse").get<double>() == la[i].at("mse").get<double>());
  }
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST_CASE("resuming a finished run keeps its summary and rebuilds a missing best checkpoint", "[train][reliability]") {
  const train::RunConfig config = train::parse_config(kFaults);
  std::ostringstream log;
  const fs::path dir = fresh_dir("finished");
  const train::TrainSummary first = testing::run_training(config, dir, log);
  REQUIRE(first.finished);
  REQUIRE(first.final_train_loss > 0);
  const double saved_wall = std::stod(load_safetensors((dir / "last.safetensors").string()).metadata.at("extra.wall_seconds"));
  CHECK(saved_wall > 0);
  // Resumed as is: summary.json had final_train_loss 0 and only the resume's seconds.
  const train::TrainSummary again = testing::run_training(config, dir, log, /*resume=*/true);
  CHECK(again.finished);
  CHECK(again.final_train_loss == first.final_train_loss);
  CHECK(again.wall_seconds >= saved_wall);
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(dir / "summary.json"));
  CHECK(summary.at("final_train_loss").get<double>() == first.final_train_loss);
  CHECK(summary.at("wall_seconds").get<double>() >= saved_wall);
  // best.safetensors deleted: the resume evaluates the final weights and saves them as the best.
  fs::remove(dir / "best.safetensors");
  const train::TrainSummary rebuilt = testing::run_training(config, dir, log, /*resume=*/true);
  CHECK(rebuilt.finished);
  CHECK(fs::exists(dir / "best.safetensors"));
  CHECK(rebuilt.best_step == 30);
  CHECK(std::isfinite(rebuilt.test.metric("mse")));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint entries out of range are errors naming the entry", "[train][reliability]") {
  const train::RunConfig config = train::parse_config(kFaults);
  std::ostringstream log;
  const fs::path dir = fresh_dir("entries");
  testing::run_training(config, dir, log, false, /*stop_after=*/10);
  const fs::path last = dir / "last.safetensors", saved = dir / "saved.safetensors";
  fs::copy_file(last, saved);
  auto restore = [&] { fs::copy_file(saved, last, fs::copy_options::overwrite_existing); };
  for (const char* step : {"9223372036854775808", "18446744073709551615"}) {
    edit_metadata(last, {{"lsformer.step", step}});
    CHECK_THROWS_WITH(testing::run_training(config, dir, log, true),
                      Contains("'lsformer.step' = " + std::string(step) + " is out of range") && !Contains("-92"));
    CHECK_THROWS_WITH(train::evaluate_checkpoint(last.string(), "test"), Contains("is out of range"));
    restore();
  }
  edit_metadata(last, {{"lsformer.step", "31"}});
  CHECK_THROWS_WITH(testing::run_training(config, dir, log, true), Contains("at step 31, beyond 'train.steps' (30)"));
  restore();
  // Checkpoints of LRA runs from before the Task interface hold extra.best_accuracy: a bad one
  // said only "stod".
  edit_metadata(last, {{"extra.best_score", ""}, {"extra.best_accuracy", "abc"}});
  CHECK_THROWS_WITH(testing::run_training(config, dir, log, true), Contains("entry 'extra.best_accuracy' = \"abc\" is not a finite number"));
  restore();
  edit_metadata(last, {{"extra.best_step", "-3"}});
  CHECK_THROWS_WITH(testing::run_training(config, dir, log, true), Contains("'extra.best_step' = \"-3\" is not a non-negative integer"));
  restore();
  CHECK(testing::run_training(config, dir, log, true).finished);
  fs::remove_all(dir);
}

TEST_CASE("detect_anomaly names the op whose backward returned a non-finite gradient, with the step", "[train][reliability]") {
  std::ostringstream log;
  const fs::path dir = fresh_dir("anomaly");
  train::TrainOptions options;
  options.out_dir = dir.string();
  options.log = &log;
  options.out = &log;
  options.progress = 0;
  options.detect_anomaly = true;
  // The toy's sqrt(w − w) runs outside every module's forward: no module path to name.
  CHECK_THROWS_WITH(train::train(train::parse_config(kFaults, {"data.inf_grad_at=6"}), options),
                    Contains("step 7: anomaly: the backward of 'sqrt' (forward call site: outside every module)") &&
                        Contains("Inf (4 of 4 values"));
  CHECK_FALSE(autograd::anomaly_mode_enabled());  // the run's scope ended with it
}

TEST_CASE("a run directory in use by another run is refused (new or resumed) until that run ends", "[train][reliability]") {
  const fs::path dir = fresh_dir("locked");
  const train::RunConfig config = train::parse_config(kFaults, {});
  std::optional<train::RunPaths> first = train::open_run_directory(config, dir.string(), false);
  // The lock file names its owner; a second open (here from the same process: flock locks
  // belong to the open file) is refused with that id, whether it starts afresh or resumes.
  std::ifstream owner(dir / ".lock");
  std::string pid;
  owner >> pid;
  CHECK(pid == std::to_string(::getpid()));
  CHECK(train::run_directory_in_use(dir.string()));
  CHECK_THROWS_WITH(train::open_run_directory(config, dir.string(), false),
                    Contains("is in use by another training run (process " + pid + ")"));
  std::ostringstream log;
  CHECK_THROWS_WITH(testing::run_training(config, dir, log), Contains("is in use by another training run"));
  // Released with its paths: the directory (no checkpoint yet) starts afresh, runs, and resumes.
  first.reset();
  CHECK_FALSE(train::run_directory_in_use(dir.string()));
  testing::run_training(config, dir, log, false, /*stop_after=*/10);
  CHECK(fs::exists(dir / "last.safetensors"));
  CHECK_NOTHROW(testing::run_training(config, dir, log, /*resume=*/true));
}

TEST_CASE("a new run without --out takes the first directory that holds no run and is not in use", "[train][reliability]") {
  const fs::path base = testing::fresh_dir("train_rel", "first_free", /*create=*/true) / "run";  // siblings inside
  const train::RunConfig config = train::parse_config(kFaults, {});
  // base is held by a running run, base-2 holds a finished one, base-3 is a file: the next run
  // goes to base-4, and the one after (base-4 now held too) to base-5.
  std::optional<train::RunPaths> running = train::open_run_directory(config, base.string(), false);
  fs::create_directories(base.string() + "-2");
  std::ofstream(base.string() + "-2/last.safetensors") << "a finished run";
  std::ofstream(base.string() + "-3") << "not a directory";
  std::optional<train::RunPaths> fourth = train::open_free_run_directory(config, base.string());
  CHECK(fourth->dir == base.string() + "-4");
  CHECK(train::run_directory_in_use(fourth->dir));  // chosen and locked in one step
  CHECK(train::open_free_run_directory(config, base.string()).dir == base.string() + "-5");
  // Once the first run ends without a checkpoint, its directory is free again; train() reports
  // the directory it chose.
  running.reset();
  std::ostringstream log;
  train::TrainOptions options;
  options.out_dir = base.string();
  options.first_free_out_dir = true;
  options.log = &log;
  options.out = &log;
  options.progress = 0;
  options.stop_after = 2;
  CHECK(train::train(config, options).run_dir == base.string());
  CHECK(fs::exists(base / "last.safetensors"));
  fourth.reset();
  CHECK(train::train(config, options).run_dir == base.string() + "-4");
}
