// bias_gelu (ops/unary.h): the fused gelu(x + bias) against its composition gelu(add(x, bias)):
// the forward and the x gradient bit for bit, the bias gradient within the bound of two sums of
// the same terms in different orders; f64 gradient checks; the same bits on one thread and on
// all; bad input.
#include <cmath>
#include <string>

#include "helpers.h"
#include "lsformer/engine/parallel.h"

using namespace lsf;

namespace {

constexpr double kU32 = 0x1p-24;

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

struct Grads {
  Tensor y, dx, dbias;
};

// y = f(x, bias) and the gradients of Σ y·dy, on fresh leaves.
template <typename F>
Grads run(F f, const Tensor& x0, const Tensor& bias0, const Tensor& dy) {
  Tensor x = x0.detach().requires_grad_(true), bias = bias0.detach().requires_grad_(true);
  Tensor y = f(x, bias);
  y.backward(dy);
  return {y.detach(), x.grad(), bias.grad()};
}

}  // namespace

TEST_CASE("bias_gelu equals gelu(x + bias): forward and dx bit for bit, dbias within its bound", "[unary][bias_gelu]") {
  Generator g(41);
  // Rows that are not a multiple of the 32-row block, rows of more than one 512-element buffer,
  // a 3-D input and one large enough to be split over threads.
  const std::vector<Shape> shapes = {{1, 1}, {5, 7}, {33, 600}, {3, 40, 16}, {300, 257}};
  for (GeluApproximation approx : {GeluApproximation::None, GeluApproximation::Tanh})
    for (const Shape& shape : shapes) {
      INFO("shape " << shape_string(shape) << (approx == GeluApproximation::Tanh ? " tanh" : " erf"));
      const int64_t n = shape.back();
      Tensor x = mul(randn(shape, TensorOptions(kF32), &g), 3.0), bias = randn({n}, TensorOptions(kF32), &g);
      Tensor dy = randn(shape, TensorOptions(kF32), &g);
      Grads fused = run([&](const Tensor& a, const Tensor& b) { return bias_gelu(a, b, approx); }, x, bias, dy);
      Grads composed = run([&](const Tensor& a, const Tensor& b) { return gelu(add(a, b), approx); }, x, bias, dy);
      CHECK(fused.y.to_vector<float>() == composed.y.to_vector<float>());
      CHECK(fused.dx.to_vector<float>() == composed.dx.to_vector<float>());
      // dbias: both are sums of the same R = rows terms dx[r, j] in different orders; each is
      // within γ_{R−1}·Σ_r |dx[r, j]| of the exact sum (Higham §4.2), so they differ by at most
      // twice that.
      const int64_t rows = x.numel() / n;
      const double gamma = double(rows - 1) * kU32 / (1.0 - double(rows - 1) * kU32);
      std::vector<double> bound = sum(abs(composed.dx.to(kF64)).reshape({rows, n}), {0}).to_vector<double>();
      std::vector<double> a = fused.dbias.to_vector<double>(), b = composed.dbias.to_vector<double>();
      for (int64_t j = 0; j < n; ++j) {
        INFO("dbias[" << j << "] fused " << a[j] << " composed " << b[j] << " bound " << 2 * gamma * bound[j]);
        CHECK(std::fabs(a[j] - b[j]) <= 2 * gamma * bound[j]);
      }
    }
}

TEST_CASE("bias_gelu reads a strided x like a contiguous one", "[unary][bias_gelu]") {
  Generator g(42);
  Tensor base = randn({40, 24}, TensorOptions(kF32), &g);
  Tensor x = base.t();  // [24, 40], not contiguous
  Tensor bias = randn({40}, TensorOptions(kF32), &g), dy = randn({24, 40}, TensorOptions(kF32), &g);
  Grads strided = run([](const Tensor& a, const Tensor& b) { return bias_gelu(a, b); }, x, bias, dy);
  Grads dense = run([](const Tensor& a, const Tensor& b) { return bias_gelu(a, b); }, x.contiguous(), bias, dy);
  CHECK(strided.y.to_vector<float>() == dense.y.to_vector<float>());
  CHECK(strided.dx.to_vector<float>() == dense.dx.to_vector<float>());
  CHECK(strided.dbias.to_vector<float>() == dense.dbias.to_vector<float>());
}

TEST_CASE("bias_gelu passes f64 gradient checks in x and bias", "[unary][bias_gelu]") {
  Generator g(43);
  for (GeluApproximation approx : {GeluApproximation::None, GeluApproximation::Tanh}) {
    INFO((approx == GeluApproximation::Tanh ? "tanh" : "erf"));
    // 70 rows: three row blocks of the bias gradient, the last one partial.
    Tensor x = mul(randn({70, 5}, TensorOptions(kF64), &g), 2.0).requires_grad_(true);
    Tensor bias = randn({5}, TensorOptions(kF64), &g).requires_grad_(true);
    auto r = testing::gradcheck([&](const TensorList& in) { return bias_gelu(in[0], in[1], approx); }, {x, bias});
    INFO(r.message);
    CHECK(r.ok);
  }
}

TEST_CASE("bias_gelu gives the same bits on one thread and on all", "[unary][bias_gelu]") {
  Generator g(44);
  Tensor x = randn({512, 300}, TensorOptions(kF32), &g), bias = randn({300}, TensorOptions(kF32), &g);
  Tensor dy = randn({512, 300}, TensorOptions(kF32), &g);
  auto fused = [](const Tensor& a, const Tensor& b) { return bias_gelu(a, b); };
  Grads all = run(fused, x, bias, dy);
  const Grads one = [&] {
    const test::ThreadCount one_thread(1);
    return run(fused, x, bias, dy);
  }();
  CHECK(all.y.to_vector<float>() == one.y.to_vector<float>());
  CHECK(all.dx.to_vector<float>() == one.dx.to_vector<float>());
  CHECK(all.dbias.to_vector<float>() == one.dbias.to_vector<float>());
}

TEST_CASE("bias_gelu with zero rows gives an empty output and a zero bias gradient", "[unary][bias_gelu]") {
  Tensor x = zeros({0, 4}).requires_grad_(true), bias = ones({4}).requires_grad_(true);
  Tensor y = bias_gelu(x, bias);
  CHECK(y.shape() == Shape{0, 4});
  sum(y).backward();
  CHECK(bias.grad().to_vector<float>() == std::vector<float>(4, 0.0f));
}

TEST_CASE("bias_gelu rejects bad input with the op name and the shapes", "[unary][bias_gelu]") {
  Tensor x = zeros({3, 4});
  REQUIRE_THROWS_WITH(bias_gelu(x, zeros({5})), Catch::Contains("bias_gelu") && Catch::Contains("{5}"));
  REQUIRE_THROWS_WITH(bias_gelu(x, zeros({1, 4})), Catch::Contains("bias must be [N]"));
  REQUIRE_THROWS_WITH(bias_gelu(x, zeros({4}, TensorOptions(kF64))), Catch::Contains("dtype"));
  REQUIRE_THROWS_WITH(bias_gelu(zeros({3, 4}, TensorOptions(kI64)), zeros({4}, TensorOptions(kI64))),
                      Catch::Contains("floating-point"));
  REQUIRE_THROWS_WITH(bias_gelu(Tensor(), zeros({4})), Catch::Contains("bias_gelu"));
}
