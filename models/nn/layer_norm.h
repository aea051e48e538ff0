// nn::LayerNorm: normalisation over the trailing dims given by normalized_shape, as
// torch.nn.LayerNorm: y = (x − mean) / √(var + eps) · weight + bias (biased variance).
//
// Parameters (when elementwise_affine): weight = ones(normalized_shape), bias =
// zeros(normalized_shape). x [*, normalized_shape...] → y of x's shape.
#pragma once

#include <string>

#include "lsformer/models/nn/layer.h"

namespace lsf::nn {

class LayerNorm : public Layer {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(int64_t normalized_size, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(Shape{normalized_size}, eps, elementwise_affine) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters();  // weight 1, bias 0

  const Shape& normalized_shape() const { return normalized_shape_; }
  double eps() const { return eps_; }

  Tensor weight;  // normalized_shape, or undefined without elementwise_affine
  Tensor bias;    // normalized_shape, or undefined without elementwise_affine

 private:
  Shape normalized_shape_;
  double eps_;
};

}  // namespace lsf::nn
