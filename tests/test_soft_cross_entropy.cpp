// soft_cross_entropy (ops/soft_cross_entropy.h): the value against −Σ t·log_softmax(x) written
// out in float64, equality with cross_entropy's label smoothing when the soft target is a
// smoothed one-hot, a float64 finite-difference gradient check (logits and targets), and errors.
#include <cmath>

#include "helpers.h"
#include "lsformer/ops/soft_cross_entropy.h"

using namespace lsf;

namespace {

// −(1/B)·Σ_b Σ_k t[b,k]·(x[b,k] − log Σ_j exp x[b,j]) in long double.
double reference(const std::vector<double>& x, const std::vector<double>& t, int64_t b, int64_t k) {
  long double total = 0;
  for (int64_t i = 0; i < b; ++i) {
    long double m = x[size_t(i * k)];
    for (int64_t j = 1; j < k; ++j) m = std::max<long double>(m, x[size_t(i * k + j)]);
    long double s = 0;
    for (int64_t j = 0; j < k; ++j) s += std::exp((long double)x[size_t(i * k + j)] - m);
    const long double lse = m + std::log(s);
    for (int64_t j = 0; j < k; ++j) total -= t[size_t(i * k + j)] * ((long double)x[size_t(i * k + j)] - lse);
  }
  return double(total / b);
}

}  // namespace

TEST_CASE("soft_cross_entropy: value, label-smoothing equivalence, gradcheck, errors", "[loss]") {
  const int64_t b = 4, k = 7;
  manual_seed(3);
  const Tensor x = randn({b, k}, TensorOptions().dtype(kF64)) * 3.0;
  Tensor t = softmax(randn({b, k}, TensorOptions().dtype(kF64)), -1);  // rows sum to 1
  const double expected = reference(x.to_vector<double>(), t.to_vector<double>(), b, k);
  // f64: log_softmax, K products and a K-term sum per row, then the mean: each ≲ (K + 4)·2^-53
  // relative to the row's magnitude (|x| ≲ 12 here).
  CHECK(std::fabs(soft_cross_entropy(x, t).item<double>() - expected) <= 16.0 * (k + 4) * 0x1p-53 * 12);
  // f32: the same bound with 2^-24.
  const double f32 = soft_cross_entropy(x.to(kF32), t.to(kF32)).item<double>();
  CHECK(std::fabs(f32 - expected) <= 16.0 * (k + 4) * 0x1p-24 * 12);

  // A smoothed one-hot target equals cross_entropy with that label smoothing.
  const std::vector<int64_t> labels = {0, 6, 3, 3};
  std::vector<double> smooth(size_t(b * k), 0.1 / k);
  for (int64_t i = 0; i < b; ++i) smooth[size_t(i * k + labels[size_t(i)])] += 0.9;
  const double ce = cross_entropy(x, tensor(labels), {.label_smoothing = 0.1}).item<double>();
  CHECK(std::fabs(soft_cross_entropy(x, tensor(smooth, {b, k}).to(kF64)).item<double>() - ce) <= 1e-12);

  // Gradients with respect to both inputs, in float64 (composed ops: no hand-written backward).
  const Tensor xg = x.clone().requires_grad_(true);
  const Tensor tg = t.clone().requires_grad_(true);
  const auto result = testing::gradcheck(
      [](const TensorList& in) { return soft_cross_entropy(in[0], in[1]); }, {xg, tg});
  INFO(result.message);
  CHECK(result.ok);
  // The closed form: d/dx = (softmax(x)·Σt − t) / B.
  Tensor xr = x.clone().requires_grad_(true);
  soft_cross_entropy(xr, t).backward();
  test::check_close(xr.grad(), (softmax(x, -1) * sum(t, {-1}, true) - t) / double(b), 1e-15, 1e-12);

  CHECK_THROWS_WITH(soft_cross_entropy(x, t.narrow(1, 0, 3)), Catch::Contains("[B, K]"));
  CHECK_THROWS_WITH(soft_cross_entropy(x, t.to(kF32)), Catch::Contains("dtypes differ"));
  CHECK_THROWS_WITH(soft_cross_entropy(x.view({b * k}), t.view({b * k})), Catch::Contains("[B, K]"));
}
