// layer_norm: values and gradients (dx, dweight, dbias) against PyTorch fixtures
// (tests/fixtures/gen_norm_loss.py), f64 gradient checks with and without affine parameters
// and over several trailing dims, the fused kernels against a reference computed here in
// f64 on a shape that runs in parallel, only-needed gradients, and bad-input errors.
#include <cmath>

#include "helpers.h"

using namespace lsf;
using test::str;

namespace {

// Tolerances. The row statistics are sums over n elements: in f32 (ours and PyTorch's) the
// mean and variance carry relative error ≲ (n/8 + 4)·2^-24 ≤ n·2^-24 each. An output
// y = x̂·w + b then errs by about n·2^-24·(|x̂·w| + |w|·|mean|·rstd); with the fixtures'
// |x̂| ≤ 4, |w| ≤ 3 and |mean|·rstd ≤ 3 that is ≤ 16·n·2^-24, and the backward's sums over n
// (and over the rows for dweight/dbias) are of the same size. f64: the same with 2^-52.
double tol_for(DType dt, int64_t n) { return 16.0 * double(n + 2) * (dt == kF32 ? 0x1p-24 : 0x1p-52); }

Tensor maybe(const nlohmann::json& inputs, const char* key) {
  return inputs.contains(key) ? test::fixture_tensor(inputs.at(key)).requires_grad_(true) : Tensor();
}

}  // namespace

TEST_CASE("layer_norm matches PyTorch, forward and backward", "[layer_norm]") {
  const auto fixtures = test::load_fixture("norm_loss");
  for (const char* name : {"layer_norm_affine", "layer_norm_two_dims_weight_only", "layer_norm_bias_only",
                           "layer_norm_plain", "layer_norm_f32"}) {
    INFO(name);
    const auto& in = fixtures.at(name).at("inputs");
    const auto& ex = fixtures.at(name).at("expected");
    Tensor x = test::fixture_tensor(in.at("x")).requires_grad_(true);
    Tensor w = maybe(in, "weight"), b = maybe(in, "bias");
    const Shape ns = in.at("normalized_shape").get<Shape>();
    const double tol = tol_for(x.dtype(), shape_numel(ns));
    Tensor y = layer_norm(x, ns, w, b, in.at("eps").get<double>());
    CHECK(y.shape() == x.shape());
    CHECK(y.dtype() == x.dtype());
    test::check_close(y, test::fixture_tensor(ex.at("y")), tol, tol);
    y.backward(test::fixture_tensor(in.at("dy")));
    test::check_close(x.grad(), test::fixture_tensor(ex.at("dx")), tol, tol);
    if (w.defined()) test::check_close(w.grad(), test::fixture_tensor(ex.at("dweight")), tol, tol);
    if (b.defined()) test::check_close(b.grad(), test::fixture_tensor(ex.at("dbias")), tol, tol);
  }
}

