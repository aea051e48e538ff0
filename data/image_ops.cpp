// Pillow-exact crop, resize, flip, affine transform and rotation (data/image_ops.h).
#include "lsformer/data/image_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {

// ---- resize (Resample.c) ---------------------------------------------------------------------

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS for 8-bit images

double bilinear_weight(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubic_weight(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// One pass's taps: output i reads input [first[i], first[i] + count[i]) with the fixed-point
// weights weights[i·ksize + t].
struct Taps {
  int64_t ksize = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> weights;
};

Taps precompute_taps(int64_t in_size, int64_t out_size, Interpolation interpolation) {
  const double support0 = interpolation == Interpolation::Bicubic ? 2.0 : 1.0;
  double (*filter)(double) = interpolation == Interpolation::Bicubic ? bicubic_weight : bilinear_weight;
  const double scale = double(in_size) / double(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = support0 * filterscale;
  Taps taps;
  taps.ksize = int64_t(std::ceil(support)) * 2 + 1;
  taps.first.resize(size_t(out_size));
  taps.count.resize(size_t(out_size));
  taps.weights.assign(size_t(out_size * taps.ksize), 0);
  std::vector<double> k(size_t(taps.ksize));
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (double(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int64_t xmin = int64_t(center - support + 0.5);  // C's truncating cast, as Pillow
    if (xmin < 0) xmin = 0;
    int64_t xmax = int64_t(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int64_t x = 0; x < xmax; ++x) {
      const double w = filter((double(x + xmin) - center + 0.5) * ss);
      k[size_t(x)] = w;
      ww += w;
    }
    for (int64_t x = 0; x < xmax; ++x) {
      const double w = ww != 0.0 ? k[size_t(x)] / ww : k[size_t(x)];
      const double fixed = w * double(1 << kPrecisionBits);
      taps.weights[size_t(xx * taps.ksize + x)] = int32_t(w < 0 ? -0.5 + fixed : 0.5 + fixed);
    }
    taps.first[size_t(xx)] = xmin;
    taps.count[size_t(xx)] = xmax;
  }
  return taps;
}

inline uint8_t clip8_fixed(int32_t sum) {
  const int32_t v = sum >> kPrecisionBits;  // arithmetic shift: floor, as Pillow's table
  return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
}

Image resize_horizontal(const Image& in, int64_t out_width, Interpolation interpolation) {
  const Taps taps = precompute_taps(in.width, out_width, interpolation);
  const int64_t cc = in.channels;
  Image out(in.height, out_width, cc);
  // Sums fit int32 as in Pillow: |Σ weights| ≤ ~1.3·2^22 and values ≤ 255.
  for (int64_t y = 0; y < in.height; ++y) {
    const uint8_t* row = in.pixels.data() + y * in.width * cc;
    uint8_t* o = out.pixels.data() + y * out_width * cc;
    for (int64_t xx = 0; xx < out_width; ++xx) {
      const int32_t* k = taps.weights.data() + xx * taps.ksize;
      const uint8_t* src = row + taps.first[size_t(xx)] * cc;
      const int64_t count = taps.count[size_t(xx)];
      if (cc == 3) {
        int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
        for (int64_t t = 0; t < count; ++t) {
          s0 += int32_t(src[3 * t]) * k[t];
          s1 += int32_t(src[3 * t + 1]) * k[t];
          s2 += int32_t(src[3 * t + 2]) * k[t];
        }
        o[3 * xx] = clip8_fixed(s0);
        o[3 * xx + 1] = clip8_fixed(s1);
        o[3 * xx + 2] = clip8_fixed(s2);
      } else {
        int32_t s0 = 1 << (kPrecisionBits - 1);
        for (int64_t t = 0; t < count; ++t) s0 += int32_t(src[t]) * k[t];
        o[xx] = clip8_fixed(s0);
      }
    }
  }
  return out;
}

Image resize_vertical(const Image& in, int64_t out_height, Interpolation interpolation) {
  const Taps taps = precompute_taps(in.height, out_height, interpolation);
  const int64_t row_len = in.width * in.channels;
  Image out(out_height, in.width, in.channels);
  std::vector<int32_t> sums(static_cast<size_t>(row_len));
  for (int64_t yy = 0; yy < out_height; ++yy) {
    const int32_t* k = taps.weights.data() + yy * taps.ksize;
    std::fill(sums.begin(), sums.end(), int32_t(1) << (kPrecisionBits - 1));
    for (int64_t t = 0; t < taps.count[size_t(yy)]; ++t) {
      const uint8_t* row = in.pixels.data() + (taps.first[size_t(yy)] + t) * row_len;
      const int32_t w = k[t];
      int32_t* sum = sums.data();
      for (int64_t i = 0; i < row_len; ++i) sum[i] += int32_t(row[i]) * w;
    }
    uint8_t* o = out.pixels.data() + yy * row_len;
    for (int64_t i = 0; i < row_len; ++i) o[i] = clip8_fixed(sums[size_t(i)]);
  }
  return out;
}

// ---- affine (Geometry.c) ---------------------------------------------------------------------

inline int64_t pil_floor(double v) { return v < 0.0 ? int64_t(std::floor(v)) : int64_t(v); }
inline int64_t clip_index(int64_t v, int64_t size) { return v < 0 ? 0 : v < size ? v : size - 1; }

// Pillow's BICUBIC macro for the transform filters (a = −1).
inline double cubic_row(double v1, double v2, double v3, double v4, double d) {
  const double p1 = v2;
  const double p2 = -v1 + v3;
  const double p3 = 2 * (v1 - v2) + v3 - v4;
  const double p4 = -v1 + v2 - v3 + v4;
  return p1 + d * (p2 + d * (p3 + d * p4));
}

// Samples every channel of `in` at (xin, yin) into out; false when the point is outside the
// image. Pillow clamps the first tap row and, for later rows beyond the border, repeats the
// previous row's value — the same as clamping every tap's row (and column) index, as done here.
bool sample(const Image& in, double xin, double yin, Interpolation interpolation, uint8_t* out) {
  const int64_t w = in.width, h = in.height, cc = in.channels;
  const uint8_t* pixels = in.pixels.data();
  if (interpolation == Interpolation::Nearest) {
    const int64_t x = xin < 0.0 ? -1 : int64_t(xin);
    const int64_t y = yin < 0.0 ? -1 : int64_t(yin);
    if (x < 0 || x >= w || y < 0 || y >= h) return false;
    for (int64_t c = 0; c < cc; ++c) out[c] = pixels[(y * w + x) * cc + c];
    return true;
  }
  if (xin < 0.0 || xin >= double(w) || yin < 0.0 || yin >= double(h)) return false;
  xin -= 0.5;
  yin -= 0.5;
  const int64_t x = pil_floor(xin), y = pil_floor(yin);
  const double dx = xin - double(x), dy = yin - double(y);
  if (interpolation == Interpolation::Bilinear) {
    const int64_t x0 = clip_index(x, w) * cc, x1 = clip_index(x + 1, w) * cc;
    const uint8_t* r0 = pixels + clip_index(y, h) * w * cc;
    const uint8_t* r1 = pixels + clip_index(y + 1, h) * w * cc;
    for (int64_t c = 0; c < cc; ++c) {
      double v1 = r0[x0 + c] + (double(r0[x1 + c]) - r0[x0 + c]) * dx;
      const double v2 = r1[x0 + c] + (double(r1[x1 + c]) - r1[x0 + c]) * dx;
      v1 = v1 + (v2 - v1) * dy;
      out[c] = uint8_t(v1);
    }
    return true;
  }
  const int64_t xs[4] = {clip_index(x - 1, w) * cc, clip_index(x, w) * cc, clip_index(x + 1, w) * cc,
                         clip_index(x + 2, w) * cc};
  const uint8_t* rows[4];
  for (int64_t j = 0; j < 4; ++j) rows[j] = pixels + clip_index(y - 1 + j, h) * w * cc;
  for (int64_t c = 0; c < cc; ++c) {
    double v[4];
    for (int j = 0; j < 4; ++j) {
      const uint8_t* r = rows[j] + c;
      v[j] = cubic_row(r[xs[0]], r[xs[1]], r[xs[2]], r[xs[3]], dx);
    }
    const double value = cubic_row(v[0], v[1], v[2], v[3], dy);
    out[c] = value <= 0.0 ? 0 : value >= 255.0 ? 255 : uint8_t(value);
  }
  return true;
}

// Exact 180° rotation and, for square images, 90° / 270° (Pillow's transpose shortcuts).
Image transpose_rotation(const Image& in, int quarter_turns) {
  const int64_t h = in.height, w = in.width, cc = in.channels;
  Image out(quarter_turns == 2 ? h : w, quarter_turns == 2 ? w : h, cc);
  for (int64_t y = 0; y < out.height; ++y)
    for (int64_t x = 0; x < out.width; ++x) {
      int64_t sy, sx;  // counter-clockwise by 90° · quarter_turns
      if (quarter_turns == 1) {
        sy = x;
        sx = w - 1 - y;
      } else if (quarter_turns == 2) {
        sy = h - 1 - y;
        sx = w - 1 - x;
      } else {
        sy = h - 1 - x;
        sx = y;
      }
      for (int64_t c = 0; c < cc; ++c) out.at(y, x, c) = in.at(sy, sx, c);
    }
  return out;
}

void check_image(const Image& image, const char* who) {
  LSF_CHECK(image.height > 0 && image.width > 0 && (image.channels == 1 || image.channels == 3) &&
            int64_t(image.pixels.size()) == image.height * image.width * image.channels)
      << who << ": bad image " << image.height << "×" << image.width << "×" << image.channels << " with "
      << image.pixels.size() << " bytes";
}

double round15(double v) { return std::round(v * 1e15) / 1e15; }

}  // namespace

Interpolation interpolation_from_name(const std::string& name) {
  if (name == "nearest") return Interpolation::Nearest;
  if (name == "bilinear") return Interpolation::Bilinear;
  if (name == "bicubic") return Interpolation::Bicubic;
  LSF_FAIL() << "interpolation must be \"nearest\", \"bilinear\" or \"bicubic\", got \"" << name << "\"";
}

const char* interpolation_name(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::Nearest: return "nearest";
    case Interpolation::Bilinear: return "bilinear";
    case Interpolation::Bicubic: return "bicubic";
  }
  return "?";
}

Image crop(const Image& image, int64_t top, int64_t left, int64_t height, int64_t width) {
  check_image(image, "crop");
  LSF_CHECK(height > 0 && width > 0 && top >= 0 && left >= 0 && top + height <= image.height &&
            left + width <= image.width)
      << "crop: rows [" << top << ", " << top + height << ") × columns [" << left << ", " << left + width
      << ") do not lie inside the " << image.height << "×" << image.width << " image";
  Image out(height, width, image.channels);
  const size_t row_bytes = size_t(width * image.channels);
  for (int64_t y = 0; y < height; ++y)
    std::memcpy(out.pixels.data() + size_t(y) * row_bytes,
                image.pixels.data() + size_t(((top + y) * image.width + left) * image.channels), row_bytes);
  return out;
}

Image resize(const Image& image, int64_t out_height, int64_t out_width, Interpolation interpolation) {
  check_image(image, "resize");
  LSF_CHECK(out_height > 0 && out_width > 0)
      << "resize: the output size must be positive, got " << out_height << "×" << out_width;
  LSF_CHECK(interpolation != Interpolation::Nearest)
      << "resize: nearest interpolation is not supported (bilinear or bicubic)";
  // Pillow skips a pass whose size does not change (it would be the identity anyway).
  Image horizontal = out_width == image.width ? image : resize_horizontal(image, out_width, interpolation);
  return out_height == image.height ? horizontal : resize_vertical(horizontal, out_height, interpolation);
}

Image hflip(const Image& image) {
  check_image(image, "hflip");
  Image out(image.height, image.width, image.channels);
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x)
      for (int64_t c = 0; c < image.channels; ++c) out.at(y, image.width - 1 - x, c) = image.at(y, x, c);
  return out;
}

Image affine(const Image& image, const std::array<double, 6>& a, Interpolation interpolation,
             const FillColor& fill) {
  check_image(image, "affine");
  Image out(image.height, image.width, image.channels);
  uint8_t* o = out.pixels.data();
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x, o += image.channels) {
      const double xin = double(x) + 0.5, yin = double(y) + 0.5;
      const double sx = a[0] * xin + a[1] * yin + a[2];
      const double sy = a[3] * xin + a[4] * yin + a[5];
      if (!sample(image, sx, sy, interpolation, o))
        for (int64_t c = 0; c < image.channels; ++c) o[c] = fill[size_t(c)];
    }
  return out;
}

Image rotate(const Image& image, double degrees, Interpolation interpolation, const FillColor& fill) {
  check_image(image, "rotate");
  double angle = std::fmod(degrees, 360.0);  // Python's %: the result takes the divisor's sign
  if (angle < 0) angle += 360.0;
  if (angle == 0.0) return image;
  if (angle == 180.0) return transpose_rotation(image, 2);
  if ((angle == 90.0 || angle == 270.0) && image.width == image.height)
    return transpose_rotation(image, angle == 90.0 ? 1 : 3);
  const double cx = double(image.width) / 2.0, cy = double(image.height) / 2.0;
  const double radians = -(angle * (M_PI / 180.0));  // Python's -math.radians(angle)
  std::array<double, 6> m = {round15(std::cos(radians)), round15(std::sin(radians)), 0.0,
                             round15(-std::sin(radians)), round15(std::cos(radians)), 0.0};
  m[2] = m[0] * -cx + m[1] * -cy + m[2] + cx;
  m[5] = m[3] * -cx + m[4] * -cy + m[5] + cy;
  return affine(image, m, interpolation, fill);
}

}  // namespace lsf::data
