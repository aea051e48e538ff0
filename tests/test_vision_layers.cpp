// Tests of the vision layers: batch_norm / nn::BatchNorm2d (train and eval, running statistics,
// buffer names), weight standardisation / nn::StdConv2d, drop_path / nn::DropPath (per-sample
// mask, scaling, reproducibility), avg / max / adaptive-average pooling and their modules —
// against PyTorch (tests/fixtures/gen_vision_layers.py, f64), with f64 gradchecks and bad input.
#include <cmath>

#include "helpers.h"
#include "lsformer/models/nn/batch_norm.h"
#include "lsformer/models/nn/drop_path.h"
#include "lsformer/models/nn/pooling.h"
#include "lsformer/models/nn/std_conv2d.h"
#include "lsformer/ops/batch_norm.h"
#include "lsformer/ops/drop_path.h"
#include "lsformer/ops/pool.h"
#include "lsformer/ops/weight_standardization.h"

using namespace lsf;
using testing::gradcheck;

namespace {

const nlohmann::json& fixture() { return test::cached_fixture("vision_layers"); }

// f64 against PyTorch's f64: both sides round every op to 2⁻⁵³; the longest reduction here is a
// batch-norm channel of M = 90 values, so 16·M·u bounds either side's error on O(1) values.
constexpr double kTol = 16 * 90 * 0x1p-53;

Int2 int2_of(const nlohmann::json& v) {
  if (v.is_array()) return {v[0].get<int64_t>(), v[1].get<int64_t>()};
  return Int2(v.get<int64_t>());
}

Pool2dOptions pool_options(const nlohmann::json& o) {
  Pool2dOptions p;
  p.kernel_size = int2_of(o.at("kernel_size"));
  if (o.contains("stride")) p.stride = int2_of(o.at("stride"));
  if (o.contains("padding")) p.padding = int2_of(o.at("padding"));
  p.ceil_mode = o.value("ceil_mode", false);
  p.count_include_pad = o.value("count_include_pad", true);
  return p;
}

Tensor pool(const std::string& kind, const nlohmann::json& o, const Tensor& x) {
  if (kind == "avg") return avg_pool2d(x, pool_options(o));
  if (kind == "max") return max_pool2d(x, pool_options(o));
  return adaptive_avg_pool2d(x, int2_of(o.at("output_size")));
}

}  // namespace

// ---- batch norm --------------------------------------------------------------------------------

TEST_CASE("BatchNorm2d has PyTorch's parameter and buffer names", "[vision_layers]") {
  nn::BatchNorm2d bn(3);
  auto state = bn.state_dict();
  REQUIRE(state.size() == 5);
  CHECK(state[0].first == "weight");
  CHECK(state[1].first == "bias");
  CHECK(state[2].first == "running_mean");
  CHECK(state[3].first == "running_var");
  CHECK(state[4].first == "num_batches_tracked");
  CHECK(bn.num_batches_tracked.dtype() == kI64);
  CHECK(bn.num_batches_tracked.dim() == 0);
  CHECK(bn.running_var.to_vector<float>() == std::vector<float>(3, 1.0f));
  CHECK(bn.named_parameters().size() == 2);
  nn::BatchNorm2d plain(3, {.affine = false, .track_running_stats = false});
  CHECK(plain.state_dict().empty());
}

