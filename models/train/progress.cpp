// The progress line and the log window of `lsf train` (see progress.h).
#include "lsformer/models/train/progress.h"

#include <cmath>
#include <iomanip>
#include <sstream>

namespace lsf::train {

std::string format_duration(double s) {
  int64_t t = int64_t(std::llround(std::max(0.0, s)));
  std::ostringstream os;
  if (t >= 3600) os << t / 3600 << "h" << std::setw(2) << std::setfill('0') << (t / 60) % 60 << "m";
  else if (t >= 60) os << t / 60 << "m" << std::setw(2) << std::setfill('0') << t % 60 << "s";
  else os << t << "s";
  return os.str();
}

std::string format_percent(double fraction) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << 100.0 * fraction << "%";
  return os.str();
}

void ProgressLine::update(const std::string& line, bool log) {
  if (live_) {
    os_ << "\r" << line << "\033[K" << std::flush;
    open_ = true;
  } else if (log) {
    os_ << line << "\n" << std::flush;
  }
}

void ProgressLine::message(const std::string& line) {
  if (open_) os_ << "\r\033[K";
  os_ << line << "\n" << std::flush;
  open_ = false;
}

void ProgressLine::finish() {
  if (open_) os_ << "\n" << std::flush;
  open_ = false;
}

void LogWindow::add(double loss, const TrainStep& step) {
  loss_ += loss;
  units_ += step.units;
  ++steps_;
  for (const auto& [name, value] : step.tally.entries()) tally_.add(name, value);
}

double LogWindow::rate() const {
  const double s = std::chrono::duration<double>(Clock::now() - start_).count();
  return s > 0 ? units_ / s : 0.0;
}

void LogWindow::restore(double loss_sum, int64_t steps, const Tally& tally, Clock::time_point now) {
  restart(now);
  loss_ = loss_sum;
  steps_ = steps;
  tally_ = tally;
}

void LogWindow::restart(Clock::time_point now) {
  start_ = now;
  loss_ = units_ = 0.0;
  steps_ = 0;
  tally_.clear();
}

std::string progress_text(int64_t step, int64_t total, double loss, const std::vector<Metric>& metrics, double lr,
                          double rate, const char* unit, double eta_seconds) {
  std::ostringstream line;
  line << "step " << step << "/" << total << "  loss " << std::fixed << std::setprecision(4) << loss;
  for (const Metric& m : metrics) {
    if (m.label.empty()) continue;
    line << "  " << m.label << " ";
    if (m.kind == Metric::Kind::Percent) line << format_percent(m.value);
    else if (m.kind == Metric::Kind::Count) line << int64_t(m.value);
    else line << std::fixed << std::setprecision(4) << m.value;
  }
  line << "  lr " << std::scientific << std::setprecision(2) << lr << "  " << std::fixed << std::setprecision(1) << rate << " "
       << unit << "/s  ETA " << format_duration(eta_seconds);
  return line.str();
}

}  // namespace lsf::train
