// torchvision / timm per-sample transforms (data/image_transforms.h).
#include "lsformer/data/image_transforms.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "lsformer/data/image_enhance.h"
#include "lsformer/engine/error.h"

namespace lsf::data {

int64_t python_round(double v) { return int64_t(std::nearbyint(v)); }  // default mode: half to even

CropBox random_resized_crop_box(int64_t height, int64_t width, const RandomResizedCropOptions& options,
                                SampleRandom& random) {
  LSF_CHECK(options.scale_min > 0 && options.scale_min <= options.scale_max && options.ratio_min > 0 &&
            options.ratio_min <= options.ratio_max)
      << "random_resized_crop: need 0 < scale_min ≤ scale_max and 0 < ratio_min ≤ ratio_max, got scale ("
      << options.scale_min << ", " << options.scale_max << "), ratio (" << options.ratio_min << ", "
      << options.ratio_max << ")";
  const double area = double(height) * double(width);
  const double log_lo = std::log(options.ratio_min), log_hi = std::log(options.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * random.uniform(options.scale_min, options.scale_max);
    const double aspect = std::exp(random.uniform(log_lo, log_hi));
    const int64_t w = python_round(std::sqrt(target_area * aspect));
    const int64_t h = python_round(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int64_t top = random.randint(0, height - h);
      const int64_t left = random.randint(0, width - w);
      return {top, left, h, w};
    }
  }
  const double in_ratio = double(width) / double(height);
  int64_t w = width, h = height;
  if (in_ratio < options.ratio_min) {
    h = python_round(double(w) / options.ratio_min);
  } else if (in_ratio > options.ratio_max) {
    w = python_round(double(h) * options.ratio_max);
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

Image random_resized_crop(const Image& image, int64_t size, const RandomResizedCropOptions& options,
                          Interpolation interpolation, SampleRandom& random) {
  LSF_CHECK(size > 0) << "random_resized_crop: size must be > 0, got " << size;
  const CropBox box = random_resized_crop_box(image.height, image.width, options, random);
  return resize(crop(image, box.top, box.left, box.height, box.width), size, size, interpolation);
}

Image color_jitter(const Image& image, const ColorJitterOptions& options, SampleRandom& random) {
  LSF_CHECK(options.brightness >= 0 && options.contrast >= 0 && options.saturation >= 0)
      << "color_jitter: strengths must be ≥ 0, got " << options.brightness << ", " << options.contrast
      << ", " << options.saturation;
  std::array<int, 4> order = {0, 1, 2, 3};  // torch.randperm(4): brightness, contrast, saturation, hue
  for (int i = 3; i > 0; --i) std::swap(order[size_t(i)], order[size_t(random.randint(0, i))]);
  auto factor = [&](double strength) {
    return strength > 0 ? random.uniform(std::max(0.0, 1.0 - strength), 1.0 + strength) : 1.0;
  };
  const double b = factor(options.brightness), c = factor(options.contrast), s = factor(options.saturation);
  Image out = image;
  for (int fn : order) {
    if (fn == 0 && options.brightness > 0) out = adjust_brightness(out, float(b));
    if (fn == 1 && options.contrast > 0) out = adjust_contrast(out, float(c));
    if (fn == 2 && options.saturation > 0) out = adjust_color(out, float(s));
  }
  return out;
}

Image resize_shorter(const Image& image, int64_t size, Interpolation interpolation) {
  LSF_CHECK(size > 0) << "resize_shorter: size must be > 0, got " << size;
  const int64_t h = image.height, w = image.width;
  const int64_t shorter = std::min(h, w), longer = std::max(h, w);
  const int64_t new_long = int64_t(double(size * longer) / double(shorter));  // Python int(s·long/short)
  const int64_t new_h = w <= h ? new_long : size, new_w = w <= h ? size : new_long;
  if (new_h == h && new_w == w) return image;
  return resize(image, new_h, new_w, interpolation);
}

Image center_crop(const Image& image, int64_t size) {
  LSF_CHECK(size > 0 && size <= image.height && size <= image.width)
      << "center_crop: a " << size << "×" << size << " crop does not fit the " << image.height << "×"
      << image.width << " image";
  const int64_t top = python_round(double(image.height - size) / 2.0);
  const int64_t left = python_round(double(image.width - size) / 2.0);
  return crop(image, top, left, size, size);
}

void normalize_to_chw(const Image& image, const std::vector<float>& mean, const std::vector<float>& std,
                      float* out) {
  const int64_t cc = image.channels, plane = image.height * image.width;
  LSF_CHECK(int64_t(mean.size()) == cc && int64_t(std.size()) == cc)
      << "normalize: " << mean.size() << " means and " << std.size() << " stds for a " << cc << "-channel image";
  for (int64_t c = 0; c < cc; ++c) {
    const float m = mean[size_t(c)], s = std[size_t(c)];
    float* o = out + c * plane;
    for (int64_t p = 0; p < plane; ++p) o[p] = (float(image.pixels[size_t(p * cc + c)]) / 255.0f - m) / s;
  }
}

bool random_erasing(float* chw, int64_t channels, int64_t height, int64_t width,
                    const RandomErasingOptions& options, SampleRandom& random) {
  if (options.probability <= 0) return false;
  LSF_CHECK(options.count >= 1 && options.min_area > 0 && options.min_area <= options.max_area &&
            options.min_aspect > 0 && options.min_aspect <= options.max_aspect)
      << "random_erasing: need count ≥ 1, 0 < min_area ≤ max_area, 0 < min_aspect ≤ max_aspect";
  if (random.uniform() > options.probability) return false;
  const double area = double(height) * double(width);
  const double log_lo = std::log(options.min_aspect), log_hi = std::log(options.max_aspect);
  bool erased = false;
  for (int region = 0; region < options.count; ++region) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target_area = random.uniform(options.min_area, options.max_area) * area / options.count;
      const double aspect = std::exp(random.uniform(log_lo, log_hi));
      const int64_t h = python_round(std::sqrt(target_area * aspect));
      const int64_t w = python_round(std::sqrt(target_area / aspect));
      if (w < width && h < height) {
        const int64_t top = random.randint(0, height - h);
        const int64_t left = random.randint(0, width - w);
        for (int64_t c = 0; c < channels; ++c)
          for (int64_t y = top; y < top + h; ++y)
            for (int64_t x = left; x < left + w; ++x) chw[(c * height + y) * width + x] = float(random.normal());
        erased = erased || (h > 0 && w > 0);
        break;
      }
    }
  }
  return erased;
}

}  // namespace lsf::data
