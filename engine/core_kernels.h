// The few backend kernels the engine itself needs: filling, strided copying with dtype
// conversion, and in-place addition (gradient accumulation). Every backend implements them.
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/engine/tensor.h"

namespace lsf {

// dst[i] = value for every element of dst (any strides, any dtype).
LSF_DECLARE_KERNEL(fill_kernel, void(const Tensor& dst, double value));
// dst[i] = convert(src[i]); same shape (src may have zero strides), any strides and dtypes.
LSF_DECLARE_KERNEL(copy_kernel, void(const Tensor& dst, const Tensor& src));
// dst[i] += src[i]; same shape and dtype, dst contiguous.
LSF_DECLARE_KERNEL(add_inplace_kernel, void(const Tensor& dst, const Tensor& src));
// dst (f32) = src (f32) rounded to the nearest value of `low` (bf16 or f16; ties to even, NaN
// stays NaN): autocast's rounding on the CPU in one pass (the bits of src.to(low).to(kF32)).
// CPU only: on a GPU autocast makes real 16-bit tensors.
LSF_DECLARE_KERNEL(round_to_kernel, void(const Tensor& dst, const Tensor& src, DType low));
// Copies between devices (a backend registers it under its own device type; both tensors are
// contiguous and of one dtype).
LSF_DECLARE_KERNEL(cross_device_copy_kernel, void(const Tensor& dst, const Tensor& src));

}  // namespace lsf
