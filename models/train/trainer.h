// The training loop of `lsf train`, as a library call researchers can embed:
//
//   RunConfig config = load_config("configs/quickstart.json");
//   TrainSummary s = train(config, {.out_dir = "runs/quickstart"});
//   std::cout << s.test.metric("accuracy");
//
// One loop a student can follow (trainer.cpp, run_loop): the task (models/train/task.h) loads
// its data and builds its model, then for each step: schedule (lr, beta1), the task's forward
// and loss, backward, clip (optional), optimizer step, log, evaluate on dev, checkpoint. Then the
// best checkpoint (by the task's selection metric on dev) is evaluated on the whole dev and test
// splits, exactly as `lsf eval` does it. The run directory and its files are described in
// run_directory.h; checkpoints are written atomically. Resuming restores model, optimizer,
// step, RNG, the task's state and the best-so-far record, and batch k is a pure function of k,
// so a resumed run reaches the same parameters bit for bit as one that never stopped (with the
// same thread count). last.safetensors' extra entries carry what a resume needs beyond that:
// best_score / best_step, the open log window (window_steps, window_loss_sum, window_tally: so a
// metrics line whose window spans the resume equals an uninterrupted run's), train_loss (the
// last logged mean) and wall_seconds (the run's time so far). A non-finite loss or gradient stops
// the run or skips the update (train.non_finite). A new phase of a multi-phase recipe (the
// char-LM's three) starts from a checkpoint's weights alone: TrainOptions::init_from.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "lsformer/engine/distributed.h"
#include "lsformer/models/nn/module.h"
#include "lsformer/models/optim/optimizer.h"
#include "lsformer/models/optim/schedule.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/task.h"
#include "lsformer/models/train/update_step.h"  // first_non_finite_gradient, the loop's pieces

namespace lsf::train {

struct TrainOptions {
  std::string out_dir = "runs/run";  // the run directory (created)
  bool first_free_out_dir = false;   // a new run goes to the first of out_dir, out_dir-2, ... that
                                     // holds no run and is not in use (lsf train without --out);
                                     // the summary's run_dir names it
  bool resume = false;               // continue from out_dir/last.safetensors
  std::string init_from;             // a checkpoint whose weights start a new run (a new phase): loaded
                                     // strictly (same model shapes) into the freshly built model;
                                     // optimizer, schedule, step and task state start afresh. Not
                                     // with resume.
  std::string program = "lsf";       // how the printed `eval` command names the tool
  std::ostream* log = nullptr;       // progress and evaluation lines; null: std::cerr
  std::ostream* out = nullptr;       // the final summary; null: std::cout
  int progress = -1;                 // 1: one \r-updated line; 0: a line per log_every; -1: 1 on a TTY
  int64_t stop_after = 0;            // > 0: stop once this many steps are done, saving last.safetensors
                                     // and skipping the final evaluation (as an interrupted run; tests)
  bool profile = false;              // print the built-in profiler's table of the training steps at the
                                     // end (engine/profiler.h; also on with LSF_PROFILE=1)
  // Data-parallel training (models/train/data_parallel.h): this process's job, usually
  // dist::init_world(); null: one process. Every rank calls train() with the same config.
  std::shared_ptr<dist::ProcessGroup> world;
  int64_t bucket_bytes = int64_t(25) << 20;  // the gradient all-reduce's bucket size (data parallelism)
  bool detect_anomaly = false;       // anomaly mode (engine/anomaly.h) during the training steps: the
                                     // first op whose forward output holds a NaN or whose backward
                                     // returns a NaN / Inf gradient ends the run, named with its module
                                     // path and the step (lsf train --detect-anomaly); several times slower
  bool handle_signals = false;       // SIGINT / SIGTERM during the loop finish the current step, save
                                     // last.safetensors, print how to resume and return with stop_signal
                                     // set (lsf train); during loading and the final evaluation they act
                                     // as usual (nothing to save: last.safetensors is already written)
};

struct TrainSummary {
  int64_t steps = 0;                 // training steps completed
  bool finished = false;             // false when stopped early by stop_after or a signal
  int stop_signal = 0;               // SIGINT or SIGTERM when a signal stopped the run (handle_signals)
  int64_t best_step = 0;             // step of best.safetensors
  double best_periodic_score = 0;    // its selection metric in the periodic dev evaluation
  EvalResult dev, test;              // best checkpoint on the whole dev and test splits
  double final_train_loss = 0.0;     // mean loss over the last log window (kept across a resume)
  double wall_seconds = 0.0;         // the run's wall time: this invocation, final evaluation included,
                                     // plus the earlier invocations' up to the checkpoint resumed from
  std::string run_dir, config_path, metrics_path, summary_path, best_checkpoint, last_checkpoint;
  std::string eval_command;          // re-checks the test result
};

// Trains as configured (creating out_dir, or resuming from it). Errors are lsf::Error: a
// config that differs from the resumed run's, an out_dir holding a run without resume, an
// init_from checkpoint whose model differs from the config's (naming the tensors and the
// config keys that differ), ...
TrainSummary train(const RunConfig& config, const TrainOptions& options);

// `lsf eval`: rebuilds data and model from the config stored in the checkpoint (with
// `overrides` applied, "key=value" as --set; evaluation settings such as batch size may change,
// the model's shape may not: the error names the overridden keys and the tensors that no longer
// fit), loads the weights and evaluates the whole split ("dev", "test" or "train"). threads > 0
// overrides the config's train.threads.
EvalResult evaluate_checkpoint(const std::string& path, const std::string& split, int threads = 0,
                               const std::vector<std::string>& overrides = {});
// The confusion matrix of checkpoint `path`'s model on `split` (its task's, rebuilt from the stored
// config); classes == 0 when the task has none (no data is loaded then).
ConfusionMatrix checkpoint_confusion_matrix(const std::string& path, const std::string& split, int threads = 0);

// The describe() line of the checkpoint's task for a result (what `lsf eval` prints).
std::string describe_result(const std::string& checkpoint, const EvalResult& result);

// `s` as one word of a POSIX shell command line: unchanged when plain, else single-quoted.
std::string shell_quote(const std::string& s);

// The resolved config stored in a training checkpoint (an error if it holds none), with
// `overrides` applied.
RunConfig checkpoint_config(const std::string& path, const std::vector<std::string>& overrides = {});

// The optimizer and schedule the config's "optimizer" and "schedule" sections describe, over
// every parameter of `model`: one group decayed as a whole (the LRA and char-LM code bases), or,
// when optimizer.no_decay names patterns, a decayed group and a no-decay group (ViL's recipe).
std::unique_ptr<optim::Optimizer> make_optimizer(const RunConfig& config, const nn::Module& model);
std::unique_ptr<optim::Schedule> make_schedule(const RunConfig& config);

}  // namespace lsf::train
