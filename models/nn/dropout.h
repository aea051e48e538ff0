// nn::Dropout: zeroes each element with probability p and scales the rest by 1/(1 − p) in
// training mode; the identity (returning its input) in eval mode, as torch.nn.Dropout.
// Masks come from `generator` (the default generator when null; see ops/dropout.h).
#pragma once

#include <string>

#include "lsformer/models/nn/layer.h"

namespace lsf::nn {

class Dropout : public Layer {
 public:
  explicit Dropout(double p = 0.5, Generator* generator = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double p() const { return p_; }

 private:
  double p_;
  Generator* generator_;
};

}  // namespace lsf::nn
