// The Pillow-exact image ops (data/image_ops.h, data/image_enhance.h) against Pillow 9.4 itself:
// tests/fixtures/gen_image_ops.py runs every op on two small deterministic images (RGB and
// gray) and records the outputs; ours must match every byte — resize (bicubic / bilinear,
// up and down), affine and rotate (three filters, fills, the transposition shortcuts), the
// ImageOps tables and the ImageEnhance blends. Plus hand-computed cases for a few ops.
#include "lsformer/data/image_decode.h"
#include "lsformer/data/image_enhance.h"
#include "lsformer/data/image_ops.h"
#include "lsformer/data/rand_augment.h"
#include "helpers.h"

using namespace lsf;
using namespace lsf::data;

namespace {

Image image_from(const nlohmann::json& j) {
  const auto shape = j.at("shape").get<std::vector<int64_t>>();
  Image image(shape[0], shape[1], shape[2]);
  const auto px = j.at("pixels").get<std::vector<int>>();
  REQUIRE(px.size() == image.pixels.size());
  for (size_t i = 0; i < px.size(); ++i) image.pixels[i] = uint8_t(px[i]);
  return image;
}

FillColor fill_for(const Image& image) {
  return image.channels == 3 ? FillColor{124, 116, 104} : FillColor{124, 124, 124};
}

Image run_case(const nlohmann::json& c, const Image& in) {
  const std::string op = c.at("op");
  const auto& a = c.at("args");
  if (op == "resize")
    return resize(in, a.at("height"), a.at("width"), interpolation_from_name(a.at("interpolation")));
  if (op == "rotate")
    return rotate(in, a.at("degrees"), interpolation_from_name(a.at("interpolation")), fill_for(in));
  if (op == "affine") {
    const auto k = a.at("coefficients").get<std::vector<double>>();
    return affine(in, {k[0], k[1], k[2], k[3], k[4], k[5]}, interpolation_from_name(a.at("interpolation")),
                  fill_for(in));
  }
  if (op == "invert") return invert(in);
  if (op == "equalize") return equalize(in);
  if (op == "auto_contrast") return auto_contrast(in);
  if (op == "posterize") return posterize(in, a.at("bits"));
  if (op == "solarize") return solarize(in, a.at("threshold"));
  if (op == "color") return adjust_color(in, float(a.at("factor").get<double>()));
  if (op == "contrast") return adjust_contrast(in, float(a.at("factor").get<double>()));
  if (op == "brightness") return adjust_brightness(in, float(a.at("factor").get<double>()));
  if (op == "sharpness") return adjust_sharpness(in, float(a.at("factor").get<double>()));
  if (op == "to_gray") return to_gray(in);
  if (op == "crop_resize") {
    const Image cropped = crop(in, a.at("top"), a.at("left"), a.at("height"), a.at("width"));
    return resize(cropped, a.at("size"), a.at("size"), Interpolation::Bicubic);
  }
  FAIL("unknown op " << op);
  return in;
}

}  // namespace

TEST_CASE("image ops match Pillow byte for byte", "[data][image]") {
  const auto& fixture = test::cached_fixture("image_ops");
  std::map<std::string, Image> inputs;
  for (const auto& [name, j] : fixture.at("inputs").items()) inputs[name] = image_from(j);
  int checked = 0;
  for (const auto& c : fixture.at("cases")) {
    const Image expected = image_from(c);
    const Image got = run_case(c, inputs.at(c.at("input").get<std::string>()));
    INFO(c.at("op").get<std::string>() << " on " << c.at("input").get<std::string>() << " " << c.at("args").dump());
    REQUIRE(got.height == expected.height);
    REQUIRE(got.width == expected.width);
    REQUIRE(got.channels == expected.channels);
    int bad = 0;
    std::ostringstream where;
    for (size_t i = 0; i < got.pixels.size(); ++i)
      if (got.pixels[i] != expected.pixels[i] && bad++ < 5)
        where << " [" << i << "] " << int(got.pixels[i]) << " vs " << int(expected.pixels[i]);
    INFO("mismatches: " << bad << where.str());
    CHECK(bad == 0);
    ++checked;
  }
  CHECK(checked == 118);
}

