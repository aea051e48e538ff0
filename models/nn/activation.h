// Activation layers: GELU (exact erf form or tanh approximation) and ReLU, as modules so that
// Sequential and Mlp can hold them; they have no parameters.
#pragma once

#include <memory>
#include <string>

#include "lsformer/models/nn/layer.h"
#include "lsformer/ops/unary.h"

namespace lsf::nn {

class GELU : public Layer {
 public:
  explicit GELU(GeluApproximation approximate = GeluApproximation::None);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  GeluApproximation approximate() const { return approximate_; }

 private:
  GeluApproximation approximate_;
};

class ReLU : public Layer {
 public:
  ReLU() : Layer("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

// The activations a config or an option struct can name.
enum class Activation { GELU, GELUTanh, ReLU };
std::shared_ptr<Layer> make_activation(Activation activation);

}  // namespace lsf::nn