TEST_CASE("BatchNorm2d matches PyTorch in train and eval mode, running statistics included", "[vision_layers]") {
  const auto& c = fixture()["batch_norm"];
  nn::BatchNorm2d bn(4);
  bn.to(kF64);
  bn.load_state_dict(test::fixture_state(c["state0"]));

  bn.train();
  const auto& t1 = c["train1"];
  Tensor x1 = test::fixture_leaf(t1, "x");
  Tensor y1 = bn.forward(x1);
  test::check_close(y1, test::fixture_tensor(t1["y"]), kTol, kTol);
  y1.backward(test::fixture_tensor(t1["gy"]));
  test::check_close(x1.grad(), test::fixture_tensor(t1["dx"]), kTol, kTol);
  test::check_close(bn.weight.grad(), test::fixture_tensor(t1["dweight"]), kTol, kTol);
  test::check_close(bn.bias.grad(), test::fixture_tensor(t1["dbias"]), kTol, kTol);
  auto after1 = test::fixture_state(t1["state"]);
  test::check_close(bn.running_mean, after1["running_mean"], kTol, kTol);
  test::check_close(bn.running_var, after1["running_var"], kTol, kTol);
  CHECK(bn.num_batches_tracked.item<int64_t>() == after1["num_batches_tracked"].item<int64_t>());
  CHECK(bn.num_batches_tracked.item<int64_t>() == 1);

  const auto& t2 = c["train2"];
  test::check_close(bn.forward(test::fixture_tensor(t2["x"])), test::fixture_tensor(t2["y"]), kTol, kTol);
  auto after2 = test::fixture_state(t2["state"]);
  test::check_close(bn.running_mean, after2["running_mean"], kTol, kTol);
  test::check_close(bn.running_var, after2["running_var"], kTol, kTol);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 2);

  const Tensor mean_before_eval = bn.running_mean.clone(), var_before_eval = bn.running_var.clone();
  bn.eval();
  bn.zero_grad();
  const auto& ev = c["eval"];
  Tensor x3 = test::fixture_leaf(ev, "x");
  Tensor y3 = bn.forward(x3);
  test::check_close(y3, test::fixture_tensor(ev["y"]), kTol, kTol);
  y3.backward(test::fixture_tensor(ev["gy"]));
  test::check_close(x3.grad(), test::fixture_tensor(ev["dx"]), kTol, kTol);
  test::check_close(bn.weight.grad(), test::fixture_tensor(ev["dweight"]), kTol, kTol);
  test::check_close(bn.bias.grad(), test::fixture_tensor(ev["dbias"]), kTol, kTol);
  // Eval leaves the running statistics and the counter alone (bit for bit: compared with their
  // values before the eval call, not with PyTorch's, whose sums round in another order).
  test::check_close(bn.running_mean, mean_before_eval, 0, 0);
  test::check_close(bn.running_var, var_before_eval, 0, 0);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 2);
}

TEST_CASE("batch_norm gradients pass f64 gradcheck in train and eval mode", "[vision_layers]") {
  Tensor x = test::grad_input({3, 2, 3, 2}, 1);
  Tensor w = test::grad_input({2}, 2), b = test::grad_input({2}, 3);
  for (bool training : {true, false}) {
    INFO("training " << training);
    // Fresh running statistics per call (training updates them in place; values irrelevant to eval gradients).
    auto fn = [&](const TensorList& in) {
      Tensor rm = full({2}, 0.3, TensorOptions(kF64)), rv = full({2}, 1.7, TensorOptions(kF64));
      return batch_norm(in[0], rm, rv, in[1], in[2], {.training = training});
    };
    auto r = gradcheck(fn, {x, w, b});
    INFO(r.message);
    CHECK(r.ok);
  }
  // No affine parameters, no running statistics (batch statistics), a 2-D input [N, C].
  auto r2 = gradcheck([](const TensorList& in) { return batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor()); },
                      {test::grad_input({5, 3}, 4)});
  INFO(r2.message);
  CHECK(r2.ok);
}

TEST_CASE("batch_norm in f32 agrees with f64 and normalises each channel", "[vision_layers]") {
  Generator g(7);
  Tensor x = add(mul(randn({4, 3, 8, 8}, TensorOptions(kF64), &g), 3.0), 5.0);
  Tensor y64 = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor());
  Tensor y32 = batch_norm(x.to(kF32), Tensor(), Tensor(), Tensor(), Tensor());
  // f32 input rounding (2⁻²⁴ relative on values ≈ 5 ± 9) amplified by 1/σ ≈ 1/3, plus the output
  // rounding: 64·2⁻²⁴ absolute is ample on outputs of order 1.
  test::check_close(y32, y64.to_vector<double>(), 64 * 0x1p-24, 0);
  Tensor m = mean(y64, {0, 2, 3}), v = var(y64, {0, 2, 3}, /*correction=*/0);
  test::check_close(m, std::vector<double>(3, 0.0), 1e-12, 0);
  test::check_close(v, std::vector<double>(3, 1.0), 1e-4, 0);  // eps 1e-5 against var ≈ 9: 1 − var/(var+eps)
}

