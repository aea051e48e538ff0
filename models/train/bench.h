// Timing a config's training step on this machine (`lsf bench`): the data, model, optimizer and
// schedule are set up as `lsf train` sets them up (models/train/trainer.h), and each step does
// what a training step does — the schedule's lr, the task's batch, forward and loss, backward,
// the non-finite check, clipping, the optimizer update, zero_grad — without a run directory,
// logging, evaluation or checkpoints. So the figures are those of `lsf train` with the same
// config and threads, and nothing is written to disk.
//
//   BenchResult r = bench_training(load_config("configs/quickstart.json"), {.warmup_steps = 2, .steps = 10});
//   std::cout << r.median_seconds() * 1e3 << " ms per step, " << r.units_per_step / r.median_seconds()
//             << " " << r.unit << "/s\n";
//
// Steps are numbered as training numbers them: the warm-up steps are batches 0 … w − 1 and the
// timed ones w … w + n − 1, and the model after them has exactly the parameters a `lsf train` run
// of the same config has after w + n steps (tests/test_bench.cpp). forward_only times the
// forward and loss of the same batches without gradients or updates, in evaluation mode (no
// dropout): what one batch of inference costs.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "lsformer/models/nn/module.h"
#include "lsformer/models/train/config.h"

namespace lsf::train {

struct BenchOptions {
  int64_t warmup_steps = 2;   // untimed steps first: allocator caches, BLAS buffers, page faults
  int64_t steps = 10;         // timed steps (≥ 1)
  bool forward_only = false;  // forward and loss only (no gradients, no update), evaluation mode
  bool profile = false;       // the built-in profiler's table of the timed steps (engine/profiler.h)
  std::ostream* log = nullptr;  // "loading ...", "timing ..." lines; null: none
};

struct BenchResult {
  std::string data;                   // the task's describe_data() line
  int64_t parameters = 0;             // trainable scalars
  int threads = 0;                    // the CPU threads the steps ran with
  std::string unit;                   // "samples" or "tokens": what units_per_step counts
  double units_per_step = 0;          // mean over the timed steps (the task's TrainStep::units)
  std::vector<double> step_seconds;   // wall time of each timed step, in order
  int64_t non_finite_steps = 0;       // steps (warm-up included) whose loss or gradient was not finite;
                                      // their updates were skipped, as train.non_finite = "skip" does
  std::string device;                 // train.device: where the steps ran ("cpu", "cuda:0", ...)
  int64_t baseline_bytes = 0;         // tensors alive on that device before the timed steps (parameters,
                                      // optimizer state after warm-up, data held as tensors)
  int64_t peak_bytes = 0;             // that device's allocator high-water mark during the timed steps
  int64_t rss_peak_bytes = -1;        // the process's resident-set peak so far (VmHWM, memory_usage.h): also
                                      // counts what the allocator does not see (BLAS buffers, its cache,
                                      // code, the dataset); −1 where /proc/self/status is unreadable
  double forward_multiply_adds = 0;   // per timed step (mean): the multiply-adds of the forward's products
                                      // (matmul, Linear, conv, the fused attention cores; ops/flops.h)
  std::string profile;                // the profiler's table (options.profile); empty otherwise
  std::shared_ptr<nn::Module> model;  // after the last step

  double median_seconds() const;   // of step_seconds (the mean of the middle two for an even count)
  double fastest_seconds() const;
  double slowest_seconds() const;
  double mean_seconds() const;
  // The FLOPs of a step's products: 2 per multiply-add of the forward, and in training 3 times
  // that, for each forward product's two in the backward (its inputs' and its weight's
  // gradients). An estimate in the usual "6 × parameters × tokens" sense: it leaves out
  // elementwise work and the fused cores' recomputation in their backward.
  double flops_per_step() const;
  bool forward_only = false;          // how the steps were timed (BenchOptions::forward_only)
};

// Times `steps` training steps of `config` after `warmup_steps` untimed ones, with
// config.train.threads threads when set. Errors: bad options (naming them), and whatever
// `lsf train` would refuse for the config (memory that cannot fit, missing data, ...).
BenchResult bench_training(const RunConfig& config, const BenchOptions& options);

}  // namespace lsf::train
