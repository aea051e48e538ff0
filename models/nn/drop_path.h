// nn::DropPath: stochastic depth on a residual branch (timm's DropPath; ops/drop_path.h): in
// training mode each sample's branch is kept with probability 1 − p and scaled by 1/(1 − p),
// or zeroed; the identity in eval mode or with p = 0. No parameters. Masks come from
// `generator` (the default generator when null), so a seeded run is reproducible.
#pragma once

#include <string>

#include "lsformer/models/nn/layer.h"

namespace lsf::nn {

class DropPath : public Layer {
 public:
  explicit DropPath(double p = 0.0, Generator* generator = nullptr);
  Tensor forward(const Tensor& x) override;  // x [B, *] → [B, *]
  std::string extra_repr() const override;
  double p() const { return p_; }

 private:
  double p_;
  Generator* generator_;
};

}  // namespace lsf::nn
