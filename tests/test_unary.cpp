// Unary elementwise ops: values and gradients against PyTorch (tests/fixtures/unary.json, from
// gen_unary.py), f64 gradient checks of every op and option, f32 against f64 over wide random
// inputs (the vectorised, multi-threaded f32 path), strided inputs, integer dtypes and errors.
//
// Tolerances are counted in unit roundoffs: u32 = 2^-24, u64 = 2^-53 (one correctly rounded
// operation has relative error ≤ u). Each op's budget is derived beside its entry in
// `budget()` from the number of roundings and the accuracy of the f32 functions in
// ops/cpu/unary_math.h (exp, log ≤ 1 ulp = 2u; tanh ≤ 2 ulp; sigmoid ≤ 3 ulp; Φ ≤ 8 ulp).
#include <limits>
#include <map>

#include "helpers.h"

using namespace lsf;

namespace {

constexpr double kU32 = 0x1p-24;
constexpr double kU64 = 0x1p-53;
// Results below FLT_MIN are subnormal: there a rounding costs up to 2^-150 absolute, not u
// relative. A few such roundings: 4 subnormal steps of absolute slack in every f32 check.
constexpr double kSubnormalSlack32 = 4 * 0x1p-149;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using UnaryFn = std::function<Tensor(const Tensor&)>;

// The op a fixture case (or a test) names: "exp", "pow_2.5", "clamp_min", ...
UnaryFn op_named(const std::string& name, const nlohmann::json& inputs = {}) {
  if (name == "neg") return [](const Tensor& x) { return neg(x); };
  if (name == "exp") return [](const Tensor& x) { return exp(x); };
  if (name == "log") return [](const Tensor& x) { return log(x); };
  if (name == "sqrt") return [](const Tensor& x) { return sqrt(x); };
  if (name == "rsqrt") return [](const Tensor& x) { return rsqrt(x); };
  if (name == "abs") return [](const Tensor& x) { return abs(x); };
  if (name == "tanh") return [](const Tensor& x) { return tanh(x); };
  if (name == "sigmoid") return [](const Tensor& x) { return sigmoid(x); };
  if (name == "relu") return [](const Tensor& x) { return relu(x); };
  if (name == "gelu" || name == "gelu_tail") return [](const Tensor& x) { return gelu(x); };
  if (name == "gelu_tanh") return [](const Tensor& x) { return gelu(x, GeluApproximation::Tanh); };
  if (name.rfind("pow_", 0) == 0) {
    double e = inputs.at("exponent").get<double>();
    return [e](const Tensor& x) { return pow(x, e); };
  }
  if (name.rfind("clamp_", 0) == 0) {
    auto bound = [&](const char* key) -> std::optional<double> {
      return inputs.at(key).is_null() ? std::nullopt : std::optional<double>(inputs.at(key).get<double>());
    };
    std::optional<double> lo = bound("min"), hi = bound("max");
    return [lo, hi](const Tensor& x) { return clamp(x, lo, hi); };
  }
  FAIL("unknown op " << name);
  return {};
}

// Error budget of one op in units of u (see the file comment): |got − ref| ≤ atol + rtol·|ref|
// with rtol = ky·u for y, and for dx = dy·g: rtol = kdx·u, atol = adx·u·max|dy| (the terms of g
// whose absolute, not relative, error is bounded: 1 − y² and 1 − y when y → ±1, the sums
// Φ + xφ and σ + 2x·σ'·u' that cross zero). The f32 numbers are derived below; in f64 the
// functions come from libm (≤ 2 ulp = 4u each), and 64 u covers every formula here.
struct Budget {
  double ky = 0, kdx = 0, adx = 0;
};

Budget budget(const std::string& name, DType dtype) {
  std::string op = name.substr(0, name.find('_'));
  if (name == "gelu_tanh") op = name;
  // Exact in every dtype: neg, abs, relu and clamp select or negate; dx is ±dy or 0.
  if (op == "neg" || op == "abs" || op == "relu" || op == "clamp") return {0, 0, 0};
  // f64: libm functions (≤ 2 ulp = 4u) in formulas of ≤ 6 steps on both sides, reference and
  // ours: 64u. (PyTorch's f64 GELU references have an extra absolute error, see check_case.)
  if (dtype == kF64) return {64, 64, 64};
  // f32; the +1 in each is the rounding of the f64 reference to f32.
  if (op == "pow") return {4, 6, 0};         // ≤ 3 roundings (or powf ≤ 2u); dx: + ·e, ·dy
  if (op == "exp") return {3, 5, 0};         // exp 2u + 1; dx = dy·y: + 1 + 1
  if (op == "log") return {3, 3, 0};         // log 2u + 1; dx = dy/x: 1 + 1
  if (op == "sqrt") return {2, 4, 0};        // IEEE sqrt 1 + 1; dx = dy/(2y): y 2, ÷ 1, + 1
  if (op == "rsqrt") return {3, 13, 0};      // 1/sqrt 2 + 1; dx = −½dy·y³: 3·3 + 3 + 1
  if (op == "tanh") return {5, 6, 10};       // tanh 4u + 1; 1 − y²: 2·|y|·5u absolute
  if (op == "sigmoid") return {7, 10, 8};    // σ 6u + 1; 1 − y: 7u absolute, ·y, ·dy
  if (op == "gelu") return {18, 4, 18};      // x·Φ: 16 + 1 + 1; Φ + xφ: Φ's 16u·Φ ≤ 16u absolute,
                                             //   xφ: e^{-x²/2} 2u + 3 roundings, ≤ 0.25 in size
  if (op == "gelu_tanh") return {42, 8, 48};  // σ(2v), v = √(2/π)(x + κx³) with 5 roundings:
                                              //   σ's relative sensitivity |2v|(1 − σ) ≤ 6.8 for
                                              //   x ≥ −3 → 5·6.8 + σ 6 + 2 ≈ 42; dx likewise
                                              //   for σ and σ' (absolute, sum crosses zero)
  FAIL("no budget for " << name);
  return {};
}

// Runs op on the case's inputs in `dtype`: value and gradient against the expected ones.
void check_case(const std::string& name, const nlohmann::json& c, DType dtype) {
  INFO("case " << name << " in " << dtype);
  const nlohmann::json& in = c.at("inputs");
  Tensor x = test::fixture_tensor(in.at("x")).to(dtype).requires_grad_(true);
  Tensor dy = test::fixture_tensor(in.at("dy")).to(dtype);
  // Rounding the f64 reference to the tested dtype gives inf where f32 overflows and
  // subnormals where it underflows, as the f32 kernel must.
  Tensor y_ref = test::fixture_tensor(c.at("expected").at("y")).to(dtype);
  Tensor dx_ref = test::fixture_tensor(c.at("expected").at("dx")).to(dtype);

  const double u = dtype == kF32 ? kU32 : kU64;
  const double floor = dtype == kF32 ? kSubnormalSlack32 : 0.0;
  Budget b = budget(name, dtype);
  double max_dy = 0, max_x = 1;
  for (double v : dy.to_vector<double>()) max_dy = std::max(max_dy, std::fabs(v));
  for (double v : x.to_vector<double>())
    if (std::isfinite(v)) max_x = std::max(max_x, std::fabs(v));
  // PyTorch's f64 GELUs (only) carry absolute error ≈ |x|·u from 1 + erf / 1 + tanh.
  double ref_abs = dtype == kF64 && name.rfind("gelu", 0) == 0 ? 64 * u * max_x : 0.0;

  Tensor y = op_named(name, in)(x);
  CHECK(y.dtype() == dtype);
  test::check_close(y, y_ref, floor + ref_abs, b.ky * u);
  y.backward(dy);
  test::check_close(x.grad(), dx_ref, floor + b.adx * u * max_dy + ref_abs * max_dy, b.kdx * u);
}

// A f64 leaf with the given values.
Tensor leaf(std::vector<double> values, const Shape& shape) {
  return tensor(values, shape).requires_grad_(true);
}

// n standard normal values, each moved at least `gap` away from every point in `avoid`.
std::vector<double> normal_values(int64_t n, uint64_t seed, double scale, const std::vector<double>& avoid,
                                  double gap) {
  Generator g(seed);
  std::vector<double> v = randn({n}, TensorOptions(kF64), &g).to_vector<double>();
  for (double& x : v) {
    x *= scale;
    for (double p : avoid)
      if (std::fabs(x - p) < gap) x = p + (x < p ? -gap : gap);
  }
  return v;
}

std::vector<double> positive_values(int64_t n, uint64_t seed) {
  std::vector<double> v = normal_values(n, seed, 1.0, {}, 0.0);
  for (double& x : v) x = std::fabs(x) + 0.3;
  return v;
}

}  // namespace

