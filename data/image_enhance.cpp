// Pillow-exact ImageOps tables and ImageEnhance blends (data/image_enhance.h).
#include "lsformer/data/image_enhance.h"

#include <vector>

#include "lsformer/data/image_decode.h"
#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {

void check_image(const Image& image, const char* who) {
  LSF_CHECK((image.channels == 1 || image.channels == 3) &&
            int64_t(image.pixels.size()) == image.height * image.width * image.channels)
      << who << ": bad image " << image.height << "×" << image.width << "×" << image.channels << " with "
      << image.pixels.size() << " bytes";
}

// One table per channel.
Image apply_luts(const Image& image, const std::vector<Lut>& luts) {
  Image out = image;
  const int64_t cc = image.channels;
  for (size_t i = 0; i < out.pixels.size(); ++i) out.pixels[i] = luts[i % size_t(cc)][image.pixels[i]];
  return out;
}

std::array<int64_t, 256> channel_histogram(const Image& image, int64_t channel) {
  std::array<int64_t, 256> h{};
  for (size_t i = size_t(channel); i < image.pixels.size(); i += size_t(image.channels)) ++h[image.pixels[i]];
  return h;
}

Lut identity_lut() {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[size_t(i)] = uint8_t(i);
  return lut;
}

// Pillow's 3×3 ImageFilter.SMOOTH: float32 kernel weights (k / 13), rounded result, borders copied.
Image smooth(const Image& image) {
  Image out = image;
  const int64_t h = image.height, w = image.width, cc = image.channels, stride = w * cc;
  if (h < 3 || w < 3) return out;
  const float side = 1.0f / 13.0f, centre = 5.0f / 13.0f;
  for (int64_t y = 1; y < h - 1; ++y) {
    const uint8_t* above = image.pixels.data() + (y - 1) * stride;
    const uint8_t* row = above + stride;
    const uint8_t* below = row + stride;
    uint8_t* o = out.pixels.data() + y * stride;
    for (int64_t i = cc; i < stride - cc; ++i) {
      // Pillow sums the rows y+1, y, y−1, each left to right, starting from the offset 0.
      float ss = 0.0f;
      ss += float(below[i - cc]) * side + float(below[i]) * side + float(below[i + cc]) * side;
      ss += float(row[i - cc]) * side + float(row[i]) * centre + float(row[i + cc]) * side;
      ss += float(above[i - cc]) * side + float(above[i]) * side + float(above[i + cc]) * side;
      o[i] = ss <= 0.0f ? 0 : ss >= 255.0f ? 255 : uint8_t(int(ss + 0.5f));
    }
  }
  return out;
}

}  // namespace

Image apply_lut(const Image& image, const Lut& lut) {
  check_image(image, "apply_lut");
  return apply_luts(image, std::vector<Lut>(size_t(image.channels), lut));
}

Image invert(const Image& image) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[size_t(i)] = uint8_t(255 - i);
  return apply_lut(image, lut);
}

Image posterize(const Image& image, int bits) {
  LSF_CHECK(bits >= 0) << "posterize: bits must be ≥ 0, got " << bits;
  if (bits >= 8) return image;
  const int mask = ~((1 << (8 - bits)) - 1);
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[size_t(i)] = uint8_t(i & mask);
  return apply_lut(image, lut);
}

Image solarize(const Image& image, int threshold) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[size_t(i)] = uint8_t(i < threshold ? i : 255 - i);
  return apply_lut(image, lut);
}

Image solarize_add(const Image& image, int add, int threshold) {
  Lut lut;
  for (int i = 0; i < 256; ++i) {
    const int v = i < threshold ? i + add : i;
    lut[size_t(i)] = uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
  }
  return apply_lut(image, lut);
}

Image auto_contrast(const Image& image) {
  check_image(image, "auto_contrast");
  std::vector<Lut> luts;
  for (int64_t c = 0; c < image.channels; ++c) {
    const auto h = channel_histogram(image, c);
    int lo = 0, hi = 255;
    while (lo < 256 && h[size_t(lo)] == 0) ++lo;
    while (hi >= 0 && h[size_t(hi)] == 0) --hi;
    if (hi <= lo) {
      luts.push_back(identity_lut());
      continue;
    }
    const double scale = 255.0 / double(hi - lo);
    const double offset = -double(lo) * scale;
    Lut lut;
    for (int i = 0; i < 256; ++i) {
      const int v = int(double(i) * scale + offset);  // Python's int(): toward zero
      lut[size_t(i)] = uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    luts.push_back(lut);
  }
  return apply_luts(image, luts);
}

Image equalize(const Image& image) {
  check_image(image, "equalize");
  std::vector<Lut> luts;
  for (int64_t c = 0; c < image.channels; ++c) {
    const auto h = channel_histogram(image, c);
    int64_t total = 0, last = 0, present = 0;
    for (int i = 0; i < 256; ++i)
      if (h[size_t(i)] != 0) {
        total += h[size_t(i)];
        last = h[size_t(i)];
        ++present;
      }
    const int64_t step = present <= 1 ? 0 : (total - last) / 255;
    if (step == 0) {
      luts.push_back(identity_lut());
      continue;
    }
    Lut lut;
    int64_t n = step / 2;
    for (int i = 0; i < 256; ++i) {
      const int64_t v = n / step;
      lut[size_t(i)] = uint8_t(v > 255 ? 255 : v);
      n += h[size_t(i)];
    }
    luts.push_back(lut);
  }
  return apply_luts(image, luts);
}

Image blend(const Image& a, const Image& b, float alpha) {
  check_image(a, "blend");
  LSF_CHECK(a.height == b.height && a.width == b.width && a.channels == b.channels &&
            a.pixels.size() == b.pixels.size())
      << "blend: images " << a.height << "×" << a.width << "×" << a.channels << " and " << b.height << "×"
      << b.width << "×" << b.channels << " differ in shape";
  if (alpha == 0.0f) return a;
  if (alpha == 1.0f) return b;
  Image out(a.height, a.width, a.channels);
  const bool interpolate = alpha >= 0.0f && alpha <= 1.0f;
  for (size_t i = 0; i < a.pixels.size(); ++i) {
    const float v = float(int(a.pixels[i])) + alpha * float(int(b.pixels[i]) - int(a.pixels[i]));
    out.pixels[i] = interpolate ? uint8_t(v) : v <= 0.0f ? 0 : v >= 255.0f ? 255 : uint8_t(v);
  }
  return out;
}

Image to_gray(const Image& image) {
  check_image(image, "to_gray");
  return image.channels == 1 ? image : convert_channels(image, 1);
}

Image adjust_brightness(const Image& image, float factor) {
  check_image(image, "adjust_brightness");
  return blend(Image(image.height, image.width, image.channels, 0), image, factor);
}

Image adjust_color(const Image& image, float factor) {
  check_image(image, "adjust_color");
  return blend(convert_channels(to_gray(image), image.channels), image, factor);
}

Image adjust_contrast(const Image& image, float factor) {
  const Image gray = to_gray(image);
  int64_t sum = 0;
  for (uint8_t v : gray.pixels) sum += v;
  const double mean = gray.pixels.empty() ? 0.0 : double(sum) / double(gray.pixels.size());
  const int level = int(mean + 0.5);
  return blend(Image(image.height, image.width, image.channels, uint8_t(level)), image, factor);
}

Image adjust_sharpness(const Image& image, float factor) {
  check_image(image, "adjust_sharpness");
  return blend(smooth(image), image, factor);
}

}  // namespace lsf::data
