// LSF_SIMD_CLONES: builds a function once per x86-64 level (AVX-512, AVX2, baseline SSE2) and
// lets the dynamic linker pick one at load time (GCC target_clones / ifunc). The library is
// compiled for baseline x86-64, so the hot, short, memory-bound kernels marked with it are
// what runs at full vector width on newer CPUs. Every loop a marked function runs must be
// inlined into it (templates and inline helpers are): a call out of a clone runs baseline code.
#pragma once

#include <vector>

#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && !defined(__clang__)
#define LSF_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LSF_SIMD_CLONES
#endif

namespace lsf::cpu {

// The x86-64 levels whose code this CPU runs, best first (always ending with Baseline): for the
// kernels that compile one variant per level with [[gnu::target]] and pick one at run time
// (ops/cpu/skinny_gemm.cpp, ops/cpu/long_short.cpp). Only Baseline off x86-64 GCC.
enum class VectorLevel { Avx512, Avx2, Baseline };  // x86-64-v4, x86-64-v3, the baseline
inline const char* vector_level_name(VectorLevel level) {
  constexpr const char* kNames[] = {"x86-64-v4", "x86-64-v3", "baseline"};
  return kNames[int(level)];
}
inline std::vector<VectorLevel> supported_vector_levels() {
  std::vector<VectorLevel> levels;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) levels.push_back(VectorLevel::Avx512);
  if (__builtin_cpu_supports("x86-64-v3")) levels.push_back(VectorLevel::Avx2);
#endif
  levels.push_back(VectorLevel::Baseline);
  return levels;
}

}  // namespace lsf::cpu
