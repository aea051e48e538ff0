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
// Copies between devices (a backend registers it under its own device type; both tensors are
// contiguous and of one dtype).
LSF_DECLARE_KERNEL(cross_device_copy_kernel, void(const Tensor& dst, const Tensor& src));

}  // namespace lsf
