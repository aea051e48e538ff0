// timm's RandAugment on 8-bit images (data/rand_augment.h).
#include "lsformer/data/rand_augment.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lsformer/data/image_enhance.h"
#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {

constexpr double kLevelDenominator = 10.0;  // timm's _LEVEL_DENOM

bool is_signed(AugmentOp op) {
  switch (op) {
    case AugmentOp::Rotate:
    case AugmentOp::ShearX:
    case AugmentOp::ShearY:
    case AugmentOp::TranslateXRel:
    case AugmentOp::TranslateYRel:
      return true;
    case AugmentOp::Color:
    case AugmentOp::Contrast:
    case AugmentOp::Brightness:
    case AugmentOp::Sharpness:
      return true;  // only in their "increasing" form; checked where the sign is drawn
    default:
      return false;
  }
}

bool is_enhance(AugmentOp op) {
  return op == AugmentOp::Color || op == AugmentOp::Contrast || op == AugmentOp::Brightness ||
         op == AugmentOp::Sharpness;
}

bool draws_sign(AugmentOp op, bool increasing) { return is_signed(op) && (!is_enhance(op) || increasing); }

double parse_number(const std::string& text, const std::string& section, const std::string& config) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LSF_CHECK(used == text.size() && !text.empty())
      << "parse_rand_augment: section '" << section << "' of \"" << config << "\" has no valid number";
  return v;
}

}  // namespace

const char* augment_op_name(AugmentOp op) {
  static const char* names[kNumAugmentOps] = {"AutoContrast", "Equalize", "Invert",  "Rotate",    "Posterize",
                                              "Solarize",     "SolarizeAdd", "Color", "Contrast", "Brightness",
                                              "Sharpness",    "ShearX",   "ShearY",  "TranslateXRel", "TranslateYRel"};
  return names[int(op)];
}

RandAugmentOptions parse_rand_augment(const std::string& config, RandAugmentOptions base) {
  RandAugmentOptions options = base;
  std::vector<std::string> sections;
  size_t start = 0;
  while (true) {
    const size_t dash = config.find('-', start);
    sections.push_back(config.substr(start, dash == std::string::npos ? std::string::npos : dash - start));
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  LSF_CHECK(sections[0] == "rand")
      << "parse_rand_augment: \"" << config << "\" must start with \"rand\" (e.g. \"rand-m9-mstd0.5-inc1\")";
  for (size_t i = 1; i < sections.size(); ++i) {
    const std::string& s = sections[i];
    const size_t digit = s.find_first_of("0123456789");
    LSF_CHECK(digit != std::string::npos && digit > 0)
        << "parse_rand_augment: section '" << s << "' of \"" << config << "\" is not <key><number>";
    const std::string key = s.substr(0, digit), value = s.substr(digit);
    const double v = parse_number(value, s, config);
    if (key == "m") {
      options.magnitude = v;
    } else if (key == "n") {
      LSF_CHECK(v >= 0 && v == std::floor(v))
          << "parse_rand_augment: n must be a whole number ≥ 0 in \"" << config << "\"";
      options.num_ops = int(v);
    } else if (key == "mstd") {
      options.magnitude_std = v > 100 ? std::numeric_limits<double>::infinity() : v;
    } else if (key == "mmax") {
      options.magnitude_max = v;
    } else if (key == "inc") {
      options.increasing = v != 0;
    } else if (key == "w") {
      LSF_FAIL() << "parse_rand_augment: weighted op choice (section '" << s << "' of \"" << config
                 << "\") is not supported";
    } else {
      LSF_FAIL() << "parse_rand_augment: unknown section '" << s << "' in \"" << config
                 << "\" (known: m, n, mstd, mmax, inc)";
    }
  }
  LSF_CHECK(options.magnitude_std >= 0) << "parse_rand_augment: mstd must be ≥ 0 in \"" << config << "\"";
  return options;
}

Image apply_augment_op(const Image& image, AugmentOp op, double level, bool negate,
                       const RandAugmentOptions& options) {
  const bool inc = options.increasing;
  const double sign = negate ? -1.0 : 1.0;
  auto enhance_factor = [&]() {  // Python double; Pillow's blend takes a C float
    if (!inc) return (level / kLevelDenominator) * 1.8 + 0.1;
    return std::max(0.1, 1.0 + sign * ((level / kLevelDenominator) * 0.9));
  };
  switch (op) {
    case AugmentOp::AutoContrast: return auto_contrast(image);
    case AugmentOp::Equalize: return equalize(image);
    case AugmentOp::Invert: return invert(image);
    case AugmentOp::Rotate:
      return rotate(image, sign * ((level / kLevelDenominator) * 30.0), options.interpolation, options.fill);
    case AugmentOp::Posterize: {
      const int bits = int((level / kLevelDenominator) * 4);
      return posterize(image, inc ? 4 - bits : bits);
    }
    case AugmentOp::Solarize: {
      const int threshold = int((level / kLevelDenominator) * 256);
      return solarize(image, inc ? 256 - threshold : threshold);
    }
    case AugmentOp::SolarizeAdd: return solarize_add(image, int((level / kLevelDenominator) * 110), 128);
    case AugmentOp::Color: return adjust_color(image, float(enhance_factor()));
    case AugmentOp::Contrast: return adjust_contrast(image, float(enhance_factor()));
    case AugmentOp::Brightness: return adjust_brightness(image, float(enhance_factor()));
    case AugmentOp::Sharpness: return adjust_sharpness(image, float(enhance_factor()));
    case AugmentOp::ShearX: {
      const double s = sign * ((level / kLevelDenominator) * 0.3);
      return affine(image, {1, s, 0, 0, 1, 0}, options.interpolation, options.fill);
    }
    case AugmentOp::ShearY: {
      const double s = sign * ((level / kLevelDenominator) * 0.3);
      return affine(image, {1, 0, 0, s, 1, 0}, options.interpolation, options.fill);
    }
    case AugmentOp::TranslateXRel: {
      const double pixels = sign * ((level / kLevelDenominator) * options.translate_pct) * double(image.width);
      return affine(image, {1, 0, pixels, 0, 1, 0}, options.interpolation, options.fill);
    }
    case AugmentOp::TranslateYRel: {
      const double pixels = sign * ((level / kLevelDenominator) * options.translate_pct) * double(image.height);
      return affine(image, {1, 0, 0, 0, 1, pixels}, options.interpolation, options.fill);
    }
  }
  LSF_FAIL() << "apply_augment_op: unknown op " << int(op);
}

Image rand_augment(const Image& image, const RandAugmentOptions& options, SampleRandom& random) {
  std::vector<AugmentOp> chosen;
  for (int i = 0; i < options.num_ops; ++i) chosen.push_back(AugmentOp(random.randint(0, kNumAugmentOps - 1)));
  Image out = image;
  for (AugmentOp op : chosen) {
    if (options.op_prob < 1.0 && random.uniform() > options.op_prob) continue;
    double magnitude = options.magnitude;
    if (std::isinf(options.magnitude_std)) {
      magnitude = random.uniform(0, magnitude);
    } else if (options.magnitude_std > 0) {
      magnitude = random.normal(magnitude, options.magnitude_std);
    }
    magnitude = std::max(0.0, std::min(magnitude, options.magnitude_max));
    const bool negate = draws_sign(op, options.increasing) && random.uniform() > 0.5;
    out = apply_augment_op(out, op, magnitude, negate, options);
  }
  return out;
}

}  // namespace lsf::data
