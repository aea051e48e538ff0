// nn::LayerNorm: parameters and the call into the fused lsf::layer_norm op.
#include "lsformer/models/nn/layer_norm.h"

#include <sstream>

#include "lsformer/engine/profiler.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/ops/layer_norm.h"

namespace lsf::nn {

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine)
    : Layer("LayerNorm"), normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  LSF_CHECK(!normalized_shape_.empty()) << "LayerNorm: normalized_shape must have at least one dimension";
  for (int64_t d : normalized_shape_)
    LSF_CHECK(d >= 0) << "LayerNorm: normalized_shape " << normalized_shape_ << " has a negative size";
  LSF_CHECK(eps >= 0) << "LayerNorm: eps must be non-negative, got " << eps;
  if (elementwise_affine) {
    weight = register_parameter("weight", empty(normalized_shape_));
    bias = register_parameter("bias", empty(normalized_shape_));
  }
  reset_parameters();
}

void LayerNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor LayerNorm::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  profiler::PhaseScope phase("layer_norm");
  return layer_norm(x, normalized_shape_, weight, bias, eps_);
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << "normalized_shape=" << normalized_shape_ << ", eps=" << eps_
     << ", elementwise_affine=" << (weight.defined() ? "true" : "false");
  return os.str();
}

}  // namespace lsf::nn