TEST_CASE("unary ops match PyTorch's values and gradients, edge values included", "[unary]") {
  nlohmann::json fixture = test::load_fixture("unary");
  REQUIRE(fixture.size() >= 20);
  for (const auto& [name, c] : fixture.items()) {
    check_case(name, c, kF64);
    check_case(name, c, kF32);
  }
}

TEST_CASE("unary ops pass f64 gradient checks", "[unary]") {
  const Shape shape{3, 4};
  // Away from kinks (0 for abs/relu, the clamp bounds) and on the domain of log/sqrt/rsqrt and
  // of fractional powers.
  auto general = [&](uint64_t seed) { return leaf(normal_values(12, seed, 1.5, {0.0}, 0.05), shape); };
  auto positive = [&](uint64_t seed) { return leaf(positive_values(12, seed), shape); };
  struct Case {
    const char* name;
    UnaryFn fn;
    bool positive_only;
  };
  std::vector<Case> cases = {
      {"neg", [](const Tensor& x) { return neg(x); }, false},
      {"exp", [](const Tensor& x) { return exp(x); }, false},
      {"log", [](const Tensor& x) { return log(x); }, true},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, true},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, true},
      {"abs", [](const Tensor& x) { return abs(x); }, false},
      {"tanh", [](const Tensor& x) { return tanh(x); }, false},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, false},
      {"relu", [](const Tensor& x) { return relu(x); }, false},
      {"gelu", [](const Tensor& x) { return gelu(x); }, false},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, GeluApproximation::Tanh); }, false},
      {"pow 0", [](const Tensor& x) { return pow(x, 0.0); }, false},
      {"pow 1", [](const Tensor& x) { return pow(x, 1.0); }, false},
      {"pow 2", [](const Tensor& x) { return pow(x, 2.0); }, false},
      {"pow 3", [](const Tensor& x) { return pow(x, 3.0); }, false},
      {"pow -1", [](const Tensor& x) { return pow(x, -1.0); }, false},
      {"pow -2", [](const Tensor& x) { return pow(x, -2.0); }, false},
      {"pow 0.5", [](const Tensor& x) { return pow(x, 0.5); }, true},
      {"pow -0.5", [](const Tensor& x) { return pow(x, -0.5); }, true},
      {"pow 2.5", [](const Tensor& x) { return pow(x, 2.5); }, true},
      {"pow -1.7", [](const Tensor& x) { return pow(x, -1.7); }, true},
      {"pow 4 (integral, general path)", [](const Tensor& x) { return pow(x, 4.0); }, false},
  };
  uint64_t seed = 10;
  for (const Case& c : cases) {
    INFO("op " << c.name);
    Tensor x = c.positive_only ? positive(++seed) : general(++seed);
    auto result = testing::gradcheck([&](const TensorList& in) { return c.fn(in[0]); }, {x});
    INFO(result.message);
    CHECK(result.ok);
  }
  // clamp: every bound combination; inputs kept 0.05 away from the bounds.
  std::vector<std::pair<std::optional<double>, std::optional<double>>> bounds = {
      {-0.5, 1.0}, {0.3, std::nullopt}, {std::nullopt, -0.2}, {1.0, -1.0}};
  for (auto [lo, hi] : bounds) {
    INFO("clamp min " << lo.value_or(-kInf) << " max " << hi.value_or(kInf));
    std::vector<double> avoid;
    if (lo) avoid.push_back(*lo);
    if (hi) avoid.push_back(*hi);
    Tensor x = leaf(normal_values(12, ++seed, 1.5, avoid, 0.05), shape);
    auto result = testing::gradcheck([&](const TensorList& in) { return clamp(in[0], lo, hi); }, {x});
    INFO(result.message);
    CHECK(result.ok);
  }
}

