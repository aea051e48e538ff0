// The machine probe of engine/machine_limits.h.
#include "lsformer/engine/machine_limits.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

namespace lsf {
namespace {

template <typename F>
double fastest_seconds(F&& pass) {
  pass();  // warm-up: page faults, thread start-up, OpenBLAS buffers
  double best = 1e30;
  for (int i = 0; i < kProbeRepeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    pass();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

MachineLimits measure_machine_limits() {
  MachineLimits m;
  m.threads = omp_get_max_threads();
  {
    const int n = kSgemmSize;
    std::vector<float> a(size_t(n) * n), b(size_t(n) * n), c(size_t(n) * n);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = float(i % 7) * 0.01f;
      b[i] = float(i % 5) * 0.01f;
    }
    const double s = fastest_seconds([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                  c.data(), n);
    });
    m.sgemm_size = n;
    m.sgemm_gflops = 2.0 * double(n) * n * n / s * 1e-9;
  }
  {
    const int64_t len = int64_t(kTriadBytes / sizeof(float));
    // Allocated uninitialised and first touched by the threads that use each part (static
    // schedule both times), so every page sits by the core that streams it.
    std::unique_ptr<float[]> a(new float[size_t(len)]), b(new float[size_t(len)]), c(new float[size_t(len)]);
    float *pa = a.get(), *pb = b.get(), *pc = c.get();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < len; ++i) {
      pa[i] = 0.0f;
      pb[i] = 1.0f;
      pc[i] = 2.0f;
    }
    const float scale = 3.0f;
    const double s = fastest_seconds([&] {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < len; ++i) pa[i] = pb[i] + scale * pc[i];
    });
    m.triad_mib = double(kTriadBytes) / double(1 << 20);
    m.triad_gbs = 3.0 * double(kTriadBytes) / s * 1e-9;
    // Read the result so the passes cannot be optimised away.
    if (pa[len / 2] != 7.0f) std::fprintf(stderr, "machine probe: triad result %g, expected 7\n", double(pa[len / 2]));
  }
  return m;
}

std::string machine_limits_json(const MachineLimits& m) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "{\"sgemm_gflops\": %.1f, \"sgemm_size\": %d, \"triad_gbs\": %.1f, \"triad_mib\": %.0f, "
                "\"threads\": %d}",
                m.sgemm_gflops, m.sgemm_size, m.triad_gbs, m.triad_mib, m.threads);
  return buf;
}

}  // namespace lsf
