// What `lsf train` shows while it runs: the live progress line and the numbers of one log
// window ("step 250/3000  loss 1.8123  acc 35.20%  lr 9.87e-04  1502.3 samples/s  ETA 37s").
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

#include "lsformer/models/train/task.h"

namespace lsf::train {

// "42s", "3m07s", "1h05m".
std::string format_duration(double seconds);
// "43.70%".
std::string format_percent(double fraction);

// The progress line: rewritten in place on a terminal; on other streams only the lines asked
// to be logged are written, one per line.
class ProgressLine {
 public:
  ProgressLine(std::ostream& os, bool live) : os_(os), live_(live) {}
  void update(const std::string& line, bool log);
  // A line of its own (evaluations, checkpoints), leaving the live line below it.
  void message(const std::string& line);
  void finish();

 private:
  std::ostream& os_;
  bool live_;
  bool open_ = false;
};

// The training steps since the last log: summed loss and task counters, and their time.
class LogWindow {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LogWindow(Clock::time_point start) : start_(start) {}
  void add(double loss, const TrainStep& step);
  int64_t steps() const { return steps_; }
  double mean_loss() const { return steps_ ? loss_ / double(steps_) : 0.0; }
  double rate() const;  // units per second since the window started
  const Tally& tally() const { return tally_; }
  double loss_sum() const { return loss_; }
  void restart(Clock::time_point now);
  // Continues a window whose first steps ran before a resume (their summed loss and counters,
  // saved in last.safetensors), so its metrics line equals an uninterrupted run's. The rate
  // counts only the units since `now`.
  void restore(double loss_sum, int64_t steps, const Tally& tally, Clock::time_point now);

 private:
  Clock::time_point start_;
  double loss_ = 0.0, units_ = 0.0;
  int64_t steps_ = 0;
  Tally tally_;
};

// "step 250/3000  loss 1.8123  acc 35.20%  lr 9.87e-04  1502.3 samples/s  ETA 37s": the metrics
// with a label are shown, percentages as such.
std::string progress_text(int64_t step, int64_t total, double loss, const std::vector<Metric>& metrics, double lr,
                          double rate, const char* unit, double eta_seconds);

}  // namespace lsf::train
