// Kernels written once with GCC vector extensions and compiled once per x86-64 vector level:
// the vector type of a level's width, row max / sum / dot product folded in registers, and the
// per-level dispatch. Used by the row kernels whose rows are short (the long-short attention's
// logit rows of R + s ≈ 48, layer norm over d = 64), where how a vector of lanes is folded into
// one number is a large part of a row's time.
//
// Why not LSF_SIMD_CLONES (ops/cpu/simd.h) and OpenMP simd reductions: a reduction's lanes are
// folded through the stack one by one (15 dependent adds for 16 lanes), and the vector width is
// not known to the source, so registers cannot be planned per level.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>

#include "lsformer/ops/cpu/simd.h"

#define LSF_VECTOR_INLINE [[gnu::always_inline]] inline
// On a lambda: inlined into its caller, so that it is compiled for the caller's ISA level (a
// lambda does not inherit a [[gnu::target]] of the function that defines it).
#define LSF_VECTOR_LAMBDA __attribute__((always_inline))

namespace lsf::cpu {

// Vectors of Bytes bytes through GCC's vector extension. Bytes is the register width of the ISA
// the code is compiled for (LSF_PER_VECTOR_LEVEL below): a vector wider than the registers is
// lowered through the stack (the AVX2 build of the long-short kernel with 64-byte vectors ran
// 2.1× slower than with 32-byte ones on an AVX2 EPYC).
template <typename T, int Bytes = 64>
struct Simd {
  static constexpr int64_t W = int64_t(Bytes / sizeof(T));
  typedef T V __attribute__((vector_size(Bytes)));
  [[gnu::always_inline]] static V load(const T* p) {
    V v;
    __builtin_memcpy(&v, p, sizeof(V));
    return v;
  }
  [[gnu::always_inline]] static void store(T* p, V v) { __builtin_memcpy(p, &v, sizeof(V)); }
};

// Max, sum and dot product of a row x[0 … n): whole vectors into one accumulator vector, folded
// by halves (a fixed order, so deterministic), then the tail in order. OpenMP simd reductions
// keep their lanes on the stack and fold them one by one, and arrays of lanes written for the
// auto-vectoriser are folded through the stack too: with rows of 48 logits either made the fold
// about a fifth of the forward's row time.
template <typename T, int Bytes>
LSF_VECTOR_INLINE T fold_sum(typename Simd<T, Bytes>::V v) {
  if constexpr (Bytes == 2 * sizeof(T)) {
    return v[0] + v[1];
  } else {
    typename Simd<T, Bytes / 2>::V lo, hi;
    __builtin_memcpy(&lo, &v, Bytes / 2);
    __builtin_memcpy(&hi, reinterpret_cast<const char*>(&v) + Bytes / 2, Bytes / 2);
    return fold_sum<T, Bytes / 2>(lo + hi);
  }
}

template <typename T, int Bytes>
LSF_VECTOR_INLINE T fold_max(typename Simd<T, Bytes>::V v) {
  if constexpr (Bytes == 2 * sizeof(T)) {
    return v[1] > v[0] ? v[1] : v[0];
  } else {
    typename Simd<T, Bytes / 2>::V lo, hi;
    __builtin_memcpy(&lo, &v, Bytes / 2);
    __builtin_memcpy(&hi, reinterpret_cast<const char*>(&v) + Bytes / 2, Bytes / 2);
    return fold_max<T, Bytes / 2>(hi > lo ? hi : lo);
  }
}

template <typename T, int Bytes>
LSF_VECTOR_INLINE T vector_max(const T* x, int64_t n) {
  using S = Simd<T, Bytes>;
  using V = typename S::V;
  T out = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  if (n >= S::W) {
    V m = S::load(x);
    for (i = S::W; i + S::W <= n; i += S::W) {
      const V y = S::load(x + i);
      m = y > m ? y : m;
    }
    out = fold_max<T, Bytes>(m);
  }
  for (; i < n; ++i) out = x[i] > out ? x[i] : out;
  return out;
}

template <typename T, int Bytes>
LSF_VECTOR_INLINE T vector_sum(const T* x, int64_t n) {
  using S = Simd<T, Bytes>;
  typename S::V m = {};
  int64_t i = 0;
  for (; i + S::W <= n; i += S::W) m += S::load(x + i);
  T out = fold_sum<T, Bytes>(m);
  for (; i < n; ++i) out += x[i];
  return out;
}

template <typename T, int Bytes>
LSF_VECTOR_INLINE T vector_dot(const T* x, const T* y, int64_t n) {
  using S = Simd<T, Bytes>;
  typename S::V m = {};
  int64_t i = 0;
  for (; i + S::W <= n; i += S::W) m += S::load(x + i) * S::load(y + i);
  T out = fold_sum<T, Bytes>(m);
  for (; i < n; ++i) out += x[i] * y[i];
  return out;
}

// Σ_i f(i) over the whole vectors i = 0, W, 2W … < nv (f returns a vector): four interleaved
// accumulators, so a 64-wide row's sum is not one chain of dependent adds, combined pairwise
// and folded in registers (layer norm; vector_sum above keeps the long-short kernel's one
// accumulator and so its bits).
template <typename T, int Bytes, typename F>
LSF_VECTOR_INLINE T sum_vectors(int64_t nv, F&& f) {
  using S = Simd<T, Bytes>;
  typename S::V acc[4] = {};
  int64_t i = 0;
  for (; i + 4 * S::W <= nv; i += 4 * S::W) {
    acc[0] += f(i);
    acc[1] += f(i + S::W);
    acc[2] += f(i + 2 * S::W);
    acc[3] += f(i + 3 * S::W);
  }
  for (int j = 0; i < nv; i += S::W, ++j) acc[j] += f(i);  // at most three left
  return fold_sum<T, Bytes>((acc[0] + acc[1]) + (acc[2] + acc[3]));
}

// LSF_PER_VECTOR_LEVEL(name) defines name<T>(args...), which calls name_body<T, Bytes>(args...)
// compiled once per x86-64 level with that level's vector width (AVX-512: 64 bytes, AVX2: 32,
// baseline SSE2: 16), the widest the CPU runs picked once at run time (vector_level()).
// Elsewhere one build with 64-byte vectors. Everything name_body calls must be inlined into it
// (LSF_VECTOR_INLINE, LSF_VECTOR_LAMBDA), or it runs the library's baseline code.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
inline VectorLevel vector_level() {
  static const VectorLevel level = [] {
    VectorLevel best = supported_vector_levels().front();
    // LSF_CPU_VECTOR_LEVEL=baseline|avx2 caps the level, so that the tests run every build a
    // CPU can run (tests/CMakeLists.txt runs the suites of these kernels once more with baseline).
    if (const char* cap = std::getenv("LSF_CPU_VECTOR_LEVEL")) {
      const std::string c = cap;
      if (c == "baseline") best = VectorLevel::Baseline;
      else if (c == "avx2" && best == VectorLevel::Avx512) best = VectorLevel::Avx2;
    }
    return best;
  }();
  return level;
}
#define LSF_PER_VECTOR_LEVEL(name)                                                                        \
  template <typename T, typename... Args>                                                             \
  [[gnu::target("arch=x86-64-v4")]] void name##_avx512(Args&&... args) { name##_body<T, 64>(std::forward<Args>(args)...); } \
  template <typename T, typename... Args>                                                             \
  [[gnu::target("arch=x86-64-v3")]] void name##_avx2(Args&&... args) { name##_body<T, 32>(std::forward<Args>(args)...); } \
  template <typename T, typename... Args>                                                             \
  void name##_baseline(Args&&... args) { name##_body<T, 16>(std::forward<Args>(args)...); }   \
  template <typename T, typename... Args>                                                             \
  void name(Args&&... args) {                                                                         \
    switch (vector_level()) {                                                                         \
      case VectorLevel::Avx512: return name##_avx512<T>(std::forward<Args>(args)...);                 \
      case VectorLevel::Avx2: return name##_avx2<T>(std::forward<Args>(args)...);                     \
      case VectorLevel::Baseline: break;                                                              \
    }                                                                                                 \
    name##_baseline<T>(std::forward<Args>(args)...);                                                  \
  }
#else
#define LSF_PER_VECTOR_LEVEL(name)            \
  template <typename T, typename... Args> \
  void name(Args&&... args) {             \
    name##_body<T, 64>(std::forward<Args>(args)...); \
  }
#endif

}  // namespace lsf::cpu
