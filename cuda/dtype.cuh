// Internal to cuda/: the one place that maps lsformer dtypes onto CUDA element types and
// converts between them, used by every kernel family (cuda/strided.cuh, cuda/reduce_utils.cuh,
// cuda/kb_common.cuh, cuda/long_short_tiles.cuh and their .cu files).
//
//   dispatch_among<DType::F32, DType::F64>(t, fn)  calls fn.template operator()<CudaType>() for
//       t when t is in the list, else returns false (each family raises its own error);
//   convert<To>(v)  the device-side convert_scalar (engine/dtype.h): bf16 / f16 through float,
//       rounding to nearest even as BFloat16 / Half do; to bool is "!= 0"; else a static_cast;
//   compute_t<T>    float for every storage type but double (bf16 / f16 / f32 compute in float).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "lsformer/cuda/runtime.cuh"
#include "lsformer/engine/dtype.h"

namespace lsf::cuda {

// ---- host-side dispatch ----

template <DType... Ds, typename Fn>
bool dispatch_among(DType t, Fn&& fn) {
  return ((t == Ds ? (fn.template operator()<typename CudaType<Ds>::type>(), true) : false) || ...);
}

// ---- element types and conversions ----

template <typename T>
constexpr bool is_reduced_float_v = std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// __float2bfloat16 / __float2half round to nearest even (the _rn variants are the same function).
template <typename To, typename From>
__host__ __device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, __nv_bfloat16>) {
    return convert<To>(__bfloat162float(v));
  } else if constexpr (std::is_same_v<From, __half>) {
    return convert<To>(__half2float(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace lsf::cuda
