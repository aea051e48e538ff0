// RandAugment as timm implements it (timm/data/auto_augment.py, rand_augment_transform), on
// 8-bit images, with the Pillow-exact ops of data/image_ops.h and data/image_enhance.h.
//
// Config strings as timm's: "rand" then dash-separated sections m<magnitude>, n<num ops>,
// mstd<std> (> 100 means uniform in [0, m]), mmax<upper bound>, inc<0|1>; e.g. the ViL-LS recipe
// "rand-m9-mstd0.5-inc1" = 2 ops, magnitude 9 with N(0, 0.5²) noise, the "increasing" op set.
// Weighted op choice (w<idx>) is not supported (an error): no recipe here uses it.
//
// Per image: n ops are chosen uniformly with replacement from the 15 ops below; each is applied
// with probability 0.5; an applied op draws its magnitude M ~ N(m, mstd²) (or U(0, m), or m when
// mstd = 0) clipped to [0, mmax], then, for the signed ops, a sign (negated with probability ½).
// Arguments from the level M (L = M / 10), "inc" variants where timm has them:
//   AutoContrast, Equalize, Invert        no argument
//   Rotate          ±30·L degrees (Pillow's rotate, counter-clockwise for +)
//   Posterize       keep 4 − int(4·L) bits        (inc; non-inc keeps int(4·L))
//   Solarize        threshold 256 − int(256·L)     (inc; non-inc int(256·L))
//   SolarizeAdd     add int(110·L) below 128
//   Color, Contrast, Brightness, Sharpness   factor max(0.1, 1 ± 0.9·L) (inc; non-inc 1.8·L + 0.1)
//   ShearX / ShearY   ±0.3·L: affine (1, s, 0, 0, 1, 0) / (1, 0, 0, s, 1, 0)
//   TranslateXRel / TranslateYRel   ±0.45·L of the width / height: affine (1, 0, t, 0, 1, 0) / (…, t)
// Geometric ops resample with `interpolation` (timm fixes it to the pipeline's, bicubic in the
// recipe) and fill uncovered pixels with `fill` (timm: round(255·mean) = (124, 116, 104)).
// Random draws, in timm's order: the n op indices; then per op: apply?, magnitude, sign.
#pragma once

#include <string>
#include <vector>

#include "lsformer/data/image_ops.h"
#include "lsformer/data/sample_random.h"

namespace lsf::data {

enum class AugmentOp {
  AutoContrast, Equalize, Invert, Rotate, Posterize, Solarize, SolarizeAdd, Color, Contrast,
  Brightness, Sharpness, ShearX, ShearY, TranslateXRel, TranslateYRel
};
constexpr int kNumAugmentOps = 15;
const char* augment_op_name(AugmentOp op);

struct RandAugmentOptions {
  int num_ops = 2;                  // n
  double magnitude = 10;            // m (timm's default when the string has no m section)
  double magnitude_std = 0;         // mstd; +inf = uniform in [0, m]
  double magnitude_max = 10;        // mmax
  bool increasing = false;          // inc
  double op_prob = 0.5;             // probability that a chosen op is applied
  double translate_pct = 0.45;      // TranslateRel at level 10
  Interpolation interpolation = Interpolation::Bicubic;
  FillColor fill = {124, 116, 104};
};

// Parses a timm config string (see above) onto `base` (interpolation, fill and the rest kept).
RandAugmentOptions parse_rand_augment(const std::string& config, RandAugmentOptions base = {});

// One op at magnitude `level` (already clipped), negated when `negate` (signed ops only).
Image apply_augment_op(const Image& image, AugmentOp op, double level, bool negate,
                       const RandAugmentOptions& options);

// The whole RandAugment step for one image, drawing from `random`.
Image rand_augment(const Image& image, const RandAugmentOptions& options, SampleRandom& random);

}  // namespace lsf::data
