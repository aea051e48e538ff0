// The recipe's random transforms: SampleRandom's distributions, random-resized-crop geometry
// (sizes, areas, ratios, fallback), flips, the evaluation resize + centre crop, colour jitter,
// normalisation, random erasing, Mixup / CutMix pairs and soft targets, and determinism of
// every augmentation per (seed, sample index, epoch).
#include <cmath>
#include <set>

#include "lsformer/data/image_decode.h"
#include "lsformer/data/image_enhance.h"
#include "lsformer/data/image_pipeline.h"
#include "helpers.h"

using namespace lsf;
using namespace lsf::data;

namespace {

Image noise_image(int64_t h, int64_t w, int64_t c, uint32_t seed) {
  Image image(h, w, c);
  SampleRandom r(seed, 7, 0, 0);
  for (uint8_t& v : image.pixels) v = uint8_t(r.randint(0, 255));
  return image;
}

// Mean and variance of n draws.
template <typename F>
std::pair<double, double> moments(int n, F draw) {
  double s = 0, s2 = 0;
  for (int i = 0; i < n; ++i) {
    const double v = draw(i);
    s += v;
    s2 += v * v;
  }
  const double mean = s / n;
  return {mean, s2 / n - mean * mean};
}

}  // namespace

TEST_CASE("SampleRandom: a pure function of its key, with the right distributions", "[data][image]") {
  SampleRandom a(5, kAugmentStream, 10, 2), b(5, kAugmentStream, 10, 2), c(5, kAugmentStream, 10, 3);
  std::vector<uint32_t> wa, wb, wc;
  for (int i = 0; i < 9; ++i) {
    wa.push_back(a.next_u32());
    wb.push_back(b.next_u32());
    wc.push_back(c.next_u32());
  }
  CHECK(wa == wb);
  CHECK(wa != wc);
  // 20,000 draws: the standard error of a mean is σ/√n; every check allows 5 standard errors.
  const int n = 20000;
  SampleRandom r(1, kAugmentStream, 0, 0);
  auto [um, uv] = moments(n, [&](int) { return r.uniform(); });
  CHECK(std::fabs(um - 0.5) < 5 * std::sqrt(1.0 / 12 / n));
  CHECK(std::fabs(uv - 1.0 / 12) < 0.01);
  auto [nm, nv] = moments(n, [&](int) { return r.normal(); });
  CHECK(std::fabs(nm) < 5 / std::sqrt(double(n)));
  CHECK(std::fabs(nv - 1) < 5 * std::sqrt(2.0 / n));
  for (double alpha : {0.8, 1.0, 2.5}) {
    INFO("alpha " << alpha);
    auto [gm, gv] = moments(n, [&](int) { return r.gamma(alpha); });
    CHECK(std::fabs(gm - alpha) < 5 * std::sqrt(alpha / n));  // Γ(α, 1): mean α, variance α
    auto [bm, bv] = moments(n, [&](int) { return r.beta(alpha, alpha); });
    const double var = 1.0 / (4 * (2 * alpha + 1));  // Beta(α, α): mean ½, variance 1/(4(2α+1))
    CHECK(std::fabs(bm - 0.5) < 5 * std::sqrt(var / n));
    CHECK(std::fabs(bv - var) < 0.1 * var);
  }
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 4000; ++i) ++counts[size_t(r.randint(3, 6) - 3)];
  for (int k : counts) CHECK(std::abs(k - 1000) < 5 * std::sqrt(1000 * 0.75));  // binomial(4000, ¼)
  CHECK_THROWS_WITH(SampleRandom(0, 0, -1, 0), Catch::Contains("index -1"));
}

