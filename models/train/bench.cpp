// `lsf bench`'s library half (see bench.h): the set-up of trainer.cpp's start_run without a run
// directory, and its loop's step without logging, evaluation or checkpoints.
#include "lsformer/models/train/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <ostream>

#include "lsformer/engine/autocast.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/engine/cuda_api.h"
#include "lsformer/engine/error.h"
#include "lsformer/engine/parallel.h"
#include "lsformer/engine/profiler.h"
#include "lsformer/engine/random.h"
#include "lsformer/engine/storage.h"
#include "lsformer/models/optim/grad_scaler.h"
#include "lsformer/models/train/memory_estimate.h"
#include "lsformer/models/train/memory_usage.h"
#include "lsformer/models/train/task.h"
#include "lsformer/models/train/trainer.h"
#include "lsformer/models/train/update_step.h"
#include "lsformer/ops/flops.h"

namespace lsf::train {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<double> sorted(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

double BenchResult::median_seconds() const {
  LSF_CHECK(!step_seconds.empty()) << "bench: no timed steps";
  const std::vector<double> s = sorted(step_seconds);
  const size_t k = s.size();
  return k % 2 ? s[k / 2] : 0.5 * (s[k / 2 - 1] + s[k / 2]);
}
double BenchResult::fastest_seconds() const {
  LSF_CHECK(!step_seconds.empty()) << "bench: no timed steps";
  return *std::min_element(step_seconds.begin(), step_seconds.end());
}
double BenchResult::slowest_seconds() const {
  LSF_CHECK(!step_seconds.empty()) << "bench: no timed steps";
  return *std::max_element(step_seconds.begin(), step_seconds.end());
}
double BenchResult::mean_seconds() const {
  LSF_CHECK(!step_seconds.empty()) << "bench: no timed steps";
  return std::accumulate(step_seconds.begin(), step_seconds.end(), 0.0) / double(step_seconds.size());
}
double BenchResult::flops_per_step() const { return 2.0 * forward_multiply_adds * (forward_only ? 1.0 : 3.0); }

BenchResult bench_training(const RunConfig& config, const BenchOptions& options) {
  LSF_CHECK(options.steps >= 1) << "bench: the timed steps must be ≥ 1, got " << options.steps;
  LSF_CHECK(options.warmup_steps >= 0) << "bench: the warm-up steps must be ≥ 0, got " << options.warmup_steps;
  // As start_run: refused before anything large is generated or allocated; then data, the seed,
  // the model's initialisation, in that order (the same parameters as a run of the config).
  const Device device = run_device(config);
  std::unique_ptr<Task> task = make_task(config);
  check_device_supported(*task, device, config);
  check_memory_fits(task->estimate_memory(options.forward_only ? MemoryUse::Eval : MemoryUse::Train), config, "");
  if (config.train.threads > 0) set_num_threads(int(config.train.threads));
  if (options.log) *options.log << "bench: loading the training data and building the model" << std::endl;
  task->load_data({"train"});
  manual_seed(config.train.seed);
  BenchResult result;
  result.forward_only = options.forward_only;
  result.model = task->build_model();
  result.model->to(device);
  nn::Module& model = *result.model;
  result.data = task->describe_data();
  result.parameters = model.parameter_count();
  result.threads = get_num_threads();
  result.device = device.str();
  result.unit = task->throughput_unit();

  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::Schedule> schedule;
  std::unique_ptr<optim::GradScaler> scaler;  // train.precision = "f16", as lsf train
  if (!options.forward_only && config.train.precision == Precision::F16) scaler = std::make_unique<optim::GradScaler>();
  if (options.forward_only) {
    model.eval();
  } else {
    model.train();
    optimizer = make_optimizer(config, model);
    schedule = make_schedule(config);
  }

  // One step of trainer.cpp's run_loop, through the same pieces (update_step.h); a non-finite
  // step is skipped, as train.non_finite = "skip" would. Returns the units it processed.
  auto step = [&](int64_t k) {
    if (options.forward_only) {
      NoGradGuard no_grad;
      AutocastGuard autocast(autocast_dtype_of(config.train.precision));
      TrainStep s = task->train_step(model, k);
      if (!std::isfinite(s.loss.item<float>())) ++result.non_finite_steps;
      return s.units;
    }
    float loss = 0.0f;
    const TrainStep s = forward_backward(*task, model, *optimizer, *schedule, scaler.get(), config.train.precision, k, loss);
    const GradientCheck check = check_gradients(model, *optimizer, scaler.get(), loss);
    if (check.update())
      apply_update(model, *optimizer, config.optimizer.grad_clip, /*want_norm=*/false);
    else
      ++result.non_finite_steps;  // skipped (a loss-scaler overflow, or a non-finite loss or gradient)
    end_update(*optimizer, scaler.get());
    return s.units;
  };

  for (int64_t k = 0; k < options.warmup_steps; ++k) step(k);
  if (options.log)
    *options.log << "bench: timing " << options.steps << (options.steps == 1 ? " step" : " steps") << " after "
                 << options.warmup_steps << " warm-up" << std::endl;
  result.baseline_bytes = memory_stats(device).current_bytes;
  reset_peak_memory(device);
  if (options.profile) {
    profiler::reset();
    profiler::enable();
  }
  double units = 0;
  {
    // Counted over every timed step: batches may differ in shape (padding per batch). One map
    // update per product op, microseconds against steps of milliseconds.
    FlopCounter counter;
    for (int64_t k = options.warmup_steps; k < options.warmup_steps + options.steps; ++k) {
      const Clock::time_point t0 = Clock::now();
      units += step(k);
      if (device.is_cuda()) cuda::synchronize(device.index);  // the step's queued kernels inside its time
      result.step_seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    result.forward_multiply_adds = double(counter.multiply_adds()) / double(options.steps);
  }
  if (options.profile) {
    profiler::disable();
    result.profile = profiler::format_table(profiler::snapshot());
  }
  result.peak_bytes = memory_stats(device).peak_bytes;
  int64_t rss = 0, rss_peak = 0;
  if (process_rss(&rss, &rss_peak)) result.rss_peak_bytes = rss_peak;
  result.units_per_step = units / double(options.steps);
  return result;
}

}  // namespace lsf::train
