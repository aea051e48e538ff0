// Internal to cuda/: walking N same-shaped strided tensors (cuda/offset_calc.h) and the dispatch
// over every dtype onto CUDA types; conversions (convert, is_reduced_float_v) come from
// cuda/dtype.cuh.
#pragma once

#include <array>
#include <type_traits>

#include "lsformer/cuda/dtype.cuh"
#include "lsformer/cuda/runtime.cuh"
#include "lsformer/cuda/offset_calc.h"
#include "lsformer/engine/tensor.h"

namespace lsf::cuda {

// dispatch_all for kernels: the lambda's template argument is the CUDA storage type.
template <typename Fn>
void dispatch_cuda(DType t, Fn&& fn) {
  if (dispatch_among<DType::F32, DType::F64, DType::BF16, DType::F16, DType::I32, DType::I64, DType::U8,
                     DType::Bool>(t, fn))
    return;
  LSF_FAIL() << "unknown dtype " << int(t);
}

inline bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace lsf::cuda
