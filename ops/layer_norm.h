// Layer normalisation over the trailing dims given by normalized_shape, with optional
// elementwise affine weight and bias; fused forward and backward kernels.
//   y = (x − mean) / sqrt(var + eps) · weight + bias   (biased variance, as PyTorch)
#pragma once

#include "lsformer/engine/tensor.h"

namespace lsf {

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace lsf
