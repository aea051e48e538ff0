// dropout: the mask is exactly the documented Philox rule, the generator's counter advances by
// (n + 3) / 4 blocks per call, masks replay by seed and differ between calls, the keep fraction
// and the mean agree with 1 − p within binomial bounds, identity / all-dropped edge cases,
// gradients (exact mask·scale, and f64 gradcheck with a generator re-seeded inside the
// function), and the argument errors.
#include <cmath>

#include "helpers.h"
#include "lsformer/ops/kernels/dropout.h"
#include "lsformer/ops/kernels/random.h"

using namespace lsf;
using testing::gradcheck;

TEST_CASE("dropout keeps element i when uniform_f32_at(state, i) >= p, scaled by 1/(1-p)", "[dropout]") {
  for (DType dtype : {kF32, kF64}) {
    for (double p : {0.1, 0.3, 0.5, 0.9}) {
      INFO(dtype << " p " << p);
      Generator gen(1234);
      gen.set_state({1234, 17});  // a non-zero offset: the mask starts where the counter is
      const GeneratorState before = gen.state();
      Tensor x = arange(1.0, 1004.0, 1.0, dtype);  // 1003 elements: not a multiple of 4
      Tensor y = dropout(x, p, /*training=*/true, &gen);
      CHECK(gen.state().offset == before.offset + (1003 + 3) / 4);
      const double scale = dtype == kF32 ? double(float(1.0 / (1.0 - p))) : 1.0 / (1.0 - p);
      std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
      int64_t wrong = 0;
      for (size_t i = 0; i < xv.size(); ++i) {
        const bool keep = uniform_f32_at(before, i) >= p;
        double want = keep ? xv[i] * scale : 0.0;
        if (dtype == kF32) want = double(float(want));  // one f32 rounding of x·scale
        wrong += yv[i] != want;
      }
      CHECK(wrong == 0);
      CHECK(dropout_keep_threshold(p) == uint32_t(std::ceil(p * 16777216.0)));
    }
  }
}

TEST_CASE("dropout masks replay by seed and differ between calls", "[dropout]") {
  Tensor x = ones({64, 33});
  Generator gen(42);
  Tensor first = dropout(x, 0.5, true, &gen);
  Tensor second = dropout(x, 0.5, true, &gen);
  CHECK(first.to_vector<float>() != second.to_vector<float>());
  gen.manual_seed(42);
  CHECK(dropout(x, 0.5, true, &gen).to_vector<float>() == first.to_vector<float>());
  CHECK(dropout(x, 0.5, true, &gen).to_vector<float>() == second.to_vector<float>());
  // The default generator, through manual_seed.
  manual_seed(9);
  Tensor d1 = dropout(x, 0.25);
  manual_seed(9);
  CHECK(dropout(x, 0.25).to_vector<float>() == d1.to_vector<float>());
  // A non-contiguous input is masked in its logical (row-major) order.
  Tensor xt = randn({33, 64}).t();
  gen.manual_seed(5);
  Tensor yt = dropout(xt, 0.5, true, &gen);
  gen.manual_seed(5);
  CHECK(yt.to_vector<float>() == dropout(xt.contiguous(), 0.5, true, &gen).to_vector<float>());
}

TEST_CASE("dropout keeps 1 - p of the elements and preserves the mean", "[dropout]") {
  const int64_t n = int64_t(1) << 20;
  Generator gen(2024);
  Tensor x = rand({n}, kF64, &gen);  // U(0, 1): E[x] = 1/2, E[x²] = 1/3
  const double mean_x = mean(x).item<double>();
  for (double p : {0.1, 0.5, 0.9}) {
    INFO("p " << p);
    Tensor y = dropout(x, p, true, &gen);
    // The keep count is Binomial(n, 1 − p): its fraction has σ = √(p(1 − p)/n). Six σ: a
    // correct mask fails with probability < 2·10⁻⁹.
    const double kept = sum(ne(y, 0.0)).item<int64_t>() / double(n);
    CHECK(std::fabs(kept - (1 - p)) <= 6 * std::sqrt(p * (1 - p) / n));
    // y_i = x_i·m_i/(1 − p), m_i ~ Bernoulli(1 − p) independent of x: E[y] = E[x], and
    // Var(y_i − x_i) = E[x²]·p/(1 − p) = p/(3(1 − p)). Six σ of the mean difference.
    const double diff = mean(y).item<double>() - mean_x;
    CHECK(std::fabs(diff) <= 6 * std::sqrt(p / (3 * (1 - p)) / n));
  }
}