TEST_CASE("gelu and sigmoid pass a gradient check on a large tensor (random projections)", "[unary]") {
  Tensor x = test::grad_input({64, 600}, 77);  // 38400² Jacobian entries: projections u^T J v
  for (auto approximate : {GeluApproximation::None, GeluApproximation::Tanh}) {
    auto result = testing::gradcheck([&](const TensorList& in) { return gelu(in[0], approximate); }, {x});
    INFO(result.message);
    CHECK(result.ok);
  }
  auto result = testing::gradcheck([](const TensorList& in) { return sigmoid(in[0]); }, {x});
  INFO(result.message);
  CHECK(result.ok);
}

TEST_CASE("f32 kernels agree with f64 over wide random inputs, forward and backward", "[unary]") {
  // 100000 elements: the contiguous, vectorised, multi-threaded f32 path. Scales chosen per op
  // to reach the saturated / underflowing tails (|x| up to ~40 for exp/sigmoid/tanh, ~15 for
  // gelu) while staying where each budget's derivation holds (gelu_tanh: x ≥ −3 via |v| ≤ 6.8).
  struct Case {
    const char* name;
    double scale;
    bool positive;
    double clip_below;
    double clip_above = kInf;  // exp: beyond ln(FLT_MAX) ≈ 88.7 the f32 y is inf and so is dy·y
  };
  std::vector<Case> cases = {
      {"exp", 30, false, -kInf, 88.0},     {"log", 5, true, -kInf},       {"sqrt", 5, true, -kInf},
      {"rsqrt", 5, true, -kInf},   {"tanh", 6, false, -kInf},     {"sigmoid", 25, false, -kInf},
      {"gelu", 5, false, -kInf},     {"gelu_tanh", 2, false, -3.0}, {"relu", 3, false, -kInf},
      {"abs", 3, false, -kInf},      {"neg", 3, false, -kInf},
  };
  const int64_t n = 100000;
  uint64_t seed = 500;
  for (const Case& c : cases) {
    INFO("op " << c.name);
    std::vector<double> xs = normal_values(n, ++seed, c.scale, {}, 0.0);
    for (double& v : xs) {
      if (c.positive) v = std::exp(v);  // log-uniform-ish magnitudes, e^±(4·scale)
      v = std::min(std::max(v, c.clip_below), c.clip_above);
      v = double(float(v));  // the same values in both dtypes
    }
    std::vector<double> dys = normal_values(n, ++seed, 1.0, {}, 0.0);
    for (double& v : dys) v = double(float(v));
    UnaryFn fn = op_named(c.name);
    Tensor dy32 = tensor(dys, {n}).to(kF32), dy64 = tensor(dys, {n});
    Tensor x32 = tensor(xs, {n}).to(kF32).requires_grad_(true);
    Tensor x64 = tensor(xs, {n}).requires_grad_(true);
    Tensor y32 = fn(x32), y64 = fn(x64);
    y32.backward(dy32);
    y64.backward(dy64);
    // The f64 results are accurate to ~64 u64: they stand in for the exact values, rounded to
    // f32 as in the fixture test, with the same f32 budget.
    Budget b = budget(c.name, kF32);
    test::check_close(y32, y64.to(kF32), kSubnormalSlack32, b.ky * kU32);
    test::check_close(x32.grad(), x64.grad().to(kF32), kSubnormalSlack32 + b.adx * kU32 * 5.0, b.kdx * kU32);
    // (5.0 bounds max|dy| for 100000 standard normal draws: P(|z| > 5) · 1e5 ≈ 0.06.)
  }
}

