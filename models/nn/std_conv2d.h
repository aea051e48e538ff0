// nn::StdConv2d: a Conv2d whose kernel is weight-standardised in every forward (timm's
// StdConv2d; ops/weight_standardization.h): conv2d(x, (w − mean)/√(var + eps), bias). The stored
// weight stays raw (what the optimiser updates); parameters and names are Conv2d's.
#pragma once

#include <string>

#include "lsformer/models/nn/conv2d.h"

namespace lsf::nn {

class StdConv2d : public Conv2d {
 public:
  StdConv2d(int64_t in_channels, int64_t out_channels, Int2 kernel_size, const Conv2dOptions& options = {},
            bool bias = true, double eps = 1e-6);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double eps() const { return eps_; }

 private:
  double eps_;
};

}  // namespace lsf::nn