TEST_CASE("batch_norm rejects bad input with a clear error", "[vision_layers]") {
  Tensor x = zeros({2, 3, 4, 4});
  CHECK_THROWS_WITH(batch_norm(zeros({1, 3, 1, 1}), Tensor(), Tensor(), Tensor(), Tensor()),
                    Catch::Contains("more than 1 value per channel"));
  CHECK_THROWS_WITH(batch_norm(x, zeros({4}), ones({4}), Tensor(), Tensor()), Catch::Contains("running_mean"));
  CHECK_THROWS_WITH(batch_norm(x, zeros({3}), Tensor(), Tensor(), Tensor()), Catch::Contains("both running_mean"));
  CHECK_THROWS_WITH(batch_norm(x, Tensor(), Tensor(), ones({3}), Tensor(), {.momentum = 2.0}),
                    Catch::Contains("momentum"));
  CHECK_THROWS_WITH(batch_norm(zeros({3}), Tensor(), Tensor(), Tensor(), Tensor()), Catch::Contains("[N, C, *]"));
  nn::BatchNorm2d bn(3);
  CHECK_THROWS_WITH(bn.forward(zeros({2, 4, 2, 2})), Catch::Contains("BatchNorm2d") && Catch::Contains("[N, 3, H, W]"));
  CHECK_THROWS_WITH(nn::BatchNorm2d(0), Catch::Contains("num_features"));
}

// ---- weight standardisation ----------------------------------------------------------------------

TEST_CASE("weight_standardize matches timm's StdConv2d rule", "[vision_layers]") {
  for (const auto& c : fixture()["weight_standardize"]) {
    Tensor w = test::fixture_leaf(c, "w");
    INFO("kernel " << test::str(w.shape()));
    Tensor y = weight_standardize(w, c["eps"].get<double>());
    test::check_close(y, test::fixture_tensor(c["y"]), kTol, kTol);
    y.backward(test::fixture_tensor(c["gy"]));
    test::check_close(w.grad(), test::fixture_tensor(c["dw"]), kTol, kTol);
  }
  auto r = gradcheck([](const TensorList& in) { return weight_standardize(in[0], 1e-5); },
                     {test::grad_input({3, 1, 3, 3}, 9)});
  INFO(r.message);
  CHECK(r.ok);
  CHECK_THROWS_WITH(weight_standardize(zeros({4, 1, 1, 1})), Catch::Contains("at least 2 taps"));
}

TEST_CASE("StdConv2d convolves with the standardised kernel and keeps Conv2d's names", "[vision_layers]") {
  nn::StdConv2d conv(4, 4, 3, {.padding = 1, .groups = 4}, /*bias=*/false, 1e-5);
  CHECK(conv.state_dict().size() == 1);
  CHECK(conv.state_dict()[0].first == "weight");
  Generator g(3);
  Tensor x = randn({2, 4, 5, 5}, {}, &g);
  test::check_close(conv.forward(x), conv2d(x, weight_standardize(conv.weight, 1e-5), Tensor(), conv.options()),
                    0, 0);
  // Scaling the raw kernel changes nothing but eps's share: the point of the standardisation.
  // 1/√(var + eps) moves by at most eps/(2·var) relatively when var grows 9-fold, so with the
  // smallest filter variance v the outputs move by ≤ max|y|·eps/(2v), plus f32 rounding.
  Tensor before = conv.forward(x);
  const double v = amin(var(conv.weight, {1, 2, 3}, /*correction=*/0)).item<double>();
  const double ymax = amax(abs(before)).item<double>();
  {
    NoGradGuard ng;
    conv.weight.copy_(mul(conv.weight, 3.0));
  }
  test::check_close(conv.forward(x), before.to_vector<double>(), ymax * 1e-5 / (2 * v) + 1e-5, 0);
}

// ---- drop path --------------------------------------------------------------------------------------

