// nn::Linear: y = x · weightᵀ + bias, as torch.nn.Linear.
//
// Parameters (PyTorch names and layouts): weight [out_features, in_features], bias
// [out_features] (absent when bias = false). x [*, in_features] → y [*, out_features]; a 1-D x
// gives a 1-D y. Default initialisation is PyTorch's: weight kaiming_uniform_(a = √5), i.e.
// U(±1/√in_features), and bias U(±1/√in_features).
#pragma once

#include <initializer_list>
#include <string>

#include "lsformer/models/nn/layer.h"
#include "lsformer/ops/unary.h"

namespace lsf::nn {

class Linear : public Layer {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  // gelu(forward(x)), with the bias folded into the activation (bias_gelu, ops/unary.h): one
  // pass over the [..., out_features] output fewer each way. Equal to GELU()(forward(x)) in the
  // forward and the input gradient, bit for bit.
  Tensor forward_gelu(const Tensor& x, GeluApproximation approximate = GeluApproximation::None);
  std::string extra_repr() const override;
  // Draws weight and bias again with the default initialisation (from `generator`, or the
  // default generator when null).
  void reset_parameters(Generator* generator = nullptr);

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

  Tensor weight;  // [out_features, in_features]
  Tensor bias;    // [out_features] or undefined

 private:
  friend TensorList forward_linears(const Tensor& x, std::initializer_list<Linear*> layers);
  void check_input(const Tensor& x) const;
  int64_t in_features_, out_features_;
};

// layers[i]->forward(x) for every layer, as one op (lsf::linears, ops/matmul.h): the same
// outputs, and x's gradient summed into one buffer as each layer's product is stored instead of
// autograd adding up one gradient per layer (an attention's query, key and value projections).
TensorList forward_linears(const Tensor& x, std::initializer_list<Linear*> layers);

}  // namespace lsf::nn
