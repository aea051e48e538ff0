// Shared machinery of the row-wise CPU kernels (softmax, layer norm, classification losses):
// the vectorisable f32 exp of ops/cpu/unary_math.h, function multi-versioning for AVX2/AVX-512, and a loop that
// hands each thread one contiguous chunk of rows.
//
// Why multi-versioning (LSF_SIMD_CLONES, ops/cpu/simd.h): a row of 64 floats is 16 baseline
// SSE2 steps; these kernels are short, hot and memory-bound enough that their AVX2 and AVX-512
// clones are what makes them as fast as PyTorch's hand-written vectorised kernels.
#pragma once

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/cpu/simd.h"
#include "lsformer/ops/cpu/unary_math.h"

namespace lsf::cpu {

// The exp the kernels use: the vectorisable one for f32, libm's for f64 (f64 serves gradient
// checks, where accuracy matters and speed does not).
inline float vexp(float x) { return vmath::exp(x); }
inline double vexp(double x) { return std::exp(x); }

// How many chunks (one per thread) to cut `rows` rows of `row_cost` elements into: 1 when the
// work is too small to pay for a parallel region.
inline int64_t chunk_count(int64_t rows, int64_t row_cost) {
  if (rows <= 1 || rows * std::max<int64_t>(row_cost, 1) < kParallelGrain || omp_in_parallel()) return 1;
  return std::min<int64_t>(rows, omp_get_max_threads());
}

// Calls fn(chunk, begin, end) for `chunks` contiguous, near-equal ranges covering [0, rows),
// in parallel when chunks > 1. A static split makes per-chunk partial sums deterministic
// for a given thread count.
template <typename Fn>
void for_each_chunk(int64_t rows, int64_t chunks, Fn&& fn) {
  if (rows <= 0) return;
  if (chunks <= 1) {
    fn(int64_t(0), int64_t(0), rows);
    return;
  }
#pragma omp parallel for schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) fn(c, rows * c / chunks, rows * (c + 1) / chunks);
}

// Zero-initialised scratch of `per_chunk` elements per chunk, each chunk's part starting on its
// own 64-byte cache line, so threads updating their own partial sums never share a line.
template <typename T>
class ChunkScratch {
 public:
  ChunkScratch(int64_t chunks, int64_t per_chunk)
      : stride_((per_chunk + kLine - 1) / kLine * kLine), data_(size_t(chunks * stride_ + kLine), T(0)) {
    const auto address = reinterpret_cast<uintptr_t>(data_.data());
    base_ = data_.data() + (kLine - (address / sizeof(T)) % kLine) % kLine;
  }
  T* chunk(int64_t c) { return base_ + c * stride_; }

 private:
  static constexpr int64_t kLine = int64_t(64 / sizeof(T));  // elements per cache line
  int64_t stride_;
  std::vector<T> data_;
  T* base_ = nullptr;
};

// Rows split over threads without per-chunk state.
template <typename Fn>
void parallel_rows(int64_t rows, int64_t row_cost, Fn&& fn) {
  for_each_chunk(rows, chunk_count(rows, row_cost),
                 [&](int64_t, int64_t begin, int64_t end) { fn(begin, end); });
}

// Columns handled together when the reduced dim is not the innermost: x viewed as
// [outer, n, inner], a task is one outer index and a tile of up to kColumnTile inner columns;
// per-column running state (max, sum) lives in arrays of that length and the loop over the
// tile is the contiguous, vectorised one.
constexpr int64_t kColumnTile = 64;

// The tile width to use: kColumnTile, halved (down to 16, still whole vectors) while there are
// fewer tasks than threads, so that a softmax over a leading dim of a small batch still
// spreads over the cores.
inline int64_t column_tile(int64_t outer, int64_t inner) {
  int64_t tile = kColumnTile;
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  while (tile > 16 && outer * ((inner + tile - 1) / tile) < threads) tile /= 2;
  return tile;
}

}  // namespace lsf::cpu