TEST_CASE("drop_path keeps or drops whole samples, scaled by 1/(1-p)", "[vision_layers]") {
  const int64_t B = 64;
  const double p = 0.3;
  Generator g(5);
  Tensor x = add(rand({B, 3, 4}, {}, &g), 1.0);  // no zeros
  Generator gen(11);
  Tensor y = drop_path(x, p, true, &gen);
  const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  const float scale = float(1.0 / (1.0 - p));
  int kept = 0;
  for (int64_t b = 0; b < B; ++b) {
    const bool keep = yv[size_t(b * 12)] != 0.0f;
    kept += keep;
    for (int64_t i = 0; i < 12; ++i) {
      const size_t k = size_t(b * 12 + i);
      CHECK(yv[k] == (keep ? xv[k] * scale : 0.0f));
    }
  }
  CHECK(kept > 0);
  CHECK(kept < B);
  // The same generator state replays the same mask, in f64 too.
  Generator again(11);
  Tensor y64 = drop_path(x.to(kF64), p, true, &again);
  for (int64_t b = 0; b < B; ++b) CHECK((y64.to_vector<double>()[size_t(b * 12)] != 0.0) == (yv[size_t(b * 12)] != 0.0f));
  // Eval and p = 0 are the identity (the same tensor); p = 1 zeroes everything.
  CHECK(drop_path(x, p, false, &gen).is_same(x));
  CHECK(drop_path(x, 0.0, true, &gen).is_same(x));
  CHECK(sum(abs(drop_path(x, 1.0, true, &gen))).item<double>() == 0.0);
  CHECK_THROWS_WITH(drop_path(x, 1.5), Catch::Contains("drop_path") && Catch::Contains("between 0 and 1"));
}

TEST_CASE("drop_path keeps about 1-p of the samples and its gradient is the scaled mask", "[vision_layers]") {
  const int64_t B = 20000;
  const double p = 0.25;
  Generator gen(3);
  Tensor x = ones({B, 1}, TensorOptions().requires_grad(true));
  Tensor y = drop_path(x, p, true, &gen);
  const double kept = sum(ne(y, 0.0).to(kF64)).item<double>();
  // Binomial(B, 1 − p): 5 standard deviations.
  CHECK(std::fabs(kept - B * (1 - p)) < 5 * std::sqrt(B * p * (1 - p)));
  y.backward(full({B, 1}, 2.0));
  test::check_close(x.grad(), mul(y, 2.0), 0, 0);  // dy · keep/(1 − p), with x = 1
  // f64 gradcheck: each evaluation re-seeds, so every call draws the same mask.
  auto r = gradcheck(
      [](const TensorList& in) {
        Generator fixed(42);
        return drop_path(in[0], 0.5, true, &fixed);
      },
      {test::grad_input({6, 2, 3}, 8)});
  INFO(r.message);
  CHECK(r.ok);
  nn::DropPath layer(0.5);
  layer.eval();
  CHECK(layer.forward(x).is_same(x));
  CHECK(layer.named_parameters().empty());
}

// ---- pooling ------------------------------------------------------------------------------------

TEST_CASE("avg / max / adaptive pooling match PyTorch, forward and backward", "[vision_layers]") {
  for (const auto& c : fixture()["pools"]) {
    const std::string kind = c["kind"];
    INFO(kind << " " << c["options"].dump());
    Tensor x = test::fixture_leaf(c, "x");
    Tensor y = pool(kind, c["options"], x);
    test::check_close(y, test::fixture_tensor(c["y"]), kTol, kTol);
    y.backward(test::fixture_tensor(c["gy"]));
    test::check_close(x.grad(), test::fixture_tensor(c["dx"]), kTol, kTol);
    auto r = gradcheck([&](const TensorList& in) { return pool(kind, c["options"], in[0]); },
                       {test::grad_input(x.shape(), 21)});
    INFO(r.message);
    CHECK(r.ok);
  }
}

TEST_CASE("pooling modules, the global average, NaN and ties in max pooling", "[vision_layers]") {
  Generator g(2);
  Tensor x = randn({2, 3, 6, 6}, {}, &g);
  nn::MaxPool2d mp({.kernel_size = 2});
  nn::AvgPool2d ap({.kernel_size = 3, .stride = 3});
  nn::AdaptiveAvgPool2d gp(1);
  CHECK(mp.forward(x).shape() == Shape{2, 3, 3, 3});
  CHECK(ap.forward(x).shape() == Shape{2, 3, 2, 2});
  // The global average equals adaptive pooling to 1×1 (sums of 36 f32 values: 36·2⁻²⁴ relative).
  test::check_close(global_avg_pool2d(x), gp.forward(x).view({2, 3}).to_vector<double>(), 1e-6, 36 * 0x1p-24);
  // NaN wins a max window; ties go to the first position (its gradient gets everything).
  Tensor t = tensor(std::vector<double>{1, NAN, 3, 2, 5, 5, 5, 5}, {1, 1, 2, 4}).requires_grad_(true);
  Tensor y = max_pool2d(t, {.kernel_size = 2});
  std::vector<double> yv = y.to_vector<double>();
  CHECK(std::isnan(yv[0]));
  CHECK(yv[1] == 5.0);
  y.backward(ones({1, 1, 1, 2}, TensorOptions(kF64)));
  // Window 2 is {3, 2 | 5, 5}: the first 5 (flat position 6) takes the gradient.
  CHECK(t.grad().to_vector<double>() == std::vector<double>{0, 1, 0, 0, 0, 0, 1, 0});
  CHECK(mp.named_parameters().empty());
}

