// cross_entropy and nll_loss: values and input gradients against PyTorch 1.13 fixtures
// (tests/fixtures/gen_norm_loss.py) for every reduction, ignore_index, label smoothing and
// input layout ([N, C], [N, C, d1, d2], [C]); f64 gradient checks of every option; the fused
// cross_entropy against its composition (log_softmax + nll_loss + smoothing term); the
// column-tiled kernels ([N, C, K] with K > one tile) against the row kernels; i32 targets;
// and errors for out-of-range targets, shape and dtype mismatches.
#include <cmath>

#include "helpers.h"

using namespace lsf;
using test::str;

namespace {

// Tolerances. Per element the loss is lse − (1−ε)·x_t − (ε/C)·Σx with lse = m + log Σ exp(x−m):
// the f32 sum over C terms has relative error ≲ (C/8 + 4)·2^-24 (ours and PyTorch's), i.e. an
// absolute error of that size in lse; the remaining terms are roundings at the magnitude of the
// logits (|x| ≤ 16 in the fixtures: 16·2^-24 each). Two implementations, each within about
// (C + 16)·2^-24, agree within 4·(C + 16)·2^-24; the gradients softmax − target share the
// bound. f64: the same with 2^-52.
double tol_for(DType dt, int64_t C) { return 4.0 * double(C + 16) * (dt == kF32 ? 0x1p-24 : 0x1p-52); }

Reduction reduction_named(const std::string& r) {
  return r == "mean" ? Reduction::Mean : r == "sum" ? Reduction::Sum : Reduction::None;
}

Tensor run_loss(const std::string& op, const Tensor& input, const Tensor& target, Reduction reduction,
                int64_t ignore_index, double smoothing) {
  if (op == "cross_entropy")
    return cross_entropy(input, target, {.ignore_index = ignore_index, .label_smoothing = smoothing, .reduction = reduction});
  return nll_loss(input, target, {.ignore_index = ignore_index, .reduction = reduction});
}

int64_t classes_of(const Tensor& input) { return input.dim() == 1 ? input.size(0) : input.size(1); }

}  // namespace

TEST_CASE("cross_entropy and nll_loss match PyTorch for every option", "[loss]") {
  const auto fixtures = test::load_fixture("norm_loss");
  int checked = 0;
  for (const auto& [name, c] : fixtures.items()) {
    if (name.rfind("class_", 0) != 0) continue;
    const auto& in = c.at("inputs");
    const auto& ex = c.at("expected");
    const int64_t ignore_index = in.at("ignore_index").get<int64_t>();
    const double smoothing = in.at("label_smoothing").get<double>();
    for (const char* op : {"cross_entropy", "nll_loss"}) {
      for (const char* red : {"mean", "sum", "none"}) {
        const std::string key = std::string(op) + "_" + red;
        if (!ex.contains(key)) continue;
        for (DType target_dtype : {kI64, kI32}) {
          INFO(name << " " << key << " target " << target_dtype);
          Tensor x = test::fixture_tensor(in.at("input")).requires_grad_(true);
          Tensor target = test::fixture_tensor(in.at("target")).to(target_dtype);
          const double tol = tol_for(x.dtype(), classes_of(x));
          Tensor loss = run_loss(op, x, target, reduction_named(red), ignore_index, smoothing);
          CHECK(loss.dtype() == x.dtype());
          test::check_close(loss, test::fixture_tensor(ex.at(key)), tol, tol);
          loss.backward(test::fixture_tensor(ex.at(key + "_dloss")).view(loss.shape()));
          test::check_close(x.grad(), test::fixture_tensor(ex.at(key + "_dx")), tol, tol);
          ++checked;
        }
      }
    }
  }
  CHECK(checked == 2 * (9 * 6 + 3));  // 9 cases with both ops, class_f32 with cross_entropy only
}

TEST_CASE("an all-ignored batch gives nan for mean, 0 for sum, and zero gradients", "[loss]") {
  Tensor x = test::grad_input({3, 4}, 61);
  Tensor target = tensor(std::vector<int64_t>{-100, -100, -100});
  Tensor mean_loss = cross_entropy(x, target, {.label_smoothing = 0.2});
  CHECK(std::isnan(mean_loss.item<double>()));
  mean_loss.backward();
  test::check_close(x.grad(), std::vector<double>(12, 0.0), 0.0, 0.0);
  CHECK(std::isnan(nll_loss(x, target).item<double>()));
  CHECK(cross_entropy(x, target, {.reduction = Reduction::Sum}).item<double>() == 0.0);
  // An empty batch too.
  CHECK(std::isnan(cross_entropy(zeros({0, 4}), zeros({0}, kI64)).item<double>()));
}

