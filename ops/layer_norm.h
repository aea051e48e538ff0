// Layer normalisation over the trailing dims given by normalized_shape, with optional
// elementwise affine weight and bias; fused forward and backward kernels.
//   y = (x − mean) / sqrt(var + eps) · weight + bias   (biased variance, as PyTorch)
#pragma once

#include "engine/dispatch.h"
#include "engine/tensor.h"

namespace lsf {

// x viewed as [rows, n] contiguous. Writes y [rows, n], mean [rows] and rstd [rows]
// (1 / sqrt(var + eps)), which the backward reuses. weight/bias [n] may be undefined.
LSF_DECLARE_KERNEL(layer_norm_kernel, void(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps));
// Gradients: dx [rows, n] (overwritten), dweight/dbias [n] (overwritten; undefined when not
// needed). Inputs: dy, x [rows, n]; mean, rstd [rows]; weight [n] or undefined.
LSF_DECLARE_KERNEL(layer_norm_backward_kernel, void(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight));

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace lsf
