// Reductions: values against PyTorch (tests/fixtures/core.json), tie and NaN rules, dtypes,
// float64 gradient checks, sum_to, and argument errors.
#include "helpers.h"

using namespace lsf;
using testing::gradcheck;

// Sums of ≤ 60 f64 values accumulated in f64: error ≤ 60·2⁻⁵³·Σ|x| ≈ 1e-14 for these inputs.
constexpr double kTol = 1e-13;

TEST_CASE("reductions match PyTorch", "[reduce]") {
  auto f = test::load_fixture("core")["reduce"];
  Tensor x = test::fixture_tensor(f["x"]);
  auto expect = [&](const Tensor& got, const char* key) {
    INFO(key);
    Tensor want = test::fixture_tensor(f[key]);
    REQUIRE(got.shape() == want.shape());
    test::check_close(got, want, kTol, kTol);
  };
  expect(sum(x), "sum_all");
  expect(sum(x, {1}), "sum_1");
  expect(sum(x, {0, 2}, /*keepdim=*/true), "sum_02_keep");
  expect(mean(x, {-1}), "mean_m1");
  expect(mean(x), "mean_all");
  expect(amax(x, {1}), "amax_1");
  expect(amin(x, {0, 2}), "amin_02");
  auto [v2, i2] = max(x, 2);
  expect(v2, "max_2_values");
  expect(i2, "max_2_indices");
  auto [v0, i0] = min(x, 0);
  expect(v0, "min_0_values");
  expect(i0, "min_0_indices");
  expect(argmax(x, 1), "argmax_1");
  expect(var(x, {1}), "var_1");
  expect(var(x), "var_all");
  expect(var(x, {2}, /*correction=*/0, /*keepdim=*/true), "var_2_c0_keep");
}

TEST_CASE("amax shares the gradient among ties, max routes it to the first index", "[reduce]") {
  auto f = test::load_fixture("core")["amax_ties_grad"];
  Tensor x = test::fixture_tensor(f["x"]).requires_grad_(true);
  sum(amax(x, {1})).backward();
  test::check_close(x.grad(), test::fixture_tensor(f["grad"]), 0, 0);
  Tensor y = tensor(std::vector<double>{1, 3, 3}).requires_grad_(true);
  sum(max(y, 0).values).backward();
  test::check_equal<double>(y.grad(), {3}, {0, 1, 0});
}

TEST_CASE("reductions propagate NaN and count integers in i64", "[reduce]") {
  Tensor x = tensor(std::vector<float>{1, NAN, 3});
  CHECK(std::isnan(amax(x).item<float>()));
  CHECK(std::isnan(sum(x).item<float>()));
  CHECK(argmax(x, 0).item<int64_t>() == 1);
  Tensor b = tensor(std::vector<bool>{true, false, true, true});
  Tensor n = sum(b);
  CHECK(n.dtype() == kI64);
  CHECK(n.item<int64_t>() == 3);
  CHECK(sum(tensor(std::vector<int32_t>{1, 2, 3})).dtype() == kI64);
}

TEST_CASE("reductions over non-contiguous and leading dims", "[reduce]") {
  Tensor x = arange(0.0, 24.0, 1.0, kF64).view({2, 3, 4});
  test::check_equal<double>(sum(x, {0, 1}), {4}, {60, 66, 72, 78});        // leading dims
  test::check_equal<double>(sum(x.permute({2, 0, 1}), {2}), {4, 2}, {12, 48, 15, 51, 18, 54, 21, 57});
  test::check_equal<double>(amax(x.transpose(0, 2), {0}), {3, 2}, {3, 15, 7, 19, 11, 23});
  // A large single reduction takes the parallel path.
  Tensor big = ones({300000});
  CHECK(sum(big).item<float>() == 300000.0f);
}

TEST_CASE("reductions over the leading dim of a large tensor match a per-column loop", "[reduce]") {
  // [300, 2100]: parallel blocks of whole columns (more than one per thread, the last one
  // partial). [5000, 40]: too narrow for column blocks, so row chunks (the last one partial)
  // combined in order. A NaN in one column and a −inf in the last check the propagation rules.
  auto [rows, cols] = GENERATE(std::pair<int64_t, int64_t>{300, 2100}, std::pair<int64_t, int64_t>{5000, 40});
  INFO("shape [" << rows << ", " << cols << "]");
  std::vector<float> values(size_t(rows * cols));
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(int64_t(i * 7919 % 1013) - 506) / 64.0f;
  values[size_t(17 * cols + 5)] = std::numeric_limits<float>::quiet_NaN();
  values[size_t(290 * cols + cols - 1)] = -std::numeric_limits<float>::infinity();
  Tensor x = tensor(values).view({rows, cols});
  const std::vector<float> got_sum = sum(x, {0}).to_vector<float>();
  const std::vector<float> got_max = amax(x, {0}).to_vector<float>();
  const std::vector<float> got_min = amin(x, {0}).to_vector<float>();
  for (int64_t j = 0; j < cols; ++j) {
    double want_sum = 0;  // f64 accumulation, as the kernel: the values are multiples of 1/64, exact
    float want_max = values[size_t(j)], want_min = values[size_t(j)];
    for (int64_t i = 0; i < rows; ++i) {
      const float v = values[size_t(i * cols + j)];
      want_sum += v;
      if (std::isnan(v) || std::isnan(want_max)) {
        want_max = want_min = std::numeric_limits<float>::quiet_NaN();
      } else {
        want_max = std::max(want_max, v);
        want_min = std::min(want_min, v);
      }
    }
    INFO("column " << j);
    if (j == 5) {
      REQUIRE(std::isnan(got_sum[size_t(j)]));
      REQUIRE(std::isnan(got_max[size_t(j)]));
      REQUIRE(std::isnan(got_min[size_t(j)]));
      continue;
    }
    REQUIRE(got_sum[size_t(j)] == float(want_sum));
    REQUIRE(got_max[size_t(j)] == want_max);
    REQUIRE(got_min[size_t(j)] == want_min);
  }
  CHECK(got_min[size_t(cols - 1)] == -std::numeric_limits<float>::infinity());
}

TEST_CASE("reductions pass float64 gradient checks", "[reduce][gradcheck]") {
  Tensor x = test::grad_input({3, 4, 5}, 7);
  CHECK(gradcheck([](const TensorList& in) { return sum(in[0]); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return sum(in[0], {0, 2}, true); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return mean(in[0], {-1}); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return amax(in[0], {1}); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return amin(in[0], {0, 2}, true); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return max(in[0], 2).values; }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return min(in[0], 0, true).values; }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return var(in[0], {1}); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return var(in[0], {}, 0, false); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return sum_to(in[0], {4, 1}); }, {x}));
}

TEST_CASE("reductions reject bad dims", "[reduce]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(sum(x, {2}), Catch::Contains("sum") && Catch::Contains("out of range"));
  CHECK_THROWS_WITH(sum(x, {1, -1}), Catch::Contains("sum") && Catch::Contains("twice"));
  CHECK_THROWS_WITH(amax(zeros({0, 3}), {0}), Catch::Contains("amax") && Catch::Contains("empty"));
  CHECK_THROWS_WITH(mean(arange(3)), Catch::Contains("mean") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(sum_to(x, {3, 3}), Catch::Contains("sum_to") && Catch::Contains("{2, 3}"));
}
