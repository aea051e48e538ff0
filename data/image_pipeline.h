// ImagePipeline: dataset samples → an augmented, normalised batch for the vision models, the
// ViL-LS / timm ImageNet recipe (transformer-ls.md §4.5) by default.
//
// Training, per sample i of epoch e (randomness from SampleRandom(seed, kAugmentStream, i, e)):
//   decode → [channels] → RandomResizedCrop(image_size, scale, ratio, interpolation)
//   (or a plain resize to image_size² when random_resized_crop is off) → horizontal flip (p)
//   → RandAugment (timm string) → colour jitter → ToTensor + Normalize(mean, std)
//   → random erasing (pixel mode)
// then per batch k (SampleRandom(seed, kMixStream, k, 0)): Mixup / CutMix with label-smoothed
// soft targets (data/mixup.h). timm disables colour jitter whenever RandAugment is on, and so
// does this pipeline (set force_color_jitter to apply both), so the recipe's "color-jitter 0.4"
// only acts when RandAugment is switched off.
// Evaluation (train = false): resize the shorter side to ⌊image_size / crop_pct⌋, centre crop
// image_size, normalise — no randomness.
//
// Every output is a pure function of (options, dataset, indices, epoch, seed, batch index): the
// same on any thread, in any order, after any resume. Only plain loops run here (no lsf ops that
// enter the OpenMP pool), so the loader's worker threads never compete for the model's pool.
//
// Batch: images [B, C, S, S] f32, labels [B] i64, soft_targets [B, K] f32 when mixing is on
// (train and options.mixup.enabled()), else undefined. The recipe's interpolation is bicubic
// for training and evaluation (ViL's INPUT.INTERPOLATION = 3 per §4.5); options can say bilinear.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lsformer/data/image_dataset.h"
#include "lsformer/data/image_transforms.h"
#include "lsformer/data/mixup.h"
#include "lsformer/data/rand_augment.h"
#include "lsformer/engine/tensor.h"

namespace lsf::data {

struct ImagePipelineOptions {
  bool train = true;
  int64_t image_size = 224;  // S: output images are S × S
  int64_t channels = 0;      // 0: the dataset's; 1 or 3: converted (data/image_decode.h rules)
  Interpolation interpolation = Interpolation::Bicubic;
  std::vector<float> mean = {0.485f, 0.456f, 0.406f};  // ImageNet's; one value per channel
  std::vector<float> std = {0.229f, 0.224f, 0.225f};

  // training only
  bool random_resized_crop = true;
  RandomResizedCropOptions crop;
  double hflip = 0.5;                             // probability
  std::string rand_augment = "rand-m9-mstd0.5-inc1";  // timm config string; empty = off
  ColorJitterOptions color_jitter;                 // strengths 0.4 (see the note above)
  bool force_color_jitter = false;
  RandomErasingOptions erasing;                    // probability 0.25, pixel mode, 1 region
  MixupOptions mixup;                              // Mixup 0.8 / CutMix 1.0, switch 0.5, smoothing 0.1

  // evaluation only
  double crop_pct = 0.875;  // resize the shorter side to ⌊S / crop_pct⌋, then centre crop S
};

struct ImageBatch {
  Tensor images;        // [B, C, S, S] f32
  Tensor labels;        // [B] i64
  Tensor soft_targets;  // [B, K] f32 when Mixup/CutMix is on, else undefined
  MixResult mix;        // what mixing did to this batch
  int64_t index = -1;   // the batch's index in the loader's stream (−1 when built directly)
  // The same batch with its tensors on `device` (where the model trains).
  ImageBatch to(Device device) const {
    ImageBatch b = *this;
    b.images = images.to(device);
    b.labels = labels.to(device);
    if (soft_targets.defined()) b.soft_targets = soft_targets.to(device);
    return b;
  }
};

class ImagePipeline {
 public:
  // Checks every option (names the bad one); num_classes = K of the soft targets.
  ImagePipeline(ImagePipelineOptions options, int64_t num_classes);

  // The uint8 stage of one sample (everything before normalisation): S × S × C.
  Image augment(const Image& image, int64_t index, int64_t epoch, uint64_t seed) const;
  // One sample, normalised (and erased when training) into out [C, S, S].
  void sample(const ImageDataset& dataset, int64_t index, int64_t epoch, uint64_t seed, float* out) const;
  // A batch of dataset samples `indices` (in order); batch_index keys the Mixup / CutMix draw.
  ImageBatch batch(const ImageDataset& dataset, const std::vector<int64_t>& indices, int64_t epoch,
                   uint64_t seed, int64_t batch_index) const;

  int64_t output_channels(const ImageDataset& dataset) const;
  const ImagePipelineOptions& options() const { return options_; }
  bool mixing() const { return options_.train && options_.mixup.enabled(); }

 private:
  Image prepare(const ImageDataset& dataset, int64_t index) const;  // decode + channel conversion
  ImagePipelineOptions options_;
  int64_t num_classes_;
  bool use_rand_augment_ = false;
  bool use_color_jitter_ = false;
  RandAugmentOptions rand_augment_;
};

}  // namespace lsf::data
