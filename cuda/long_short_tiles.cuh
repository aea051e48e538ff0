// Device helpers of the fused long-short attention kernels (cuda/long_short.cu): the compute
// type of each storage type, conversions, warp reductions, and the dropout factor (Philox words
// from ops/kernels/long_short_geometry.h, bit for bit engine/random.h's). Internal to cuda/.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "lsformer/cuda/dtype.cuh"
#include "lsformer/ops/kernels/long_short_geometry.h"

namespace lsf::cuda::ls {

constexpr int kWarp = 32;

// Compute (accumulation) type: f64 stays f64 (exactness tests); f32, bf16 and f16 compute in
// f32 — the softmax is always fp32 or wider (docs/transformer-ls.md §10).
// Conversions are convert of cuda/dtype.cuh (bf16 / f16 through float, nearest even).
template <typename T> struct AccOf { using type = compute_t<T>; };

__device__ __forceinline__ float to_acc(float x) { return x; }
__device__ __forceinline__ double to_acc(double x) { return x; }
__device__ __forceinline__ float to_acc(__nv_bfloat16 x) { return convert<float>(x); }
__device__ __forceinline__ float to_acc(__half x) { return convert<float>(x); }

template <typename T> __device__ __forceinline__ T from_acc(float x) { return convert<T>(x); }
template <typename T> __device__ __forceinline__ T from_acc(double x) { return x; }

__device__ __forceinline__ float exp_acc(float x) { return expf(x); }
__device__ __forceinline__ double exp_acc(double x) { return exp(x); }
__device__ __forceinline__ float log_acc(float x) { return logf(x); }
__device__ __forceinline__ double log_acc(double x) { return log(x); }

template <typename A> __device__ __forceinline__ A neg_inf() { return -A(INFINITY); }

template <typename A>
__device__ __forceinline__ A warp_max(A x) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) {
    const A y = __shfl_xor_sync(0xffffffffu, x, o);
    x = y > x ? y : x;
  }
  return x;
}

template <typename A>
__device__ __forceinline__ A warp_sum(A x) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Dot product of a compute-type row (shared memory) with a row of any storage type.
template <typename A, typename P>
__device__ __forceinline__ A dot_row(const A* a, const P* b, int64_t e) {
  A acc = 0;
  for (int64_t f = 0; f < e; ++f) acc += a[f] * to_acc(b[f]);
  return acc;
}

// Attention dropout as ops/cpu/long_short.cpp applies it: when `on`, slot factor = scale if the
// slot is kept (threshold 0 keeps all), else 0.
struct Dropout {
  bool on = false;
  uint32_t threshold = 0;
  double scale = 1.0;
  uint64_t seed = 0, offset = 0;
  template <typename A>
  __device__ __forceinline__ A factor(uint64_t idx) const {
    if (threshold == 0) return A(scale);
    return (ls_geometry::philox_word(seed, offset, idx) >> 8) >= threshold ? A(scale) : A(0);
  }
};

}  // namespace lsf::cuda::ls
