// What this machine can do, measured on the spot, so that a benchmark's figure can be read
// against the limits of the cores it ran on (issue #17: "the benchmark states the machine's
// measured sgemm GFLOP/s and memory bandwidth next to each figure"). bench_attention and
// bench_lra_step measure them before their timings, `lsf bench` after its steps (so that the
// probe's arrays stay out of the steps' resident-set peak); all three print them first.
// - sgemm: OpenBLAS's cblas_sgemm (the library's own BLAS) on a square product of kSgemmSize,
//   large enough that packing is amortised: the compute rate the cores reach in practice;
// - bandwidth: a STREAM-style triad a[i] = b[i] + s·c[i] over three arrays of kTriadBytes each,
//   far beyond any last-level cache, split over the threads; counted as STREAM counts it, 3 ×
//   the array bytes per pass (two reads, one write; the write-allocate read is not counted).
// Both run with the current thread count (lsf::set_num_threads first) and report the fastest of
// kProbeRepeats passes after one warm-up: a limit, so noise only lowers it. About a second.
//
//   lsf::MachineLimits m = lsf::measure_machine_limits();
//   std::printf("sgemm %.0f GFLOP/s, triad %.1f GB/s\n", m.sgemm_gflops, m.triad_gbs);
#pragma once

#include <cstddef>
#include <string>

namespace lsf {

struct MachineLimits {
  double sgemm_gflops = 0;  // fastest cblas_sgemm pass of kSgemmSize³, GFLOP/s (2·n³ FLOP)
  int sgemm_size = 0;
  double triad_gbs = 0;     // fastest triad pass, GB/s (10⁹ bytes)
  double triad_mib = 0;     // size of each of the three arrays
  int threads = 0;
};

inline constexpr int kSgemmSize = 1536;                    // 7.2 GFLOP per pass
inline constexpr size_t kTriadBytes = size_t(64) << 20;   // 64 MiB per array, 2× a 32 MiB L3
inline constexpr int kProbeRepeats = 5;

MachineLimits measure_machine_limits();

// The limits as the JSON object the benchmarks put in their "meta" line:
// {"sgemm_gflops": 211.3, "sgemm_size": 1536, "triad_gbs": 31.3, "triad_mib": 64, "threads": 2}.
std::string machine_limits_json(const MachineLimits& m);

}  // namespace lsf