TEST_CASE("gelu keeps relative accuracy in the lower tail in f32", "[unary]") {
  // Φ(x) for x = −13 is ~6e-39 (subnormal in f32); 1 + erf(x/√2) would be 0 from x ≈ −5.4.
  Tensor x = tensor(std::vector<float>{-5.5f, -8.f, -10.f, -12.f});
  Tensor y = gelu(x);
  // mpmath: x·Φ(x). Budget 18 u32 as in budget("gelu").
  test::check_close(y, {-1.0444259698173718e-07, -4.976768459417427e-15, -7.619853024160526e-23,
                        -2.1317785344932147e-32},
                    kSubnormalSlack32, 18 * kU32);
}

TEST_CASE("unary ops read strided inputs and gradients like contiguous ones", "[unary]") {
  Generator g(3);
  Tensor base = randn({40, 2000}, TensorOptions(kF32), &g);  // the view has 40000 elements: the
  Tensor view = base.t().slice(0, 0, 2000, 2);               // parallel path; [1000, 40], strides {2, 2000}
  REQUIRE_FALSE(view.is_contiguous());
  for (const char* name : {"gelu", "gelu_tanh", "tanh", "sigmoid", "exp", "relu", "abs", "neg"}) {
    INFO("op " << name);
    UnaryFn fn = op_named(name);
    Tensor strided_x = view.detach().requires_grad_(true);
    Tensor dense_x = view.contiguous().detach().requires_grad_(true);
    Tensor dy = randn(view.shape(), TensorOptions(kF32), &g);
    Tensor ys = fn(strided_x), yd = fn(dense_x);
    CHECK(ys.is_contiguous());
    test::check_close(ys, yd, 0, 0);  // the same element functions: bitwise equal
    ys.backward(dy.t().contiguous().t());  // a non-contiguous incoming gradient
    yd.backward(dy);
    test::check_close(strided_x.grad(), dense_x.grad(), 0, 0);
  }
  // Integer ops on a strided view as well.
  Tensor i = arange(12).view({3, 4}).t();
  test::check_equal<int64_t>(clamp(neg(i), -6, std::nullopt), {4, 3}, {0, -4, -6, -1, -5, -6, -2, -6, -6, -3, -6, -6});
}