TEST_CASE("image ops: hand-computed cases", "[data][image]") {
  // A 1×4 gray ramp.
  Image ramp(1, 4, 1);
  ramp.pixels = {10, 50, 200, 250};
  // auto_contrast: lo 10, hi 250, s = 255/240: v → int(v·s − 10·s).
  CHECK(auto_contrast(ramp).pixels == std::vector<uint8_t>{0, 42, 201, 255});
  CHECK(invert(ramp).pixels == std::vector<uint8_t>{245, 205, 55, 5});
  CHECK(posterize(ramp, 2).pixels == std::vector<uint8_t>{0, 0, 192, 192});    // keep the top 2 bits
  CHECK(solarize(ramp, 128).pixels == std::vector<uint8_t>{10, 50, 55, 5});    // ≥ 128 inverted
  CHECK(solarize_add(ramp, 100).pixels == std::vector<uint8_t>{110, 150, 200, 250});
  // equalize: 4 distinct values once each: step = (4 − 1) // 255 = 0 → unchanged.
  CHECK(equalize(ramp).pixels == ramp.pixels);
  // brightness 0.5: truncation of 0 + 0.5·v (Pillow's Blend.c): 5, 25, 100, 125.
  CHECK(adjust_brightness(ramp, 0.5f).pixels == std::vector<uint8_t>{5, 25, 100, 125});
  // contrast 0: every pixel the mean int(127.5 + 0.5) = 128.
  CHECK(adjust_contrast(ramp, 0.0f).pixels == std::vector<uint8_t>(4, 128));
  // hflip is exact; a 180° rotation is the reversed row.
  CHECK(hflip(ramp).pixels == std::vector<uint8_t>{250, 200, 50, 10});
  CHECK(rotate(ramp, 180, Interpolation::Bicubic, {0, 0, 0}).pixels == std::vector<uint8_t>{250, 200, 50, 10});
  // Translating by a whole pixel with bilinear sampling moves the row left and fills the end.
  CHECK(affine(ramp, {1, 0, 1, 0, 1, 0}, Interpolation::Bilinear, {7, 7, 7}).pixels ==
        std::vector<uint8_t>{50, 200, 250, 7});
  // Resizing to the same size is the identity (every filter tap but the centre is 0).
  Image rgb(3, 5, 3);
  for (size_t i = 0; i < rgb.pixels.size(); ++i) rgb.pixels[i] = uint8_t(i * 37 % 256);
  CHECK(resize(rgb, 3, 5, Interpolation::Bicubic).pixels == rgb.pixels);
  // The luma of PIL's convert("L"): (19595·R + 38470·G + 7471·B + 2^15) >> 16.
  CHECK(int(luma_601(255, 0, 0)) == 76);
  CHECK(int(luma_601(0, 255, 0)) == 150);
  CHECK(int(luma_601(0, 0, 255)) == 29);
  CHECK(int(luma_601(255, 255, 255)) == 255);
}

TEST_CASE("RandAugment: timm's op arguments at a level", "[data][image]") {
  Image ramp(1, 4, 1);
  ramp.pixels = {10, 50, 200, 250};
  RandAugmentOptions inc = parse_rand_augment("rand-m9-mstd0.5-inc1");
  CHECK(inc.magnitude == 9);
  CHECK(inc.magnitude_std == 0.5);
  CHECK(inc.increasing);
  CHECK(inc.num_ops == 2);
  // PosterizeIncreasing at level 9: keep 4 − int(3.6) = 1 bit.
  CHECK(apply_augment_op(ramp, AugmentOp::Posterize, 9, false, inc).pixels == posterize(ramp, 1).pixels);
  // SolarizeIncreasing at level 9: threshold 256 − int(230.4) = 26.
  CHECK(apply_augment_op(ramp, AugmentOp::Solarize, 9, false, inc).pixels == solarize(ramp, 26).pixels);
  // SolarizeAdd at level 9: add int(99.0) = 99 below 128.
  CHECK(apply_augment_op(ramp, AugmentOp::SolarizeAdd, 9, false, inc).pixels == solarize_add(ramp, 99).pixels);
  // BrightnessIncreasing at level 5: factor 1 ± 0.45.
  CHECK(apply_augment_op(ramp, AugmentOp::Brightness, 5, false, inc).pixels == adjust_brightness(ramp, 1.45f).pixels);
  CHECK(apply_augment_op(ramp, AugmentOp::Brightness, 5, true, inc).pixels == adjust_brightness(ramp, 0.55f).pixels);
  // The original (non-increasing) set: Brightness level 5 → 5/10·1.8 + 0.1 = 1.0: unchanged.
  RandAugmentOptions plain = parse_rand_augment("rand-m5");
  CHECK_FALSE(plain.increasing);
  CHECK(apply_augment_op(ramp, AugmentOp::Brightness, 5, false, plain).pixels == ramp.pixels);
  CHECK(apply_augment_op(ramp, AugmentOp::Posterize, 5, false, plain).pixels == posterize(ramp, 2).pixels);
  // TranslateXRel at level 10 on a 4-wide image: 0.45·4 = 1.8 pixels.
  CHECK(apply_augment_op(ramp, AugmentOp::TranslateXRel, 10, false, inc).pixels ==
        affine(ramp, {1, 0, 1.8, 0, 1, 0}, Interpolation::Bicubic, inc.fill).pixels);
  // mstd > 100 means uniform sampling; unknown sections and weights are errors naming them.
  CHECK(std::isinf(parse_rand_augment("rand-m9-mstd101").magnitude_std));
  CHECK_THROWS_WITH(parse_rand_augment("rand-m9-x3"), Catch::Contains("unknown section 'x3'"));
  CHECK_THROWS_WITH(parse_rand_augment("rand-m9-w0"), Catch::Contains("weighted"));
  CHECK_THROWS_WITH(parse_rand_augment("augmix-m9"), Catch::Contains("must start with \"rand\""));
}