TEST_CASE("random-resized-crop: sizes, areas and ratios in range, the fallback", "[data][image]") {
  const RandomResizedCropOptions opts;  // scale (0.08, 1), ratio (3/4, 4/3)
  for (auto [h, w] : {std::pair<int64_t, int64_t>{40, 60}, {97, 31}, {224, 224}}) {
    std::set<std::pair<int64_t, int64_t>> sizes;
    for (int64_t i = 0; i < 400; ++i) {
      SampleRandom r(3, kAugmentStream, i, 0);
      const CropBox box = random_resized_crop_box(h, w, opts, r);
      INFO(h << "×" << w << " sample " << i << ": " << box.top << "," << box.left << " " << box.height << "×" << box.width);
      REQUIRE(box.height > 0);
      REQUIRE(box.width > 0);
      REQUIRE(box.top >= 0);
      REQUIRE(box.left >= 0);
      REQUIRE(box.top + box.height <= h);
      REQUIRE(box.left + box.width <= w);
      const bool fallback = box.height == h || box.width == w;
      if (!fallback) {
        // w = round(√(A·r)), h = round(√(A/r)) with A ∈ [0.08, 1]·H·W, r ∈ [¾, 4/3]: each side is
        // within ½ of its real value, which is at least s = √(0.08·H·W·¾); so the area is at
        // least 0.08·H·W·(1 − ½/s)² and the ratio within [¾·q, 4/3 / q], q = (1 − ½/s)/(1 + ½/s).
        const double s = std::sqrt(0.08 * double(h * w) * 0.75);
        const double q = (1 - 0.5 / s) / (1 + 0.5 / s);
        CHECK(double(box.height * box.width) >= 0.08 * double(h * w) * (1 - 0.5 / s) * (1 - 0.5 / s));
        const double ratio = double(box.width) / double(box.height);
        CHECK(ratio >= 0.75 * q);
        CHECK(ratio <= 4.0 / 3.0 / q);
      }
      sizes.insert({box.height, box.width});
    }
    CHECK(sizes.size() > 50);  // the crops really vary
  }
  // A 10×100 strip: no crop of ratio ≤ 4/3 with ≥ 90% of the area fits, so every attempt fails
  // and the fallback takes h = 10, w = round(10 · 4/3) = 13, centred: left = (100 − 13) // 2.
  SampleRandom r(0, kAugmentStream, 0, 0);
  const CropBox strip = random_resized_crop_box(10, 100, {.scale_min = 0.9, .scale_max = 1.0}, r);
  CHECK(strip.top == 0);
  CHECK(strip.height == 10);
  CHECK(strip.width == 13);
  CHECK(strip.left == 43);
  // A tall strip the other way: w = 10, h = round(10 / (3/4)) = 13, top = (100 − 13) // 2.
  const CropBox tall = random_resized_crop_box(100, 10, {.scale_min = 0.9, .scale_max = 1.0}, r);
  CHECK(tall.width == 10);
  CHECK(tall.height == 13);
  CHECK(tall.top == 43);
  // The crop is resized to size × size.
  const Image out = random_resized_crop(noise_image(30, 40, 3, 1), 16, opts, Interpolation::Bicubic, r);
  CHECK(out.height == 16);
  CHECK(out.width == 16);
  CHECK(python_round(2.5) == 2);  // Python's round: half to even
  CHECK(python_round(3.5) == 4);
}

TEST_CASE("evaluation resize + centre crop, flips, normalisation", "[data][image]") {
  // Shorter side to ⌊16 / 0.875⌋ = 18: 30×40 → 18×24 (int(18·40/30) = 24), crop 16 at
  // (round(1.0), round(4.0)) = (1, 4).
  const Image image = noise_image(30, 40, 3, 2);
  ImagePipelineOptions eval;
  eval.train = false;
  eval.image_size = 16;
  const ImagePipeline pipeline(eval, 10);
  const Image resized = resize(image, 18, 24, Interpolation::Bicubic);
  CHECK(resize_shorter(image, 18, Interpolation::Bicubic).pixels == resized.pixels);
  const Image expected = crop(resized, 1, 4, 16, 16);
  CHECK(pipeline.augment(image, 0, 0, 0).pixels == expected.pixels);
  CHECK(pipeline.augment(image, 5, 9, 123).pixels == expected.pixels);  // no randomness
  // Centring with Python's round: (5 − 2) / 2 = 1.5 → 2 on both axes.
  Image five(5, 5, 1);
  for (int i = 0; i < 25; ++i) five.pixels[size_t(i)] = uint8_t(i);
  CHECK(center_crop(five, 2).pixels == std::vector<uint8_t>{12, 13, 17, 18});
  CHECK(center_crop(five, 3).pixels == std::vector<uint8_t>{6, 7, 8, 11, 12, 13, 16, 17, 18});
  CHECK_THROWS_WITH(center_crop(five, 6), Catch::Contains("does not fit"));
  // A horizontal flip is exact and its own inverse.
  const Image flipped = hflip(image);
  for (int64_t x = 0; x < 40; ++x) CHECK(flipped.at(7, x, 1) == image.at(7, 39 - x, 1));
  CHECK(hflip(flipped).pixels == image.pixels);
  // (v / 255 − mean) / std in float32, written [C, H, W].
  Image px(1, 2, 3);
  px.pixels = {0, 128, 255, 10, 20, 30};
  std::vector<float> out(6);
  normalize_to_chw(px, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, out.data());
  CHECK(out[0] == (0.0f / 255.0f - 0.485f) / 0.229f);
  CHECK(out[1] == (10.0f / 255.0f - 0.485f) / 0.229f);
  CHECK(out[2] == (128.0f / 255.0f - 0.456f) / 0.224f);
  CHECK(out[5] == (30.0f / 255.0f - 0.406f) / 0.225f);
}