TEST_CASE("PyTorch's conventions at the non-differentiable points", "[unary]") {
  Tensor x = leaf({-1.0, 0.0, -0.0, 2.0}, {4});
  relu(x).backward(ones({4}, kF64));
  test::check_equal<double>(x.grad(), {4}, {0, 0, 0, 1});  // relu'(0) = 0
  Tensor a = leaf({-1.0, 0.0, 2.0}, {3});
  abs(a).backward(ones({3}, kF64));
  test::check_equal<double>(a.grad(), {3}, {-1, 0, 1});  // sign(x), 0 at 0
  Tensor c = leaf({-2.0, -1.0, 0.0, 1.0, 1.5}, {5});
  clamp(c, -1.0, 1.0).backward(ones({5}, kF64));
  test::check_equal<double>(c.grad(), {5}, {0, 1, 1, 1, 0});  // bounds included
  Tensor p = leaf({0.0, 2.0, kNaN}, {3});
  pow(p, 0.0).backward(ones({3}, kF64));
  test::check_equal<double>(p.grad(), {3}, {0, 0, 0});  // zeros, even at 0 and NaN
  // Large |x| stays finite and saturates exactly.
  Tensor big = tensor(std::vector<float>{-1000.f, 1000.f});
  test::check_equal<float>(sigmoid(big), {2}, {0.f, 1.f});
  test::check_equal<float>(tanh(big), {2}, {-1.f, 1.f});
}