TEST_CASE("cross_entropy and nll_loss pass f64 gradient checks for every option", "[loss]") {
  struct Case {
    Shape input;
    std::vector<int64_t> target;
    Shape target_shape;
    int64_t ignore_index;
  };
  const std::vector<Case> cases = {
      {{5, 4}, {0, 3, -100, 1, 2}, {5}, -100},
      {{5, 3}, {0, 1, 2, 1, 0}, {5}, 1},                          // ignore_index is a real class
      {{2, 4, 3}, {0, -100, 1, 2, 3, 3}, {2, 3}, -100},          // [N, C, d]
      {{2, 3, 2, 2}, {0, 1, 2, 0, 1, -100, 2, 2}, {2, 2, 2}, -100},  // [N, C, d1, d2]
      {{6}, {4}, {}, -100},                                        // [C] with a 0-d target
  };
  for (const Case& c : cases) {
    Tensor x = test::grad_input(c.input, 62);
    Tensor target = tensor(c.target, c.target_shape);
    for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      for (double smoothing : {0.0, 0.3, 1.0}) {
        INFO("input " << str(c.input) << " reduction " << int(red) << " smoothing " << smoothing);
        auto r = testing::gradcheck(
            [&](const TensorList& in) {
              return cross_entropy(in[0], target, {.ignore_index = c.ignore_index, .label_smoothing = smoothing, .reduction = red});
            },
            {x});
        INFO(r.message);
        CHECK(r.ok);
      }
      INFO("nll_loss input " << str(c.input) << " reduction " << int(red));
      auto r = testing::gradcheck(
          [&](const TensorList& in) { return nll_loss(in[0], target, {.ignore_index = c.ignore_index, .reduction = red}); },
          {x});
      INFO(r.message);
      CHECK(r.ok);
    }
  }
  // Larger (random projections), including positions beyond one column tile (K = 70).
  Tensor x = test::grad_input({3, 5, 70}, 63);
  std::vector<int64_t> t(3 * 70);
  for (size_t i = 0; i < t.size(); ++i) t[i] = i % 13 == 0 ? -100 : int64_t(i * 7 % 5);
  Tensor target = tensor(t, {3, 70});
  auto r = testing::gradcheck(
      [&](const TensorList& in) { return cross_entropy(in[0], target, {.label_smoothing = 0.1}); }, {x});
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("cross_entropy over [N, C, K] agrees with the row kernel on [N*K, C]", "[loss]") {
  // K = 150 positions: three column tiles; 8 samples × 12 classes × 150 runs in parallel.
  const int64_t N = 8, C = 12, K = 150;
  Generator g(71);
  std::vector<int64_t> t(N * K);
  for (int64_t i = 0; i < N * K; ++i) t[i] = i % 17 == 3 ? -100 : (i * 5 + i / 7) % C;
  Tensor target = tensor(t, {N, K});
  Tensor target_rows = tensor(t, {N * K});  // row n·K + k is sample n, position k
  for (DType dt : {kF32, kF64}) {
    Tensor x = mul(randn({N, C, K}, TensorOptions(kF64), &g), 3.0).to(dt).requires_grad_(true);
    Tensor rows = x.detach().permute({0, 2, 1}).contiguous().view({N * K, C}).requires_grad_(true);
    const double tol = tol_for(dt, C);
    for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      INFO(dt << " reduction " << int(red));
      x.set_grad(Tensor());
      rows.set_grad(Tensor());
      CrossEntropyOptions o{.label_smoothing = 0.05, .reduction = red};
      Tensor a = cross_entropy(x, target, o), b = cross_entropy(rows, target_rows, o);
      // The sums run in a different order (by tiles, not rows): f64 sums of N·K losses.
      test::check_close(a.reshape({-1}), b.reshape({-1}), tol * N * K, tol);
      Tensor da = red == Reduction::None ? ones(a.shape(), TensorOptions(dt)) : ones({}, TensorOptions(dt));
      a.backward(da);
      b.backward(da.reshape(b.shape()));
      test::check_close(x.grad(), rows.grad().view({N, K, C}).permute({0, 2, 1}).contiguous(), tol, tol);
    }
  }
}

TEST_CASE("fused cross_entropy equals its composition from log_softmax and nll_loss", "[loss]") {
  // loss = (1 − ε)·nll(log_softmax(x)) + (ε/C)·Σ_counted(−Σ_c log_softmax(x)_c) / count.
  Tensor x = test::grad_input({7, 6, 3}, 91);
  Tensor target = tensor(std::vector<int64_t>{0, 5, -100, 2, 2, 1, 4, 3, -100, 0, 1, 2, 5, 5, 4, 3, 2, 1, -100, 0, 0},
                         {7, 3});
  const int64_t C = 6;
  const double eps = 0.2;
  Tensor counted = ne(target, -100.0).to(kF64);                 // [7, 3]
  const double count = sum(counted).item<double>();
  Tensor fused = cross_entropy(x, target, {.label_smoothing = eps});
  fused.backward();
  Tensor dx_fused = x.grad();
  x.set_grad(Tensor());
  Tensor lp = log_softmax(x, 1);
  Tensor smooth = div(sum(mul(mul(sum(lp, {1}), -1.0), counted)), count);
  Tensor composed = add(mul(nll_loss(lp, target), 1.0 - eps), mul(smooth, eps / double(C)));
  composed.backward();
  // f64 throughout: sums over C = 6 classes and 18 counted elements.
  const double tol = tol_for(kF64, 18 * C);
  test::check_close(fused, composed, tol, tol);
  test::check_close(dx_fused, x.grad(), tol, tol);
}

