// The built-in profiler: where a training step's time goes, per kernel and per model phase.
//
// Every backend kernel is called through its kernel table (engine/dispatch.h), so timing that
// one call site measures every op on every backend without touching the ops. Each call is an
// OpScope: its *self* time is its wall time minus the time of the scopes nested inside it (a
// fused kernel that calls the GEMM kernel is charged only for its own work). Model code marks
// phases with PhaseScope ("attention", "ffn", "layer_norm", ...); the innermost phase wins, and
// every autograd node remembers the phase it was recorded in, so the backward of an op is
// charged to the same phase as its forward. Wall time that no kernel accounts for (allocation,
// autograd bookkeeping, shape logic, Python-free but not free) is the framework overhead.
//
//   LSF_PROFILE=1 lsf train ...            // or lsf train --profile: a table at the end
//   lsf::profiler::enable(); ...steps...; std::cout << lsf::profiler::format_table(lsf::profiler::snapshot());
//
// Off by default, and then it costs one relaxed atomic load per kernel call. On CUDA, kernels
// are asynchronous: their times are launch times unless the stream is synchronised.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace lsf::profiler {

namespace detail {
extern std::atomic<bool> enabled_flag;
}  // namespace detail

inline bool enabled() { return detail::enabled_flag.load(std::memory_order_relaxed); }
// Starts (or resumes) timing; wall time counts only while enabled.
void enable();
void disable();
// Clears every statistic (keeps the on/off state).
void reset();
// Enables the profiler when the environment variable LSF_PROFILE is set to anything but "0" or
// an empty string; returns whether it did.
bool enable_from_environment();

// Times one kernel call (used by the kernel tables; model code rarely needs it). `name` must
// outlive the program (a string literal): statistics are keyed by the pointer.
class OpScope {
 public:
  explicit OpScope(const char* name);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  bool active_;
};

// Names the model phase of the work inside its scope. `phase` must be a string literal.
class PhaseScope {
 public:
  explicit PhaseScope(const char* phase);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  const char* previous_;
};

// The phase work is charged to now ("other" outside every PhaseScope); autograd nodes store it.
const char* current_phase();

// Marks the backward pass (run by autograd): the phase's time is counted as backward.
class BackwardScope {
 public:
  explicit BackwardScope(const char* phase);
  ~BackwardScope();
  BackwardScope(const BackwardScope&) = delete;
  BackwardScope& operator=(const BackwardScope&) = delete;

 private:
  const char* previous_phase_;
  bool previous_backward_;
};

// Stops counting in its scope (e.g. evaluation inside a profiled training run), then resumes.
class PauseScope {
 public:
  PauseScope();
  ~PauseScope();
  PauseScope(const PauseScope&) = delete;
  PauseScope& operator=(const PauseScope&) = delete;

 private:
  bool was_enabled_;
};

struct OpStat {
  std::string name;
  int64_t calls = 0;
  double self_seconds = 0;
};

struct PhaseStat {
  std::string phase;
  double forward_seconds = 0;   // kernel self time recorded outside backward
  double backward_seconds = 0;  // kernel self time of the backward of this phase's ops
  int64_t forward_calls = 0;    // kernel calls counted in each
  int64_t backward_calls = 0;
};

struct Report {
  std::vector<OpStat> ops;        // by self time, largest first
  std::vector<PhaseStat> phases;  // by total time, largest first
  double wall_seconds = 0;        // time spent enabled
  double kernel_seconds = 0;      // sum of every op's self time
  double overhead_seconds() const { return wall_seconds > kernel_seconds ? wall_seconds - kernel_seconds : 0; }
};

Report snapshot();
// Two tables: per-op self time and calls, and the phase breakdown with the framework overhead.
// `max_ops` rows of ops at most (0: all).
std::string format_table(const Report& report, int max_ops = 30);

}  // namespace lsf::profiler
