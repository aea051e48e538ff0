// GELU and ReLU modules: thin wrappers over lsf::gelu and lsf::relu.
#include "lsformer/models/nn/activation.h"

namespace lsf::nn {

GELU::GELU(GeluApproximation approximate) : Layer("GELU"), approximate_(approximate) {}

Tensor GELU::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  return gelu(x, approximate_);
}

std::string GELU::extra_repr() const {
  return approximate_ == GeluApproximation::Tanh ? "approximate='tanh'" : "approximate='none'";
}

Tensor ReLU::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  return relu(x);
}

std::shared_ptr<Layer> make_activation(Activation activation) {
  switch (activation) {
    case Activation::GELU: return std::make_shared<GELU>();
    case Activation::GELUTanh: return std::make_shared<GELU>(GeluApproximation::Tanh);
    case Activation::ReLU: return std::make_shared<ReLU>();
  }
  LSF_FAIL() << "make_activation: unknown activation " << int(activation);
}

}  // namespace lsf::nn