TEST_CASE("cross_entropy on a large f32 batch agrees with the f64 computation", "[loss]") {
  // 4096 × 64: the benchmark's row shape, split over threads.
  Generator g(81);
  Tensor x64 = mul(randn({4096, 64}, TensorOptions(kF64), &g), 4.0);
  std::vector<int64_t> t(4096);
  for (int64_t i = 0; i < 4096; ++i) t[i] = i % 29 == 0 ? -100 : (i * 31) % 64;
  Tensor target = tensor(t);
  Tensor x32 = x64.to(kF32).requires_grad_(true);
  Tensor ref_in = x32.detach().to(kF64).requires_grad_(true);  // the same values, computed in f64
  Tensor loss32 = cross_entropy(x32, target, {.label_smoothing = 0.1});
  Tensor loss64 = cross_entropy(ref_in, target, {.label_smoothing = 0.1});
  const double tol = tol_for(kF32, 64);
  test::check_close(loss32, loss64, tol, tol);
  loss32.backward();
  loss64.backward();
  // Gradients are of size 1/4000: the relative bound applies to each, atol scaled likewise.
  test::check_close(x32.grad(), ref_in.grad(), tol / 4000.0, tol);
}

TEST_CASE("class losses reject bad targets and shapes with the op name, value and shapes", "[loss]") {
  Tensor x = zeros({4, 5});
  Tensor good = tensor(std::vector<int64_t>{0, 1, 2, 3});
  for (const char* op : {"cross_entropy", "nll_loss"}) {
    INFO(op);
    auto run = [&](const Tensor& input, const Tensor& target) { return run_loss(op, input, target, Reduction::Mean, -100, 0.0); };
    CHECK_THROWS_WITH(run(x, tensor(std::vector<int64_t>{0, 7, 2, 3})),
                      Catch::Contains(op) && Catch::Contains("target 7") && Catch::Contains("5 classes"));
    CHECK_THROWS_WITH(run(x, tensor(std::vector<int64_t>{0, 1, -1, 3})),
                      Catch::Contains(op) && Catch::Contains("target -1") && Catch::Contains("5 classes"));
    CHECK_THROWS_WITH(run(x, tensor(std::vector<int32_t>{0, 1, 5, 3})),
                      Catch::Contains(op) && Catch::Contains("target 5") && Catch::Contains("5 classes"));
    CHECK_THROWS_WITH(run(zeros({2, 5, 3}), tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 9}, {2, 3})),
                      Catch::Contains(op) && Catch::Contains("target 9") && Catch::Contains("5 classes"));
    CHECK_THROWS_WITH(run(x, tensor(std::vector<int64_t>{0, 1, 2})),
                      Catch::Contains(op) && Catch::Contains("{3}") && Catch::Contains("{4, 5}"));
    CHECK_THROWS_WITH(run(zeros({2, 5, 3}), tensor(std::vector<int64_t>{0, 1}, {2})),
                      Catch::Contains(op) && Catch::Contains("{2}") && Catch::Contains("{2, 5, 3}") && Catch::Contains("{2, 3}"));
    CHECK_THROWS_WITH(run(zeros({5}), good),
                      Catch::Contains(op) && Catch::Contains("{4}") && Catch::Contains("{5}"));
    CHECK_THROWS_WITH(run(x, zeros({4})), Catch::Contains(op) && Catch::Contains("f32") && Catch::Contains("{4}"));
    CHECK_THROWS_WITH(run(zeros({4, 5}, kI64), good), Catch::Contains(op) && Catch::Contains("i64") && Catch::Contains("{4, 5}"));
    CHECK_THROWS_WITH(run(zeros({}), tensor(std::vector<int64_t>{0}, {})), Catch::Contains(op) && Catch::Contains("{}"));
    CHECK_THROWS_WITH(run(Tensor(), good), Catch::Contains(op) && Catch::Contains("undefined"));
    CHECK_NOTHROW(run(x, good));
  }
  CHECK_THROWS_WITH(cross_entropy(x, good, {.label_smoothing = 1.5}),
                    Catch::Contains("cross_entropy") && Catch::Contains("label_smoothing") && Catch::Contains("1.5"));
  CHECK_THROWS_WITH(cross_entropy(x, good, {.label_smoothing = -0.1}),
                    Catch::Contains("cross_entropy") && Catch::Contains("label_smoothing"));
}