TEST_CASE("dropout edge cases: eval mode, p = 0 and p = 1", "[dropout]") {
  Tensor x = randn({3, 4}, TensorOptions(kF64).requires_grad(true));
  Generator gen(1);
  CHECK(dropout(x, 0.5, /*training=*/false, &gen).is_same(x));
  CHECK(dropout(x, 0.0, true, &gen).is_same(x));
  CHECK(gen.state().offset == 0);  // no random numbers drawn
  Tensor y = dropout(x, 1.0, true, &gen);
  test::check_equal<double>(y, {3, 4}, std::vector<double>(12, 0.0));
  CHECK(gen.state().offset == 0);
  sum(y).backward();
  test::check_equal<double>(x.grad(), {3, 4}, std::vector<double>(12, 0.0));
  CHECK(dropout(zeros({0, 3}), 0.5).shape() == Shape{0, 3});
}

TEST_CASE("dropout backward multiplies by the saved mask and scale", "[dropout]") {
  Generator gen(77);
  Tensor x = randn({10, 21}, kF32, &gen).requires_grad_(true);
  Tensor dy = randn({10, 21}, kF32, &gen);
  Tensor y = dropout(x, 0.3, true, &gen);
  y.backward(dy);
  const float scale = float(1.0 / 0.7);
  std::vector<float> yv = y.to_vector<float>(), dyv = dy.to_vector<float>(), gv = x.grad().to_vector<float>();
  int64_t wrong = 0;
  for (size_t i = 0; i < yv.size(); ++i) wrong += gv[i] != (yv[i] != 0.0f ? dyv[i] * scale : 0.0f);
  CHECK(wrong == 0);
}

TEST_CASE("dropout gradients pass f64 gradcheck", "[dropout]") {
  // The generator is re-seeded inside the function, so every evaluation draws the same mask.
  for (double p : {0.2, 0.6}) {
    auto r = gradcheck([p](const TensorList& in) {
      Generator gen(31);
      return dropout(in[0], p, true, &gen);
    }, {test::grad_input({4, 7}, 3)});
    INFO("p " << p << ": " << r.message);
    CHECK(r.ok);
  }
  auto big = gradcheck([](const TensorList& in) {
    Generator gen(32);
    return dropout(in[0], 0.5, true, &gen);
  }, {test::grad_input({40, 50}, 4)});
  INFO(big.message);
  CHECK(big.ok);
}

TEST_CASE("dropout rejects bad probabilities and dtypes", "[dropout]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(dropout(x, -0.1), Catch::Contains("dropout") && Catch::Contains("-0.1") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(dropout(x, 1.5), Catch::Contains("dropout") && Catch::Contains("between 0 and 1"));
  CHECK_THROWS_WITH(dropout(x, std::nan("")), Catch::Contains("dropout") && Catch::Contains("between 0 and 1"));
  CHECK_THROWS_WITH(dropout(zeros({2, 3}, kI64), 0.5),
                    Catch::Contains("dropout") && Catch::Contains("i64") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(dropout(Tensor(), 0.5), Catch::Contains("dropout") && Catch::Contains("undefined"));
  CHECK_THROWS_WITH(dropout(zeros({2}, kBF16), 0.5), Catch::Contains("dropout") && Catch::Contains("bf16"));
}
