// The run directory of `lsf train` and the files the trainer writes there:
//   config.json        the fully resolved config
//   metrics.jsonl      one JSON object per logged step ({"split":"train", step, loss, the task's
//                      window metrics, lr, <unit>_per_s, elapsed_s}) and per evaluation
//                      ({"split":"dev"|"test", step, loss, the task's metrics[, "final": true]})
//   last.safetensors   the latest state (model, optimizer, step, RNG, task state, config)
//   best.safetensors   the model with the best periodic dev result so far
//   summary.json       the final numbers and paths
//   tb/                TensorBoard event files (tensorboard.h): the scalars of metrics.jsonl and the
//                      gradient norm, the resolved config as text, histograms of parameters and
//                      gradients every train.tensorboard_every steps. A resumed run adds a new
//                      file that starts with a restart mark at the checkpoint's step + 1:
//                      TensorBoard drops the earlier files' events from there on, so the steps
//                      redone after the resumed checkpoint show once, as metrics.jsonl's do.
//   curves.svg         the training and dev curves (curves.h), redrawn at every evaluation
// Files are replaced atomically (engine's write_file_atomically, save_checkpoint).
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "lsformer/models/nn/module.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/tensorboard.h"
#include "lsformer/models/train/task.h"

namespace lsf::train {

struct RunPaths {
  explicit RunPaths(const std::string& dir);
  std::string dir, config, metrics, summary, best, last, tensorboard, curves;
  // The run's hold on RUN_DIR/.lock (open_run_directory): released when the last copy of these
  // paths is destroyed, or by the kernel when the process ends however it ends.
  std::shared_ptr<void> lock;
};

// Prepares `dir` for a run: a new run refuses a directory that holds a run (last.safetensors;
// a directory without it holds no progress and is started afresh), a resumed one needs
// last.safetensors and the same config (config_differences below). The data files are
// checked before anything is created; then the directory is made, locked (an exclusive flock
// on RUN_DIR/.lock, which holds the owner's process id: a second `lsf train` on the same
// directory, new or --resume, is refused naming that process, instead of both writing its
// files and deleting each other's temporaries) and config.json written.
RunPaths open_run_directory(const RunConfig& config, const std::string& dir, bool resume);
// For a new run in the first free one of `base`, `base`-2, `base`-3, ...: a directory that holds
// a run or is locked by another is passed over. Choosing and locking are one step, so two runs
// started at the same instant get different directories (lsf train without --out). paths.dir
// names the one chosen.
RunPaths open_free_run_directory(const RunConfig& config, const std::string& base);
// Whether a running process holds `dir`'s lock (a directory without a lock file is not in use).
bool run_directory_in_use(const std::string& dir);

// The keys whose values differ between two configs, as "key old → new, ..." (description,
// train.threads, train.non_finite and train.memory_limit are ignored: they may change on
// resume, none changes a run's values unless a fault occurs). Empty when they agree.
std::string config_differences(const RunConfig& a, const RunConfig& b);

// metrics.jsonl: fresh for a new run; on resume, the entries after the resumed step are dropped
// (they belong to the interrupted continuation, which is being redone), and so is a line that
// is not a JSON object (a torn last line of a killed run), with a warning in warnings().
class MetricsLog {
 public:
  MetricsLog(const std::string& path, bool resume, int64_t resumed_step);
  // What the resume dropped that was not simply after the resumed step ("line 12 is not ...").
  const std::vector<std::string>& warnings() const { return warnings_; }
  // A log window ending at `step`: its mean loss, the task's window metrics, the learning rate,
  // throughput in `unit` per second and the run's elapsed seconds.
  void write_train(int64_t step, double loss, const std::vector<Metric>& metrics, double lr, const std::string& unit,
                   double rate, double elapsed_s);
  // An evaluation (`final`: of the best checkpoint at the end of the run).
  void write_eval(const EvalResult& result, bool final);

 private:
  void write_line(const std::string& line);
  std::string path_;
  std::ofstream out_;
  std::vector<std::string> warnings_;
};

// TensorBoard records of a run: a log window (tags train/loss, train/<metric>, train/lr,
// train/grad_norm, train/<unit>_per_s, and the memory scalars of memory_usage.h: memory/...;
// counts are left out), an evaluation (<split>/loss,
// <split>/<metric>), and histograms of every parameter (parameters/<name>) and of every gradient
// the last backward left (gradients/<name>).
void log_train_scalars(EventWriter& tb, int64_t step, double loss, const std::vector<Metric>& metrics, double lr,
                       const std::string& unit, double rate, double grad_norm);
void log_eval_scalars(EventWriter& tb, const EvalResult& result);
void log_histograms(EventWriter& tb, const nn::Module& model, int64_t step);

}  // namespace lsf::train
