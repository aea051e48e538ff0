// vision::CnnClassifier: a plain convolutional baseline for small images (28×28 Fashion-MNIST,
// 32×32 CIFAR), to compare the transformers against.
//
//   features: for each width c_i in `channels`:
//               convs_per_block × [Conv2d 3×3 (padding 1, no bias) → BatchNorm2d → ReLU]
//               → MaxPool2d 2×2 (skipped once the map is 1×1)
//   global average pool → Dropout(dropout) → classifier (Linear c_last → classes)
// state_dict names: features.<k>.* (a Sequential, torchvision style), classifier.{weight,bias}.
// Init: convs Kaiming-normal (fan_out, ReLU) as torchvision's ResNet, BatchNorm (1, 0), Linear
// PyTorch's default. Any channel count and any image size ≥ 1 work (the pools floor the map).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lsformer/models/nn/dropout.h"
#include "lsformer/models/nn/linear.h"
#include "lsformer/models/nn/sequential.h"
#include "lsformer/models/vision/classifier.h"

namespace lsf::vision {

struct CnnOptions {
  std::vector<int64_t> channels = {32, 64, 128};  // one block per entry
  int64_t convs_per_block = 2;
  int64_t image_size = 28;
  int64_t in_channels = 1;
  int64_t num_classes = 10;
  double dropout = 0.0;  // before the classifier
};

class CnnClassifier : public ImageClassifier {
 public:
  explicit CnnClassifier(const CnnOptions& options);
  Tensor forward(const Tensor& images) override;  // [B, C, S, S] → [B, num_classes]
  ImageSpec spec() const override;
  std::string extra_repr() const override;

  const CnnOptions& options() const { return options_; }
  std::shared_ptr<nn::Sequential> features;
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::Linear> classifier;

 private:
  CnnOptions options_;
};

}  // namespace lsf::vision