TEST_CASE("neg, abs and clamp work on integer tensors", "[unary]") {
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  Tensor i32 = tensor(std::vector<int32_t>{kMin32, -5, 0, 7});
  test::check_equal<int32_t>(neg(i32), {4}, {kMin32, 5, 0, -7});  // wraps, as in PyTorch
  test::check_equal<int32_t>(abs(i32), {4}, {kMin32, 5, 0, 7});
  test::check_equal<int32_t>(clamp(i32, -3, 3), {4}, {-3, -3, 0, 3});
  Tensor i64 = tensor(std::vector<int64_t>{-9, 4, 12});
  test::check_equal<int64_t>(neg(i64), {3}, {9, -4, -12});
  test::check_equal<int64_t>(abs(i64), {3}, {9, 4, 12});
  test::check_equal<int64_t>(clamp(i64, std::nullopt, 5), {3}, {-9, 4, 5});
  test::check_equal<int64_t>(clamp(i64, 1e30, std::nullopt), {3},  // saturates at the type's range
                             {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int64_t>::max()});
  Tensor u8 = tensor(std::vector<uint8_t>{0, 3, 250});
  test::check_equal<uint8_t>(neg(u8), {3}, {0, 253, 6});
  test::check_equal<uint8_t>(clamp(u8, 2, 100), {3}, {2, 3, 100});
  CHECK(clamp(i32, 0, std::nullopt).dtype() == kI32);
  CHECK_FALSE(neg(i64).requires_grad());
}

TEST_CASE("unary ops reject bad input with the op and the dtype or shape", "[unary]") {
  Tensor i64 = tensor(std::vector<int64_t>{1, 2, 3}, {3});
  CHECK_THROWS_AS(exp(i64), Error);
  CHECK_THROWS_WITH(exp(i64), Catch::Contains("exp") && Catch::Contains("i64") && Catch::Contains("{3}"));
  CHECK_THROWS_WITH(gelu(i64), Catch::Contains("gelu") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(pow(i64, 2.0), Catch::Contains("pow") && Catch::Contains("i64"));
  Tensor bf16 = ones({2, 3}).to(kBF16);
  CHECK_THROWS_WITH(sigmoid(bf16), Catch::Contains("sigmoid") && Catch::Contains("bf16") &&
                                       Catch::Contains("to(kF32)"));
  CHECK_THROWS_WITH(abs(ones({2}).to(kF16)), Catch::Contains("abs") && Catch::Contains("f16"));
  Tensor b = tensor(std::vector<bool>{true, false});
  CHECK_THROWS_WITH(neg(b), Catch::Contains("neg") && Catch::Contains("bool"));
  CHECK_THROWS_WITH(relu(Tensor()), Catch::Contains("relu") && Catch::Contains("undefined"));
  CHECK_THROWS_WITH(clamp(Tensor(), 0, 1), Catch::Contains("clamp") && Catch::Contains("undefined"));
  Tensor f = ones({2, 3});
  CHECK_THROWS_WITH(clamp(f, std::nullopt, std::nullopt), Catch::Contains("clamp") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(clamp(f, kNaN, 1.0), Catch::Contains("clamp") && Catch::Contains("NaN"));
  CHECK_THROWS_WITH(clamp(tensor(std::vector<int32_t>{1, 2}), 0.5, std::nullopt),
                    Catch::Contains("clamp") && Catch::Contains("0.5") && Catch::Contains("i32"));
  CHECK_THROWS_WITH(pow(f, kNaN), Catch::Contains("pow") && Catch::Contains("NaN"));
}

TEST_CASE("backward sees in-place writes to the tensor it saved", "[unary]") {
  // gelu saves its input; tanh saves its output.
  Tensor x = leaf({0.5, -1.0}, {2});
  Tensor h = mul(x, 1.0);
  Tensor y = gelu(h);
  {
    NoGradGuard g;
    h.fill_(0.0);
  }
  CHECK_THROWS_WITH(sum(y).backward(), Catch::Contains("modified by an in-place operation"));
  Tensor x2 = leaf({0.5, -1.0}, {2});
  Tensor t = tanh(x2);
  Tensor out = mul(t, 1.0);
  {
    NoGradGuard g;
    t.fill_(0.0);
  }
  CHECK_THROWS_WITH(sum(out).backward(), Catch::Contains("modified by an in-place operation"));
}
