// vision::ImageClassifier: the one interface of every image classifier in models/vision
// (ViL-LS, CvT*-LS, the CNN baseline), so a trainer can hold any of them.
//
//   std::shared_ptr<vision::ImageClassifier> model = vision::make_image_classifier(
//       "vil_ls_medium_224", {.num_classes = 10, .image_size = 28, .in_channels = 1});
//   Tensor logits = model->forward(images);   // images [B, C, H, W] f32 → logits [B, num_classes]
//
// A model is built for one square image size and channel count (position tables and relative
// bias tables depend on the feature-map sizes, as in the official code); forward checks the
// input against them and names the mismatch.
#pragma once

#include <cstdint>
#include <string>

#include "lsformer/models/nn/module.h"

namespace lsf::vision {

// What the data fixes about a classifier, whatever its family.
struct ImageSpec {
  int64_t num_classes = 1000;
  int64_t image_size = 224;  // H = W
  int64_t in_channels = 3;
};

class ImageClassifier : public nn::Module {
 public:
  using nn::Module::Module;
  // images [B, C, H, W] (f32, or f64 after to(kF64)) → logits [B, num_classes].
  virtual Tensor forward(const Tensor& images) = 0;
  virtual ImageSpec spec() const = 0;
};

// Checks images against a classifier's spec: [B, in_channels, image_size, image_size], floating
// point; throws naming `model` and both shapes otherwise.
void check_images(const char* model, const Tensor& images, const ImageSpec& spec);

}  // namespace lsf::vision
