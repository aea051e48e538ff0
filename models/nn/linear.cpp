// nn::Linear. The forward is lsf::linear (ops/matmul.h): the product with the transposed weight
// view (read in place, no copy) and the bias added as the product is stored.
#include "lsformer/models/nn/linear.h"

#include <cmath>
#include <sstream>

#include "lsformer/models/nn/init.h"
#include "lsformer/ops/matmul.h"

namespace lsf::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias)
    : Layer("Linear"), in_features_(in_features), out_features_(out_features) {
  LSF_CHECK(in_features >= 0 && out_features >= 0)
      << "Linear: feature counts must be non-negative, got in_features=" << in_features
      << ", out_features=" << out_features;
  weight = register_parameter("weight", empty({out_features, in_features}));
  if (with_bias) bias = register_parameter("bias", empty({out_features}));
  reset_parameters();
}

void Linear::reset_parameters(Generator* generator) {
  init::kaiming_uniform_(weight, /*a=*/std::sqrt(5.0), init::FanMode::FanIn, init::Nonlinearity::LeakyReLU,
                         generator);
  if (bias.defined()) {
    const double bound = in_features_ > 0 ? 1.0 / std::sqrt(double(in_features_)) : 0.0;
    init::uniform_(bias, -bound, bound, generator);
  }
}

void Linear::check_input(const Tensor& x) const {
  LSF_CHECK(x.defined()) << "Linear: the input is undefined";
  LSF_CHECK(x.dim() >= 1 && x.size(-1) == in_features_)
      << "Linear: input of shape " << x.shape() << " does not end in in_features=" << in_features_
      << " (weight shape " << weight.shape() << ")";
}

Tensor Linear::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  check_input(x);
  return linear(x, weight, bias);  // the bias added as the product is stored (ops/matmul.h)
}

Tensor Linear::forward_gelu(const Tensor& x, GeluApproximation approximate) {
  ::lsf::nn::ModuleScope call_site(*this);
  check_input(x);
  Tensor y = matmul(x, weight.t());
  return bias.defined() ? bias_gelu(y, bias, approximate) : gelu(y, approximate);
}

std::string Linear::extra_repr() const {
  std::ostringstream os;
  os << "in_features=" << in_features_ << ", out_features=" << out_features_
     << ", bias=" << (bias.defined() ? "true" : "false");
  return os.str();
}

TensorList forward_linears(const Tensor& x, std::initializer_list<Linear*> layers) {
  TensorList weights, biases;
  for (Linear* layer : layers) {
    LSF_CHECK(layer != nullptr) << "forward_linears: a layer is null";
    layer->check_input(x);
    weights.push_back(layer->weight);
    biases.push_back(layer->bias);
  }
  return linears(x, weights, biases);
}

}  // namespace lsf::nn
