// Internal (not installed): the kernel table entries of layer_norm (ops/layer_norm.h).
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/layer_norm.h"

namespace lsf {

// x viewed as [rows, n] contiguous. Writes y [rows, n], mean [rows] and rstd [rows]
// (1 / sqrt(var + eps)), which the backward reuses: in x's dtype for f32 and f64, in f32 for
// bf16 and f16 (their kernels accumulate in float). weight/bias [n] may be undefined.
LSF_DECLARE_KERNEL(layer_norm_forward_kernel, void(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps));

// Gradients: dx [rows, n] (overwritten), dweight/dbias [n] (overwritten; undefined when not
// needed). Inputs: dy, x [rows, n]; mean, rstd [rows]; weight [n] or undefined.
LSF_DECLARE_KERNEL(layer_norm_backward_kernel, void(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight));

}  // namespace lsf
