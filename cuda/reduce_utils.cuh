// Internal to the cuda-kA kernel files (binary, unary, reduce, softmax, layer_norm, loss):
// dtype dispatch to CUDA element types and float conversion of bf16/f16 (both on top of
// cuda/dtype.cuh), the accumulation type,
// warp and block reductions, and the offset calculator taken from a Tensor.
//
// Accumulation: f32, bf16 and f16 compute and accumulate in float; f64 in double; integer sums
// in int64. Tree reductions (warp shuffles, then one value per warp through shared memory)
// keep the float rounding error of a sum of n terms near log2(n)·2^-24 relative to Σ|terms|.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "lsformer/cuda/dtype.cuh"
#include "lsformer/cuda/offset_calc.h"
#include "lsformer/cuda/runtime.cuh"
#include "lsformer/engine/tensor.h"

namespace lsf::cuda::ka {

// ---- element types ----------------------------------------------------------------------

template <typename T>
constexpr bool kIsHalfLike = is_reduced_float_v<T>;

// What a kernel computes in for storage type T.
template <typename T>
struct AccOf {
  using type = std::conditional_t<std::is_same_v<T, double>, double, std::conditional_t<std::is_integral_v<T>, T, float>>;
};
template <>
struct AccOf<__nv_bfloat16> {
  using type = float;
};
template <>
struct AccOf<__half> {
  using type = float;
};
template <typename T>
using acc_t = typename AccOf<T>::type;

// Conversions through float for the 16-bit formats (round to nearest even), static_cast else:
// convert of cuda/dtype.cuh.
template <typename To, typename From>
__device__ __forceinline__ To cast(From v) {
  return convert<To>(v);
}

// Device math for float and double by overloading (the names exp, log, ... in namespace lsf
// are the tensor ops, which would hide the global ones).
namespace dm {
__device__ __forceinline__ float exp(float x) { return ::expf(x); }
__device__ __forceinline__ double exp(double x) { return ::exp(x); }
__device__ __forceinline__ float log(float x) { return ::logf(x); }
__device__ __forceinline__ double log(double x) { return ::log(x); }
__device__ __forceinline__ float sqrt(float x) { return ::sqrtf(x); }
__device__ __forceinline__ double sqrt(double x) { return ::sqrt(x); }
__device__ __forceinline__ float tanh(float x) { return ::tanhf(x); }
__device__ __forceinline__ double tanh(double x) { return ::tanh(x); }
__device__ __forceinline__ float erfc(float x) { return ::erfcf(x); }
__device__ __forceinline__ double erfc(double x) { return ::erfc(x); }
__device__ __forceinline__ float fabs(float x) { return ::fabsf(x); }
__device__ __forceinline__ double fabs(double x) { return ::fabs(x); }
__device__ __forceinline__ float pow(float x, float e) { return ::powf(x, e); }
__device__ __forceinline__ double pow(double x, double e) { return ::pow(x, e); }
__device__ __forceinline__ float inf(float) { return __int_as_float(0x7f800000); }
__device__ __forceinline__ double inf(double) { return __longlong_as_double(0x7ff0000000000000ll); }
}  // namespace dm

// ---- host-side dtype dispatch (fn.template operator()<CudaElementType>()) ------------------

// f32, f64, bf16, f16. `what` names the kernel in the error for any other dtype.
template <typename Fn>
void dispatch_cuda_float(DType t, const char* what, Fn&& fn) {
  if (dispatch_among<DType::F32, DType::F64, DType::BF16, DType::F16>(t, fn)) return;
  LSF_FAIL() << what << " (CUDA): dtype " << dtype_name(t) << " is not supported (expected f32, f64, bf16 or f16)";
}

// The float types plus i32, i64 and u8 (what arithmetic makes sense for, as on the CPU).
template <typename Fn>
void dispatch_cuda_numeric(DType t, const char* what, Fn&& fn) {
  if (dispatch_among<DType::F32, DType::F64, DType::BF16, DType::F16, DType::I32, DType::I64, DType::U8>(t, fn))
    return;
  LSF_FAIL() << what << " (CUDA): dtype " << dtype_name(t)
             << " is not supported (expected f32, f64, bf16, f16, i32, i64 or u8)";
}

// Index tensors: i32 or i64.
template <typename Fn>
void dispatch_cuda_index(DType t, const char* what, Fn&& fn) {
  if (dispatch_among<DType::I32, DType::I64>(t, fn)) return;
  LSF_FAIL() << what << " (CUDA): expected an index tensor of dtype i64 or i32, got " << dtype_name(t);
}

// Every CUDA kernel entry checks that its tensors live on one CUDA device.
inline void check_cuda_tensors(const char* what, std::initializer_list<const Tensor*> ts) {
  int index = -1;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    LSF_CHECK(t->device().is_cuda()) << what << " (CUDA): got a tensor on " << t->device();
    if (index < 0) index = t->device().index;
    LSF_CHECK(t->device().index == index) << what << " (CUDA): tensors on cuda:" << index << " and " << t->device();
  }
}

// The offset calculator of N same-shaped tensors (x's shape; element strides).
template <int N>
OffsetCalc<N> offset_calc(const std::array<const Tensor*, N>& ts, const char* what) {
  std::array<const std::vector<int64_t>*, N> strides;
  for (int k = 0; k < N; ++k) strides[k] = &ts[k]->strides();
  return make_offset_calc<N>(ts[0]->shape(), strides, what);
}

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// ---- reductions ---------------------------------------------------------------------------

struct SumOp {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
};
// Max and min propagate NaN (a NaN operand wins), as the CPU kernels do.
struct MaxOp {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    if constexpr (std::is_floating_point_v<A>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return b > a ? b : a;
  }
};
struct MinOp {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    if constexpr (std::is_floating_point_v<A>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return b < a ? b : a;
  }
};

template <typename A, typename Op>
__device__ __forceinline__ A warp_reduce(A v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Reduces v over the G threads of a group (G = 32: one warp; G > 32: the whole block, which
// then holds exactly one group). Every thread of the group gets the result. `shared` holds at
// least 32 A; it is reused, so consecutive calls are separated by the __syncthreads inside.
template <int G, typename A, typename Op>
__device__ __forceinline__ A group_reduce(A v, Op op, A* shared) {
  v = warp_reduce(v, op);
  if constexpr (G > 32) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // shared may still be read by the previous call
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = shared[0];
    for (int w = 1; w < G / 32; ++w) v = op(v, shared[w]);
  }
  return v;
}

// Row-wise kernels (softmax, layer norm, cross-entropy): G threads cooperate on one row
// (row_group_size, cuda/offset_calc.h). A warp-sized group shares its block with 7 others (8
// rows per block of 256 threads); a larger group is the whole block.
template <int G>
constexpr int kBlockThreads = G == 32 ? 256 : G;
template <int G>
constexpr int kRowsPerBlock = G == 32 ? 8 : 1;

// Calls fn.template operator()<G>() with the row group size for rows of n elements.
template <typename Fn>
void with_group(int64_t n, Fn&& fn) {
  switch (row_group_size(n)) {
    case 32: fn.template operator()<32>(); break;
    case 128: fn.template operator()<128>(); break;
    case 256: fn.template operator()<256>(); break;
    default: fn.template operator()<1024>(); break;
  }
}

}  // namespace lsf::cuda::ka