TEST_CASE("training augmentation is a pure function of (seed, index, epoch)", "[data][image]") {
  const Image image = noise_image(48, 40, 3, 3);
  const ImagePipeline pipeline(ImagePipelineOptions{.image_size = 24}, 10);
  const Image a = pipeline.augment(image, 17, 2, 99);
  CHECK(a.height == 24);
  CHECK(a.width == 24);
  CHECK(a.channels == 3);
  CHECK(pipeline.augment(image, 17, 2, 99).pixels == a.pixels);
  CHECK(pipeline.augment(image, 17, 3, 99).pixels != a.pixels);
  CHECK(pipeline.augment(image, 18, 2, 99).pixels != a.pixels);
  CHECK(pipeline.augment(image, 17, 2, 98).pixels != a.pixels);
  // RandAugment alone: same key, same result; different keys give different images.
  const RandAugmentOptions ra = parse_rand_augment("rand-m9-mstd0.5-inc1");
  std::set<std::string> outcomes;  // the outputs' bytes
  for (int64_t i = 0; i < 60; ++i) {
    SampleRandom r1(4, kAugmentStream, i, 0), r2(4, kAugmentStream, i, 0);
    const Image x = rand_augment(image, ra, r1);
    CHECK(rand_augment(image, ra, r2).pixels == x.pixels);
    outcomes.insert(std::string(x.pixels.begin(), x.pixels.end()));
  }
  CHECK(outcomes.size() > 30);  // ¼ of draws apply no op at all (0.5² per image), the rest vary
}

TEST_CASE("colour jitter: factors within range, off when zero, timm turns it off under RandAugment", "[data][image]") {
  Image flat(4, 4, 3, 100);
  for (int64_t i = 0; i < 50; ++i) {
    SampleRandom r(8, kAugmentStream, i, 0);
    const Image out = color_jitter(flat, {.brightness = 0.4, .contrast = 0, .saturation = 0}, r);
    // Brightness f ∈ [0.6, 1.4] on a flat 100: truncation of 100·f ∈ [60, 140].
    const uint8_t v = out.pixels[0];
    CHECK(v >= 60);
    CHECK(v <= 140);
    CHECK(out.pixels == std::vector<uint8_t>(48, v));
  }
  SampleRandom r(8, kAugmentStream, 0, 0);
  const Image image = noise_image(7, 7, 3, 5);
  CHECK(color_jitter(image, {.brightness = 0, .contrast = 0, .saturation = 0}, r).pixels == image.pixels);
  // With RandAugment on, the pipeline skips the jitter (timm), unless forced.
  ImagePipelineOptions o{.image_size = 7, .random_resized_crop = false, .hflip = 0, .rand_augment = "rand-m9-n0"};
  const Image plain = ImagePipeline(o, 10).augment(image, 3, 0, 1);
  CHECK(plain.pixels == image.pixels);  // n0: no RandAugment op, and no jitter
  o.force_color_jitter = true;
  CHECK(ImagePipeline(o, 10).augment(image, 3, 0, 1).pixels != image.pixels);
  o.rand_augment = "";
  o.force_color_jitter = false;
  CHECK(ImagePipeline(o, 10).augment(image, 3, 0, 1).pixels != image.pixels);
}

TEST_CASE("random erasing: one rectangle of N(0, 1) values with area and aspect in range", "[data][image]") {
  const int64_t c = 3, h = 20, w = 30;
  int erased_count = 0;
  for (int64_t i = 0; i < 200; ++i) {
    std::vector<float> x(size_t(c * h * w), 7.0f);
    SampleRandom r(2, kEraseStream, i, 0);
    const bool erased = random_erasing(x.data(), c, h, w, {.probability = 0.5}, r);
    int64_t top = h, bottom = -1, left = w, right = -1, changed = 0;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t xx = 0; xx < w; ++xx)
        if (x[size_t(y * w + xx)] != 7.0f) {
          top = std::min(top, y), bottom = std::max(bottom, y), left = std::min(left, xx), right = std::max(right, xx);
          ++changed;
        }
    if (!erased) {
      CHECK(changed == 0);
      continue;
    }
    ++erased_count;
    const int64_t eh = bottom - top + 1, ew = right - left + 1;
    CHECK(changed == eh * ew);  // a full rectangle (an N(0,1) draw is never exactly 7)
    // Same box in every channel.
    for (int64_t ch = 1; ch < c; ++ch) CHECK(x[size_t((ch * h + top) * w + left)] != 7.0f);
    // Area in [0.02, 1/3]·H·W up to the rounding of each side (±½).
    CHECK(double(eh * ew) >= (std::sqrt(0.02 * h * w * 0.3) - 0.5) * (std::sqrt(0.02 * h * w / 0.3) - 0.5) - 1e-9);
    CHECK(double(eh * ew) <= (std::sqrt(h * w / 3.0 * 0.3) + 0.5) * (std::sqrt(h * w / 3.0 / 0.3) + 0.5) + 1e-9);
    CHECK(eh < h);
    CHECK(ew < w);
  }
  CHECK(std::abs(erased_count - 100) < 5 * std::sqrt(50.0));  // binomial(200, ½)
  std::vector<float> x(size_t(c * h * w), 7.0f);
  SampleRandom r(2, kEraseStream, 0, 0);
  CHECK_FALSE(random_erasing(x.data(), c, h, w, {.probability = 0}, r));
}

