// Internal (not installed): the kernel table entries of conv2d (ops/conv.h).
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/conv.h"

namespace lsf {

// y = conv(x, weight) + bias (overwrites y). x [N, C, H, W], weight [O, C/G, kH, kW],
// y [N, O, Ho, Wo] contiguous; bias [O] contiguous or undefined. Shapes already checked.
LSF_DECLARE_KERNEL(conv2d_forward_kernel, void(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options));

// Gradients, each overwritten and skipped when undefined: dx [N, C, H, W], dweight
// [O, C/G, kH, kW], dbias [O], all contiguous. Inputs dy [N, O, Ho, Wo], x and weight contiguous
// (x may be undefined when dweight is not asked for, weight when dx is not).
LSF_DECLARE_KERNEL(conv2d_backward_kernel, void(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x, const Tensor& weight, const Conv2dOptions& options));

}  // namespace lsf
