// Pooling layers, as torch.nn: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d (see ops/pool.h). They
// hold no parameters. x [N, C, H, W] (or [C, H, W]) → [N, C, Ho, Wo].
#pragma once

#include <string>

#include "lsformer/models/nn/layer.h"
#include "lsformer/ops/pool.h"

namespace lsf::nn {

class MaxPool2d : public Layer {
 public:
  //   MaxPool2d({.kernel_size = 3, .stride = 2, .padding = 1});
  explicit MaxPool2d(const Pool2dOptions& options);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const Pool2dOptions& options() const { return options_; }

 private:
  Pool2dOptions options_;
};

class AvgPool2d : public Layer {
 public:
  explicit AvgPool2d(const Pool2dOptions& options);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const Pool2dOptions& options() const { return options_; }

 private:
  Pool2dOptions options_;
};

class AdaptiveAvgPool2d : public Layer {
 public:
  explicit AdaptiveAvgPool2d(Int2 output_size);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Int2 output_size() const { return output_size_; }

 private:
  Int2 output_size_;
};

}  // namespace lsf::nn
