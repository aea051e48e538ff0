// Strided index math shared by the CUDA elementwise and reduction kernels, written CUDA-free so
// that the CPU tests check it (tests/test_cuda_elementwise.cpp) and a CPU-only build compiles it.
//
// An OffsetCalc<N> walks N same-shaped strided operands together: linear index i (row-major
// over the shape) → the element offset of i in each operand. Built on the host from shapes and
// strides, it drops size-1 dims and merges neighbours that are contiguous with each other for
// every operand (as ops/cpu/loops.h does), so a contiguous tensor becomes one dim and costs one
// multiply, and an expanded operand (stride 0) costs nothing extra. Dims are stored innermost
// first; the outermost one takes what is left of i without a division.
//
//   OffsetCalc<2> calc = make_offset_calc<2>(shape, {&out_strides, &in_strides});
//   Offsets<2> o = calc.get(i);   // o.v[0]: offset in out, o.v[1]: offset in in
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "lsformer/engine/error.h"

#if defined(__CUDACC__)
#define LSF_OFFSET_HD __host__ __device__ __forceinline__
#else
#define LSF_OFFSET_HD inline
#endif

namespace lsf::cuda {

// Dims left after merging; a kernel argument of ≤ 16·(1 + N)·8 bytes. More dims than this
// (after merging) is an lsf::Error, not a silent wrong answer.
constexpr int kMaxOffsetDims = 16;

template <int N>
struct Offsets {
  int64_t v[N];
};

template <int N>
struct OffsetCalc {
  int ndim = 0;                       // 0: a single element (every offset 0)
  int64_t sizes[kMaxOffsetDims] = {}; // innermost first
  int64_t strides[kMaxOffsetDims][N] = {};  // elements, innermost first

  LSF_OFFSET_HD Offsets<N> get(int64_t i) const {
    Offsets<N> o;
    for (int k = 0; k < N; ++k) o.v[k] = 0;
    for (int d = 0; d < ndim; ++d) {
      int64_t idx = i;
      if (d + 1 < ndim) {
        idx = i % sizes[d];
        i /= sizes[d];
      }
      for (int k = 0; k < N; ++k) o.v[k] += idx * strides[d][k];
    }
    return o;
  }
};

// shape and, per operand, its element strides (all of shape's rank). `what` names the caller
// in the error for too many dims.
template <int N>
OffsetCalc<N> make_offset_calc(const std::vector<int64_t>& shape, const std::array<const std::vector<int64_t>*, N>& strides,
                               const char* what) {
  // Outermost first while merging, like make_runs in ops/cpu/loops.h.
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, N>> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !sizes.empty();
    for (int k = 0; k < N && merge; ++k) merge = st.back()[k] == (*strides[k])[d] * shape[d];
    if (merge) {
      sizes.back() *= shape[d];
      for (int k = 0; k < N; ++k) st.back()[k] = (*strides[k])[d];
    } else {
      sizes.push_back(shape[d]);
      std::array<int64_t, N> s;
      for (int k = 0; k < N; ++k) s[k] = (*strides[k])[d];
      st.push_back(s);
    }
  }
  LSF_CHECK(int(sizes.size()) <= kMaxOffsetDims)
      << what << ": " << sizes.size() << " dimensions remain after merging contiguous ones; the CUDA kernels take at most "
      << kMaxOffsetDims;
  OffsetCalc<N> c;
  c.ndim = int(sizes.size());
  for (int d = 0; d < c.ndim; ++d) {
    const size_t src = sizes.size() - 1 - size_t(d);  // innermost first
    c.sizes[d] = sizes[src];
    for (int k = 0; k < N; ++k) c.strides[d][k] = st[src][k];
  }
  return c;
}

// Launch shape of the row-wise kernels (softmax, layer norm, cross-entropy rows): how many
// threads cooperate on one row of n elements. A warp for short rows (several rows per block),
// a whole block for long ones, so that each thread has at least a few elements and a long
// row is not left to 32 threads.
constexpr int row_group_size(int64_t n) {
  if (n <= 1024) return 32;
  if (n <= 4096) return 128;
  if (n <= 16384) return 256;
  return 1024;
}

// Split of a reduction of `n` elements per output over `outputs` outputs: the number of
// partial results per output (1: no second pass). More than one only when the outputs alone
// cannot fill the device (fewer than `fill` parallel groups) and each split still gets at
// least `min_per_split` elements.
constexpr int64_t reduction_splits(int64_t outputs, int64_t n, int64_t fill = 1024, int64_t min_per_split = 4096) {
  if (outputs >= fill || n < 2 * min_per_split) return 1;
  int64_t want = (fill + outputs - 1) / (outputs > 0 ? outputs : 1);
  int64_t most = n / min_per_split;
  int64_t s = want < most ? want : most;
  return s > 1024 ? 1024 : (s < 1 ? 1 : s);
}

}  // namespace lsf::cuda
