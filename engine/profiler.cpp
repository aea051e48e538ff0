// The profiler's bookkeeping: a per-thread stack of open op scopes (for self time), and the
// statistics behind one mutex (a kernel call is microseconds at least; an uncontended lock is
// tens of nanoseconds).
#include "lsformer/engine/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace lsf::profiler {

namespace detail {
std::atomic<bool> enabled_flag{false};
}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;

struct Frame {
  const char* name;
  Clock::time_point start;
  double child_seconds;
};

struct OpTotals {
  int64_t calls = 0;
  double self_seconds = 0;
};

struct PhaseTotals {
  double forward_seconds = 0;
  double backward_seconds = 0;
  int64_t forward_calls = 0;
  int64_t backward_calls = 0;
};

struct State {
  std::mutex mutex;
  std::unordered_map<const char*, OpTotals> ops;
  // Keyed by the phase's text, not its pointer: the same literal may live at several addresses.
  std::map<std::string, PhaseTotals> phases;
  double wall_seconds = 0;
  Clock::time_point enabled_since;
};

State& state() {
  static State s;
  return s;
}

thread_local std::vector<Frame> open_frames;
thread_local const char* phase_now = "other";
thread_local bool in_backward = false;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

void enable() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (detail::enabled_flag.load()) return;
  s.enabled_since = Clock::now();
  detail::enabled_flag.store(true);
}

void disable() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!detail::enabled_flag.load()) return;
  detail::enabled_flag.store(false);
  s.wall_seconds += seconds_between(s.enabled_since, Clock::now());
}

void reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.ops.clear();
  s.phases.clear();
  s.wall_seconds = 0;
  s.enabled_since = Clock::now();
}

bool enable_from_environment() {
  const char* v = std::getenv("LSF_PROFILE");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "0") == 0) return false;
  enable();
  return true;
}

OpScope::OpScope(const char* name) : active_(enabled()) {
  if (active_) open_frames.push_back({name, Clock::now(), 0.0});
}

OpScope::~OpScope() {
  if (!active_) return;
  const Frame f = open_frames.back();
  open_frames.pop_back();
  const double elapsed = seconds_between(f.start, Clock::now());
  const double self = std::max(0.0, elapsed - f.child_seconds);
  if (!open_frames.empty()) open_frames.back().child_seconds += elapsed;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  OpTotals& op = s.ops[f.name];
  op.calls += 1;
  op.self_seconds += self;
  PhaseTotals& ph = s.phases[phase_now];
  (in_backward ? ph.backward_seconds : ph.forward_seconds) += self;
  (in_backward ? ph.backward_calls : ph.forward_calls) += 1;
}

PhaseScope::PhaseScope(const char* phase) : previous_(phase_now) { phase_now = phase; }
PhaseScope::~PhaseScope() { phase_now = previous_; }

const char* current_phase() { return phase_now; }

BackwardScope::BackwardScope(const char* phase) : previous_phase_(phase_now), previous_backward_(in_backward) {
  phase_now = phase;
  in_backward = true;
}
BackwardScope::~BackwardScope() {
  phase_now = previous_phase_;
  in_backward = previous_backward_;
}

PauseScope::PauseScope() : was_enabled_(enabled()) {
  if (was_enabled_) disable();
}
PauseScope::~PauseScope() {
  if (was_enabled_) enable();
}

Report snapshot() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Report r;
  r.wall_seconds = s.wall_seconds;
  if (detail::enabled_flag.load()) r.wall_seconds += seconds_between(s.enabled_since, Clock::now());
  for (const auto& [name, t] : s.ops) {
    r.ops.push_back({name, t.calls, t.self_seconds});
    r.kernel_seconds += t.self_seconds;
  }
  std::sort(r.ops.begin(), r.ops.end(), [](const OpStat& a, const OpStat& b) {
    return a.self_seconds != b.self_seconds ? a.self_seconds > b.self_seconds : a.name < b.name;
  });
  for (const auto& [phase, t] : s.phases) r.phases.push_back({phase, t.forward_seconds, t.backward_seconds, t.forward_calls, t.backward_calls});
  std::sort(r.phases.begin(), r.phases.end(), [](const PhaseStat& a, const PhaseStat& b) {
    const double ta = a.forward_seconds + a.backward_seconds, tb = b.forward_seconds + b.backward_seconds;
    return ta != tb ? ta > tb : a.phase < b.phase;
  });
  return r;
}

std::string format_table(const Report& r, int max_ops) {
  std::ostringstream out;
  out << std::fixed;
  const double wall = r.wall_seconds > 0 ? r.wall_seconds : 1.0;
  auto pct = [&](double s) { return 100.0 * s / wall; };
  out << "profile: " << std::setprecision(3) << r.wall_seconds << " s profiled, " << r.kernel_seconds
      << " s in kernels, " << r.overhead_seconds() << " s framework overhead\n";
  out << "  " << std::left << std::setw(40) << "op (self time)" << std::right << std::setw(10) << "calls"
      << std::setw(12) << "total ms" << std::setw(12) << "us/call" << std::setw(8) << "%" << "\n";
  int shown = 0;
  for (const OpStat& op : r.ops) {
    if (max_ops > 0 && shown++ >= max_ops) {
      out << "  ... " << (r.ops.size() - size_t(max_ops)) << " more ops\n";
      break;
    }
    out << "  " << std::left << std::setw(40) << op.name << std::right << std::setw(10) << op.calls
        << std::setprecision(1) << std::setw(12) << op.self_seconds * 1e3 << std::setw(12)
        << (op.calls ? op.self_seconds * 1e6 / double(op.calls) : 0.0) << std::setw(8) << pct(op.self_seconds)
        << "\n";
  }
  out << "  " << std::left << std::setw(40) << "phase" << std::right << std::setw(12) << "forward ms"
      << std::setw(12) << "backward ms" << std::setw(12) << "total ms" << std::setw(8) << "%" << "\n";
  for (const PhaseStat& ph : r.phases) {
    const double total = ph.forward_seconds + ph.backward_seconds;
    out << "  " << std::left << std::setw(40) << ph.phase << std::right << std::setprecision(1) << std::setw(12)
        << ph.forward_seconds * 1e3 << std::setw(12) << ph.backward_seconds * 1e3 << std::setw(12) << total * 1e3
        << std::setw(8) << pct(total) << "\n";
  }
  out << "  " << std::left << std::setw(40) << "framework overhead (outside kernels)" << std::right
      << std::setw(12) << "" << std::setw(12) << "" << std::setprecision(1) << std::setw(12)
      << r.overhead_seconds() * 1e3 << std::setw(8) << pct(r.overhead_seconds()) << "\n";
  return out.str();
}

}  // namespace lsf::profiler
