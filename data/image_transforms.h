// The per-sample transforms of the ImageNet recipe other than RandAugment, as torchvision and
// timm define them, drawing their randomness from a SampleRandom (data/sample_random.h).
//
// random_resized_crop (torchvision RandomResizedCrop.get_params / timm's
//   RandomResizedCropAndInterpolation): up to 10 attempts of area = A·U(scale), aspect =
//   exp(U(log ratio)), w = round(√(area·aspect)), h = round(√(area/aspect)) (Python's round:
//   half to even); the first with 0 < w ≤ W and 0 < h ≤ H is placed at top = randint(0, H − h),
//   left = randint(0, W − w). Fallback: the central crop of the whole image clamped to the
//   ratio range (w = W, h = round(W / min ratio) when W/H < min ratio; h = H, w = round(H · max
//   ratio) when W/H > max ratio; else the whole image), at ((H − h) // 2, (W − w) // 2).
//   The crop is then resized to size × size (data/image_ops.h resize).
// color_jitter (torchvision ColorJitter(b, c, s) on PIL images): the order of brightness,
//   contrast, saturation (and the unused hue slot) is a random permutation of 4, then factors
//   U(max(0, 1 − b), 1 + b), U(…c…), U(…s…) are drawn in that fixed order; each adjustment is
//   ImageEnhance's (data/image_enhance.h). A strength of 0 leaves that part out.
// resize_shorter + center_crop (torchvision Resize(int) + CenterCrop): the shorter side becomes
//   `size`, the longer int(size · long / short); the crop starts at round((H − size)/2),
//   round((W − size)/2) with Python's round (half to even).
// normalize_to_chw (ToTensor + Normalize): (float(v) / 255 − mean[c]) / std[c] in float32,
//   written as [C, H, W].
// random_erasing (timm RandomErasing, mode "pixel", on the normalised [C, H, W] tensor): with
//   probability p, up to 10 attempts of area = H·W·U(min_area, max_area) / count, aspect =
//   exp(U(log min_aspect, log max_aspect)), h = round(√(area·aspect)), w = round(√(area/aspect));
//   the first with h < H and w < W is filled at (randint(0, H − h), randint(0, W − w)) with
//   N(0, 1) values per element.
#pragma once

#include <cstdint>
#include <vector>

#include "lsformer/data/image_ops.h"
#include "lsformer/data/sample_random.h"

namespace lsf::data {

struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

struct RandomResizedCropOptions {
  double scale_min = 0.08, scale_max = 1.0;            // fraction of the image area
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // width / height
};

CropBox random_resized_crop_box(int64_t height, int64_t width, const RandomResizedCropOptions& options,
                                SampleRandom& random);
Image random_resized_crop(const Image& image, int64_t size, const RandomResizedCropOptions& options,
                          Interpolation interpolation, SampleRandom& random);

struct ColorJitterOptions {
  double brightness = 0.4, contrast = 0.4, saturation = 0.4;  // each ≥ 0; 0 = off
};
Image color_jitter(const Image& image, const ColorJitterOptions& options, SampleRandom& random);

Image resize_shorter(const Image& image, int64_t size, Interpolation interpolation);
Image center_crop(const Image& image, int64_t size);

// out [C, H, W] f32 from image [H, W, C] u8; mean and std hold C values (std > 0).
void normalize_to_chw(const Image& image, const std::vector<float>& mean, const std::vector<float>& std,
                      float* out);

struct RandomErasingOptions {
  double probability = 0.25;  // 0 = off
  double min_area = 0.02, max_area = 1.0 / 3.0;
  double min_aspect = 0.3, max_aspect = 1.0 / 0.3;
  int count = 1;              // regions per erased image
};
// Erases in place in chw [C, H, W]; returns whether anything was erased.
bool random_erasing(float* chw, int64_t channels, int64_t height, int64_t width,
                    const RandomErasingOptions& options, SampleRandom& random);

// Python's round() of a non-negative double to an integer: half to even.
int64_t python_round(double v);

}  // namespace lsf::data
