// nn::Mlp: the transformer feed-forward block, as timm's Mlp:
//   fc1 (in → hidden) → activation → drop1 → fc2 (hidden → out) → drop2
// Children (and state_dict names): fc1, act, drop1, fc2, drop2; parameters fc1.weight,
// fc1.bias, fc2.weight, fc2.bias. x [*, in_features] → [*, out_features].
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "lsformer/models/nn/activation.h"
#include "lsformer/models/nn/dropout.h"
#include "lsformer/models/nn/layer.h"
#include "lsformer/models/nn/linear.h"

namespace lsf::nn {

//   Mlp(256, {.hidden_features = 1024, .dropout = 0.1});
struct MlpOptions {
  std::optional<int64_t> hidden_features;  // default: in_features
  std::optional<int64_t> out_features;     // default: in_features
  Activation activation = Activation::GELU;
  double dropout = 0.0;                    // both dropouts
  bool bias = true;                        // both Linears
};

class Mlp : public Layer {
 public:
  explicit Mlp(int64_t in_features, const MlpOptions& options = {});
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<Linear> fc1;
  std::shared_ptr<Layer> act;
  std::shared_ptr<Dropout> drop1;
  std::shared_ptr<Linear> fc2;
  std::shared_ptr<Dropout> drop2;
};

}  // namespace lsf::nn
