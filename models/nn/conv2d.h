// nn::Conv2d: 2-D convolution layer, as torch.nn.Conv2d (zero padding).
//
// Parameters (PyTorch names and layouts): weight [out_channels, in_channels/groups, kH, kW]
// (OIHW), bias [out_channels] (absent when bias = false). x [N, C, H, W] (or [C, H, W]) →
// [N, O, Ho, Wo]; see ops/conv.h for the output size. Default initialisation is PyTorch's:
// weight kaiming_uniform_(a = √5), i.e. U(±1/√fan_in) with fan_in = in_channels/groups·kH·kW,
// and bias U(±1/√fan_in).
#pragma once

#include <string>

#include "lsformer/models/nn/layer.h"
#include "lsformer/ops/conv.h"

namespace lsf::nn {

class Conv2d : public Layer {
 public:
  //   Conv2d(3, 64, /*kernel_size=*/3, {.stride = 2, .padding = 1});
  Conv2d(int64_t in_channels, int64_t out_channels, Int2 kernel_size, const Conv2dOptions& options = {},
         bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  void reset_parameters(Generator* generator = nullptr);

  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  Int2 kernel_size() const { return kernel_size_; }
  const Conv2dOptions& options() const { return options_; }

  Tensor weight;  // [out_channels, in_channels / groups, kH, kW]
  Tensor bias;    // [out_channels] or undefined

 private:
  int64_t in_channels_, out_channels_;
  Int2 kernel_size_;
  Conv2dOptions options_;
};

}  // namespace lsf::nn