TEST_CASE("Mixup / CutMix: sample i mixes with B − 1 − i, soft targets sum to 1", "[data][image]") {
  const int64_t b = 4, c = 2, h = 6, w = 8, k = 5;
  auto make_batch = [&] {
    Tensor x = empty({b, c, h, w}, kF32);
    float* p = x.data_ptr<float>();
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < c * h * w; ++j) p[i * c * h * w + j] = float(i + 1) * 10.0f + float(j % 3);
    return x;
  };
  const Tensor labels = tensor(std::vector<int64_t>{0, 3, 3, 4});
  const Tensor original = make_batch();
  const std::vector<float> x0 = original.to_vector<float>();
  int mixups = 0, cutmixes = 0;
  for (int64_t batch_index = 0; batch_index < 40; ++batch_index) {
    Tensor x = make_batch();
    SampleRandom r(6, kMixStream, batch_index, 0);
    const MixResult mix = mix_batch(x, MixupOptions{}, r);
    REQUIRE(mix.mixed);  // prob 1.0
    const std::vector<float> got = x.to_vector<float>();
    const double lam = mix.lambda;
    CHECK(lam >= 0.0);
    CHECK(lam <= 1.0);
    for (int64_t i = 0; i < b; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t xx = 0; xx < w; ++xx) {
            const size_t at = size_t(((i * c + ch) * h + y) * w + xx);
            const size_t partner = size_t((((b - 1 - i) * c + ch) * h + y) * w + xx);
            float expected;
            if (mix.cutmix) {
              const bool inside = y >= mix.top && y < mix.bottom && xx >= mix.left && xx < mix.right;
              expected = inside ? x0[partner] : x0[at];
            } else {
              expected = x0[at] * float(lam) + x0[partner] * float(1.0 - lam);
            }
            REQUIRE(got[at] == expected);
          }
    if (mix.cutmix) {
      ++cutmixes;
      const double area = double((mix.bottom - mix.top) * (mix.right - mix.left));
      CHECK(lam == 1.0 - area / double(h * w));  // timm's corrected λ
    } else {
      ++mixups;
    }
    const Tensor targets = mixup_targets(labels, k, lam, 0.1);
    REQUIRE(targets.shape() == Shape{b, k});
    const std::vector<float> t = targets.to_vector<float>();
    const std::vector<int64_t> y = {0, 3, 3, 4};
    for (int64_t i = 0; i < b; ++i) {
      double row = 0;
      for (int64_t j = 0; j < k; ++j) {
        row += t[size_t(i * k + j)];
        const double own = j == y[size_t(i)] ? 0.9 + 0.02 : 0.02;
        const double other = j == y[size_t(b - 1 - i)] ? 0.9 + 0.02 : 0.02;
        CHECK(std::fabs(t[size_t(i * k + j)] - (own * lam + other * (1 - lam))) < 1e-6);  // float32 products
      }
      CHECK(std::fabs(row - 1.0) < 1e-6);  // k float32 terms, each rounded once or twice
    }
  }
  CHECK(mixups > 5);  // switch probability ½ over 40 batches
  CHECK(cutmixes > 5);
  // Deterministic per batch key.
  Tensor p = make_batch(), q = make_batch();
  SampleRandom r1(6, kMixStream, 3, 0), r2(6, kMixStream, 3, 0);
  mix_batch(p, MixupOptions{}, r1);
  mix_batch(q, MixupOptions{}, r2);
  CHECK(p.to_vector<float>() == q.to_vector<float>());
  // λ = 1 (no mixing) gives the smoothed one-hot rows.
  const std::vector<float> smooth = mixup_targets(labels, k, 1.0, 0.1).to_vector<float>();
  CHECK(smooth[0] == float(1.0 - 0.1 + 0.1 / 5) * 1.0f + float(0.1 / 5) * 0.0f);
  CHECK(smooth[1] == float(0.1 / 5));
  Tensor odd = empty({3, 1, 2, 2}, kF32);
  SampleRandom r(0, kMixStream, 0, 0);
  CHECK_THROWS_WITH(mix_batch(odd, MixupOptions{}, r), Catch::Contains("even"));
}