TEST_CASE("max_pool2d's 2×2 stride-2 path keeps the general rule: first maximum, NaN wins, −∞ windows", "[vision_layers]") {
  // Values on a coarse grid (many ties), with NaN and −∞ sprinkled in, odd sizes (the last row
  // and column are dropped); the reference is the rule of ops/pool.h written as plain loops:
  // the first maximum in row-major window order, the first NaN beating everything.
  const int64_t P = 6, H = 7, W = 9, Ho = 3, Wo = 4;
  std::vector<double> xv(size_t(P * H * W));
  uint64_t state = 12345;
  for (double& v : xv) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const int r = int((state >> 33) % 10);
    v = r == 0 ? NAN : r == 1 ? -INFINITY : double(r % 3);  // 0, 1, 2 mostly, some NaN and −∞
  }
  for (int64_t i = 0; i < 4; ++i) xv[size_t(i * 2)] = -INFINITY;  // a window of −∞ only (plane 0, top left)
  xv[1] = xv[W] = xv[W + 1] = -INFINITY;
  for (DType dtype : {kF32, kF64}) {
    INFO(dtype);
    Tensor x = tensor(xv, {1, P, H, W}).to(dtype).requires_grad_(true);
    Tensor y = max_pool2d(x, {.kernel_size = 2});
    REQUIRE(y.shape() == Shape{1, P, Ho, Wo});
    std::vector<double> dyv(size_t(P * Ho * Wo));
    for (size_t i = 0; i < dyv.size(); ++i) dyv[i] = double(i + 1);  // distinct: shows where each went
    y.backward(tensor(dyv, {1, P, Ho, Wo}).to(dtype));
    const auto yv = y.to_vector<double>(), dxv = x.grad().to_vector<double>();
    std::vector<double> want_dx(xv.size(), 0.0);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double best = -INFINITY;
          int64_t arg = (2 * oh) * W + 2 * ow;
          for (int64_t h = 2 * oh; h < 2 * oh + 2 && !std::isnan(best); ++h)
            for (int64_t w = 2 * ow; w < 2 * ow + 2; ++w) {
              const double v = xv[size_t(p * H * W + h * W + w)];
              if (v > best || std::isnan(v)) {
                best = v;
                arg = h * W + w;
                if (std::isnan(v)) break;
              }
            }
          const size_t o = size_t((p * Ho + oh) * Wo + ow);
          INFO("plane " << p << " cell " << oh << ", " << ow);
          CHECK((std::isnan(best) ? std::isnan(yv[o]) : yv[o] == best));
          want_dx[size_t(p * H * W + arg)] += dyv[o];
        }
    CHECK(dxv == want_dx);
  }
}

TEST_CASE("pooling rejects bad arguments with clear errors", "[vision_layers]") {
  Tensor x = zeros({1, 1, 4, 4});
  CHECK_THROWS_WITH(max_pool2d(x, {.kernel_size = 2, .padding = 2}), Catch::Contains("max_pool2d") && Catch::Contains("half the kernel"));
  CHECK_THROWS_WITH(avg_pool2d(x, {.kernel_size = 5}), Catch::Contains("avg_pool2d") && Catch::Contains("larger than the padded input"));
  CHECK_THROWS_WITH(avg_pool2d(zeros({4, 4}), {.kernel_size = 2}), Catch::Contains("[N, C, H, W]"));
  CHECK_THROWS_WITH(adaptive_avg_pool2d(x, 0), Catch::Contains("output_size"));
  CHECK_THROWS_WITH(max_pool2d(x.to(kI64), {.kernel_size = 2}), Catch::Contains("f32 or f64"));
  CHECK_THROWS_WITH(nn::MaxPool2d({.kernel_size = 0}), Catch::Contains("MaxPool2d"));
}
