// Internal (not installed): the kernel table entries of the 2-D pooling ops (ops/pool.h).
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/pool.h"

namespace lsf {

// The kernels take contiguous [N·C, H, W] inputs and [N·C, Ho, Wo] outputs and the options with
// the stride resolved; every output is overwritten.
LSF_DECLARE_KERNEL(avg_pool2d_forward_kernel, void(const Tensor& y, const Tensor& x, const Pool2dOptions& options));
LSF_DECLARE_KERNEL(avg_pool2d_backward_kernel, void(const Tensor& dx, const Tensor& dy, const Pool2dOptions& options));
// indices [N·C, Ho, Wo] i64: the flat position h·W + w of each window's maximum.
LSF_DECLARE_KERNEL(max_pool2d_forward_kernel,
                   void(const Tensor& y, const Tensor& indices, const Tensor& x, const Pool2dOptions& options));
LSF_DECLARE_KERNEL(max_pool2d_backward_kernel, void(const Tensor& dx, const Tensor& dy, const Tensor& indices));
LSF_DECLARE_KERNEL(adaptive_avg_pool2d_forward_kernel, void(const Tensor& y, const Tensor& x));
LSF_DECLARE_KERNEL(adaptive_avg_pool2d_backward_kernel, void(const Tensor& dx, const Tensor& dy));

}  // namespace lsf
