// Timing shared by the C++ benchmarks (bench_ops, bench_attention): warm up, pick how many calls
// make one sample last long enough to time, then collect samples until the sampling time is
// spent, and report the median (and min/max) per call.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <vector>

namespace lsf::bench {

struct SamplingPlan {
  int warmup = 1;              // untimed calls first (the last one sizes the samples)
  int min_samples = 3;
  int max_samples = 50;
  double min_sample_ms = 1.0;  // repeat fast calls so that one sample lasts at least this long
  double sample_ms = 1000.0;   // keep sampling (past min_samples) until this much time is spent
  bool cpu_clock = false;      // process CPU time instead of steady_clock
};

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;  // per call
  int samples = 0;
  int inner = 0;  // calls per sample
};

// Milliseconds on the chosen clock: steady_clock, or the CPU time of all the process's threads
// (which excludes time spent waiting for a core while other processes run).
inline double now_ms(bool cpu_clock) {
  if (cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline Timing time_call(const std::function<void()>& call, const SamplingPlan& plan) {
  double last_ms = 0;
  for (int i = 0; i < std::max(plan.warmup, 1); ++i) {
    double t0 = now_ms(plan.cpu_clock);
    call();
    last_ms = now_ms(plan.cpu_clock) - t0;
  }
  Timing t;
  t.inner = int(std::clamp(std::ceil(plan.min_sample_ms / std::max(last_ms, 1e-6)), 1.0, 100000.0));
  std::vector<double> per_call;
  double total_ms = 0;
  while (int(per_call.size()) < plan.max_samples &&
         (int(per_call.size()) < plan.min_samples || total_ms < plan.sample_ms)) {
    double t0 = now_ms(plan.cpu_clock);
    for (int i = 0; i < t.inner; ++i) call();
    double ms = now_ms(plan.cpu_clock) - t0;
    total_ms += ms;
    per_call.push_back(ms / t.inner);
  }
  std::sort(per_call.begin(), per_call.end());
  size_t k = per_call.size();
  t.median_ms = k % 2 ? per_call[k / 2] : 0.5 * (per_call[k / 2 - 1] + per_call[k / 2]);
  t.min_ms = per_call.front();
  t.max_ms = per_call.back();
  t.samples = int(k);
  return t;
}

}  // namespace lsf::bench
