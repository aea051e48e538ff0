// Rows of an attention operand transposed into a panel: dst[f·ld + i] = row(i)[f] for m rows of
// e features. The bidirectional long-short kernel (ops/cpu/long_short.cpp) forms its logit and
// value-product tiles against such [e × slots] panels, so every key row it reads is transposed
// once; done element by element, that was 3–4% of the layer's forward + backward (a load and a
// store per element).
//
// Here float rows go eight at a time through registers: eight 8-float loads, the 8 × 8 transpose
// as three rounds of shuffles (unpack pairs, then pairs of pairs, then 128-bit halves), eight
// 8-float stores. Compiled per vector level (ops/cpu/vector_kernels.h); the baseline build and
// double keep the element loop. Data movement only, so every level writes the same bits.
#pragma once

#include <cstdint>
#include <type_traits>

#include "lsformer/ops/cpu/vector_kernels.h"

namespace lsf::cpu {

namespace transpose_detail {

typedef float F8 __attribute__((vector_size(32)));

// out[f] = (r0[f], r1[f], …, r7[f]) for f = 0 … 7.
LSF_VECTOR_INLINE void transpose8x8(F8 (&x)[8]) {
  const F8 t0 = __builtin_shufflevector(x[0], x[1], 0, 8, 1, 9, 4, 12, 5, 13);
  const F8 t1 = __builtin_shufflevector(x[0], x[1], 2, 10, 3, 11, 6, 14, 7, 15);
  const F8 t2 = __builtin_shufflevector(x[2], x[3], 0, 8, 1, 9, 4, 12, 5, 13);
  const F8 t3 = __builtin_shufflevector(x[2], x[3], 2, 10, 3, 11, 6, 14, 7, 15);
  const F8 t4 = __builtin_shufflevector(x[4], x[5], 0, 8, 1, 9, 4, 12, 5, 13);
  const F8 t5 = __builtin_shufflevector(x[4], x[5], 2, 10, 3, 11, 6, 14, 7, 15);
  const F8 t6 = __builtin_shufflevector(x[6], x[7], 0, 8, 1, 9, 4, 12, 5, 13);
  const F8 t7 = __builtin_shufflevector(x[6], x[7], 2, 10, 3, 11, 6, 14, 7, 15);
  // s0 = rows 0–3 of features 0 and 4, s1 of 1 and 5, s2 of 2 and 6, s3 of 3 and 7; s4–s7 rows 4–7.
  const F8 s0 = __builtin_shufflevector(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13);
  const F8 s1 = __builtin_shufflevector(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
  const F8 s2 = __builtin_shufflevector(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);
  const F8 s3 = __builtin_shufflevector(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
  const F8 s4 = __builtin_shufflevector(t4, t6, 0, 1, 8, 9, 4, 5, 12, 13);
  const F8 s5 = __builtin_shufflevector(t4, t6, 2, 3, 10, 11, 6, 7, 14, 15);
  const F8 s6 = __builtin_shufflevector(t5, t7, 0, 1, 8, 9, 4, 5, 12, 13);
  const F8 s7 = __builtin_shufflevector(t5, t7, 2, 3, 10, 11, 6, 7, 14, 15);
  x[0] = __builtin_shufflevector(s0, s4, 0, 1, 2, 3, 8, 9, 10, 11);
  x[1] = __builtin_shufflevector(s1, s5, 0, 1, 2, 3, 8, 9, 10, 11);
  x[2] = __builtin_shufflevector(s2, s6, 0, 1, 2, 3, 8, 9, 10, 11);
  x[3] = __builtin_shufflevector(s3, s7, 0, 1, 2, 3, 8, 9, 10, 11);
  x[4] = __builtin_shufflevector(s0, s4, 4, 5, 6, 7, 12, 13, 14, 15);
  x[5] = __builtin_shufflevector(s1, s5, 4, 5, 6, 7, 12, 13, 14, 15);
  x[6] = __builtin_shufflevector(s2, s6, 4, 5, 6, 7, 12, 13, 14, 15);
  x[7] = __builtin_shufflevector(s3, s7, 4, 5, 6, 7, 12, 13, 14, 15);
}

}  // namespace transpose_detail

// dst[f·ld + i] = row(i)[f] for i < m, f < e; row(i) returns a pointer to row i's e features.
template <typename T, int Bytes, typename Row>
LSF_VECTOR_INLINE void transpose_panel_body(T* dst, int64_t ld, Row row, int64_t m, int64_t e) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float> && Bytes >= 32) {
    using transpose_detail::F8;
    for (; i + 8 <= m; i += 8) {
      const float* r[8];
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) r[k] = row(i + k);
      int64_t f = 0;
      for (; f + 8 <= e; f += 8) {
        F8 x[8];
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) __builtin_memcpy(&x[k], r[k] + f, sizeof(F8));
        transpose_detail::transpose8x8(x);
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) __builtin_memcpy(dst + (f + k) * ld + i, &x[k], sizeof(F8));
      }
      for (; f < e; ++f)
        for (int k = 0; k < 8; ++k) dst[f * ld + i + k] = r[k][f];
    }
  }
  for (; i + 8 <= m; i += 8) {  // eight source rows at a time: eight adjacent stores per feature
    const T* r[8];
    for (int k = 0; k < 8; ++k) r[k] = row(i + k);
    for (int64_t f = 0; f < e; ++f) {
      T* o = dst + f * ld + i;
      for (int k = 0; k < 8; ++k) o[k] = r[k][f];
    }
  }
  for (; i < m; ++i) {
    const T* r = row(i);
    for (int64_t f = 0; f < e; ++f) dst[f * ld + i] = r[f];
  }
}

}  // namespace lsf::cpu