TEST_CASE("layer_norm gradients pass f64 gradient checks", "[layer_norm]") {
  struct Case {
    Shape x_shape, normalized;
    bool weight, bias;
    double eps;
  };
  for (const Case& c : {Case{{3, 5}, {5}, true, true, 1e-5}, Case{{2, 3, 4}, {3, 4}, true, true, 1e-5},
                        Case{{2, 3, 4}, {2, 3, 4}, true, false, 1e-3}, Case{{4, 6}, {6}, false, true, 0.0},
                        Case{{2, 2, 3}, {3}, false, false, 0.5}, Case{{7}, {7}, true, true, 1e-5}}) {
    INFO("x " << str(c.x_shape) << " normalized_shape " << str(c.normalized) << " weight " << c.weight << " bias " << c.bias);
    Tensor x = test::grad_input(c.x_shape, 21);
    Tensor w = c.weight ? test::grad_input(c.normalized, 22) : Tensor();
    Tensor b = c.bias ? test::grad_input(c.normalized, 23) : Tensor();
    auto r = testing::gradcheck(
        [&](const TensorList& in) { return layer_norm(in[0], c.normalized, in[1], in[2], c.eps); }, {x, w, b});
    INFO(r.message);
    CHECK(r.ok);
  }
  // Larger (random projections of the Jacobian), several row blocks of the dweight sums.
  Tensor x = test::grad_input({8, 20, 32}, 24), w = test::grad_input({32}, 25), b = test::grad_input({32}, 26);
  auto r = testing::gradcheck([&](const TensorList& in) { return layer_norm(in[0], {32}, in[1], in[2]); }, {x, w, b});
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("layer_norm kernels agree with an f64 reference on a parallel-sized input", "[layer_norm]") {
  // 1000 rows: several threads, and more rows than one f32 block of the dweight/dbias sums (64
  // rows). Row widths for the vector loops (ops/cpu/layer_norm.cpp) at every level's width
  // (4, 8, 16 f32 lanes): 48 = whole vectors only, fewer than four on AVX-512; 71 = a tail of
  // 7 (3 on SSE2); 200 = the four-accumulator loop, leftover vectors and a tail.
  const int64_t n = GENERATE(48, 71, 200);
  CAPTURE(n);
  const int64_t rows = 1000;
  const double eps = 1e-5;
  Generator g(31);
  Tensor x = add(mul(randn({rows, n}, TensorOptions(kF32), &g), 2.0), 5.0).requires_grad_(true);
  Tensor w = randn({n}, TensorOptions(kF32), &g).requires_grad_(true);
  Tensor b = randn({n}, TensorOptions(kF32), &g).requires_grad_(true);
  Tensor dy = randn({rows, n}, TensorOptions(kF32), &g);
  Tensor y = layer_norm(x, {n}, w, b, eps);
  y.backward(dy);

  std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>(), bv = b.to_vector<double>(),
                      dyv = dy.to_vector<double>();
  std::vector<double> y_ref(rows * n), dx_ref(rows * n), dw_ref(n, 0.0), db_ref(n, 0.0), dw_abs(n, 0.0), db_abs(n, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = &xv[r * n];
    const double* dyr = &dyv[r * n];
    double mu = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mu += xr[i] / n;
    for (int64_t i = 0; i < n; ++i) var += (xr[i] - mu) * (xr[i] - mu) / n;
    const double rs = 1.0 / std::sqrt(var + eps);
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double xh = (xr[i] - mu) * rs, gi = dyr[i] * wv[i];
      y_ref[r * n + i] = xh * wv[i] + bv[i];
      sg += gi / n;
      sgx += gi * xh / n;
      dw_ref[i] += dyr[i] * xh;
      db_ref[i] += dyr[i];
      dw_abs[i] += std::fabs(dyr[i] * xh);
      db_abs[i] += std::fabs(dyr[i]);
    }
    for (int64_t i = 0; i < n; ++i) {
      const double xh = (xr[i] - mu) * rs;
      dx_ref[r * n + i] = rs * (dyr[i] * wv[i] - sg - xh * sgx);
    }
  }
  // Here |mean|·rstd ≈ 2.5, |x̂| ≲ 5, |w| ≲ 3: the per-element bound above applies.
  const double tol = tol_for(kF32, n);
  test::check_close(y, y_ref, tol, tol);
  test::check_close(x.grad(), dx_ref, tol, tol);
  // dweight/dbias: Σ over 1000 rows, f32 inside blocks of 64 rows then f64, so the error is
  // ≤ (64 + 4)·2^-24 of Σ|terms|, plus the x̂ error (≤ 16·n·2^-24 relative) in each term.
  std::vector<double> dw = w.grad().to_vector<double>(), db = b.grad().to_vector<double>();
  for (int64_t i = 0; i < n; ++i) {
    CHECK(std::fabs(dw[i] - dw_ref[i]) <= (68 + 16 * n) * 0x1p-24 * dw_abs[i]);
    CHECK(std::fabs(db[i] - db_ref[i]) <= 68 * 0x1p-24 * db_abs[i]);
  }
}

