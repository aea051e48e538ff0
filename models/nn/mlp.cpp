// nn::Mlp: two Linears around an activation, with dropout after each stage.
#include "lsformer/models/nn/mlp.h"

#include "lsformer/engine/profiler.h"

namespace lsf::nn {

Mlp::Mlp(int64_t in_features, const MlpOptions& options) : Layer("Mlp") {
  const int64_t hidden = options.hidden_features.value_or(in_features);
  const int64_t out = options.out_features.value_or(in_features);
  fc1 = register_module("fc1", std::make_shared<Linear>(in_features, hidden, options.bias));
  act = register_module("act", make_activation(options.activation));
  drop1 = register_module("drop1", std::make_shared<Dropout>(options.dropout));
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden, out, options.bias));
  drop2 = register_module("drop2", std::make_shared<Dropout>(options.dropout));
}

Tensor Mlp::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  profiler::PhaseScope phase("ffn");
  // A GELU takes fc1's bias inside it (Linear::forward_gelu): the same values, one pass less.
  const auto* gelu = dynamic_cast<const GELU*>(act.get());
  Tensor hidden = gelu ? fc1->forward_gelu(x, gelu->approximate()) : act->forward(fc1->forward(x));
  return drop2->forward(fc2->forward(drop1->forward(hidden)));
}

}  // namespace lsf::nn