TEST_CASE("layer_norm computes only the gradients that are needed", "[layer_norm]") {
  Tensor x = test::grad_input({5, 4}, 41);
  Tensor w = test::grad_input({4}, 42), b = test::grad_input({4}, 43);
  Tensor dy = test::grad_input({5, 4}, 44).detach();
  layer_norm(x, {4}, w, b).backward(dy);
  Tensor dx_all = x.grad(), dw_all = w.grad(), db_all = b.grad();

  Tensor w_const = w.detach(), x_const = x.detach();
  Tensor x2 = x.detach().clone().requires_grad_(true);
  layer_norm(x2, {4}, w_const, b.detach()).backward(dy);  // only dx
  test::check_close(x2.grad(), dx_all, 0.0, 0.0);

  Tensor w2 = w.detach().clone().requires_grad_(true);
  layer_norm(x_const, {4}, w2, Tensor()).backward(dy);  // only dweight, no bias at all
  test::check_close(w2.grad(), dw_all, 0.0, 0.0);

  Tensor b2 = b.detach().clone().requires_grad_(true);
  layer_norm(x_const, {4}, Tensor(), b2).backward(dy);  // only dbias
  test::check_close(b2.grad(), db_all, 0.0, 0.0);
}

TEST_CASE("layer_norm output rows have mean 0 and variance 1 without affine", "[layer_norm]") {
  Generator g(51);
  Tensor x = add(mul(randn({64, 3, 40}, TensorOptions(kF64), &g), 7.0), -3.0);
  Tensor y = layer_norm(x, {3, 40}, Tensor(), Tensor(), /*eps=*/0.0);
  std::vector<double> v = y.to_vector<double>();
  for (int64_t r = 0; r < 64; ++r) {
    double mu = 0, sq = 0;
    for (int64_t i = 0; i < 120; ++i) mu += v[r * 120 + i] / 120;
    for (int64_t i = 0; i < 120; ++i) sq += (v[r * 120 + i] - mu) * (v[r * 120 + i] - mu) / 120;
    CHECK(std::fabs(mu) <= tol_for(kF64, 120));
    CHECK(std::fabs(sq - 1.0) <= tol_for(kF64, 120));
  }
  // A non-contiguous input gives the same result as its contiguous copy.
  Tensor xt = x.transpose(0, 1);  // [3, 64, 40]
  test::check_close(layer_norm(xt, {40}), layer_norm(xt.contiguous(), {40}), 0.0, 0.0);
}

TEST_CASE("layer_norm rejects bad shapes and dtypes with the op name and shapes", "[layer_norm]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(layer_norm(x, {4}), Catch::Contains("layer_norm") && Catch::Contains("{4}") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(layer_norm(x, {2}), Catch::Contains("layer_norm") && Catch::Contains("{2}") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(layer_norm(zeros({3}), {2, 3}), Catch::Contains("layer_norm") && Catch::Contains("{2, 3}") && Catch::Contains("{3}"));
  CHECK_THROWS_WITH(layer_norm(x, {}), Catch::Contains("layer_norm") && Catch::Contains("normalized_shape"));
  CHECK_THROWS_WITH(layer_norm(x, {3}, zeros({4})), Catch::Contains("layer_norm") && Catch::Contains("weight") && Catch::Contains("{4}") && Catch::Contains("{3}"));
  CHECK_THROWS_WITH(layer_norm(x, {3}, zeros({3}), zeros({1, 3})), Catch::Contains("layer_norm") && Catch::Contains("bias") && Catch::Contains("{1, 3}"));
  CHECK_THROWS_WITH(layer_norm(x, {3}, zeros({3}, kF64)), Catch::Contains("layer_norm") && Catch::Contains("f64") && Catch::Contains("f32"));
  CHECK_THROWS_WITH(layer_norm(zeros({2, 3}, kI64), {3}), Catch::Contains("layer_norm") && Catch::Contains("i64") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(layer_norm(Tensor(), {3}), Catch::Contains("layer_norm") && Catch::Contains("undefined"));
  CHECK_THROWS_WITH(layer_norm(x, {3}, Tensor(), Tensor(), -1.0), Catch::Contains("layer_norm") && Catch::Contains("eps"));
}
