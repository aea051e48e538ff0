// nn layers and initialisers: the init functions' fans, gains, bounds and moments (checked
// against statistical bounds derived below); Linear, LayerNorm, Embedding, Mlp against PyTorch
// (tests/fixtures/layers.json) with their default initialisation, names and printouts; Dropout
// in train and eval mode; the activation modules; Sequential and ModuleList; f64 gradient
// checks of every layer with respect to its input and its parameters; argument errors.
#include <algorithm>
#include <sstream>

#include "helpers.h"
#include "lsformer/models/nn/activation.h"
#include "lsformer/models/nn/dropout.h"
#include "lsformer/models/nn/embedding.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/models/nn/layer_norm.h"
#include "lsformer/models/nn/linear.h"
#include "lsformer/models/nn/mlp.h"
#include "lsformer/models/nn/module_list.h"
#include "lsformer/models/nn/sequential.h"

using namespace lsf;
using testing::gradcheck;
namespace init = lsf::nn::init;

namespace {

const nlohmann::json& fixture() {
  static const nlohmann::json j = test::load_fixture("layers");
  return j;
}

// Sample moments of n i.i.d. draws against the distribution's: the sample mean has standard
// deviation √(var/n), and the mean of (x − μ)² has √((μ₄ − var²)/n), μ₄ the fourth central
// moment. Both must lie within k = 5 standard deviations (a 6·10⁻⁷ two-sided chance per check
// for a sound sampler; the seeds are fixed, so a pass is reproducible). Rounding the draws to
// f32 moves each moment by ~1e−7 relative, far inside these bounds for n ≤ 10⁶.
void check_moments(const Tensor& t, double mean, double var, double mu4) {
  const auto v = t.to_vector<double>();
  const double n = double(v.size());
  double s1 = 0, s2 = 0;
  for (double x : v) {
    s1 += x;
    s2 += (x - mean) * (x - mean);
  }
  const double m = s1 / n, m2 = s2 / n;
  INFO("n " << n << ": mean " << m << " (expected " << mean << "), second central moment " << m2 << " (expected "
            << var << ")");
  CHECK(std::fabs(m - mean) <= 5 * std::sqrt(var / n));
  CHECK(std::fabs(m2 - var) <= 5 * std::sqrt((mu4 - var * var) / n));
}
// Moments of U(−b, b) and N(0, σ²).
void check_uniform(const Tensor& t, double b) { check_moments(t, 0.0, b * b / 3, b * b * b * b / 5); }
void check_normal(const Tensor& t, double mean, double sd) { check_moments(t, mean, sd * sd, 3 * std::pow(sd, 4)); }

void check_bounds(const Tensor& t, double lo, double hi) {
  const auto v = t.to_vector<double>();
  const auto [mn, mx] = std::minmax_element(v.begin(), v.end());
  INFO("min " << *mn << ", max " << *mx << ", allowed [" << lo << ", " << hi << "]");
  CHECK(*mn >= lo);
  CHECK(*mx <= hi);
}

double phi(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }
double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Moments of N(mean, sd²) truncated to [a, b], by Simpson's rule on 20000 intervals (error
// ~1e−15, negligible against the sampling bounds).
struct Truncated {
  double mean, var, mu4;
};
Truncated truncated_moments(double mean, double sd, double a, double b) {
  const int n = 20000;
  const double h = (b - a) / n;
  double m0 = 0, m1 = 0;
  auto pdf = [&](double x) { return phi((x - mean) / sd); };
  for (int i = 0; i <= n; ++i) {
    const double x = a + i * h, w = (i == 0 || i == n) ? 1 : (i % 2 ? 4 : 2);
    m0 += w * pdf(x);
    m1 += w * pdf(x) * x;
  }
  const double mu = m1 / m0;
  double m2 = 0, m4 = 0;
  for (int i = 0; i <= n; ++i) {
    const double x = a + i * h, w = (i == 0 || i == n) ? 1 : (i % 2 ? 4 : 2);
    m2 += w * pdf(x) * (x - mu) * (x - mu);
    m4 += w * pdf(x) * std::pow(x - mu, 4);
  }
  return {mu, m2 / m0, m4 / m0};
}

std::vector<std::string> names_of(const NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

std::map<std::string, Tensor> state_from(const nlohmann::json& c, const std::vector<std::string>& keys,
                                         DType dtype) {
  std::map<std::string, Tensor> state;
  for (const auto& k : keys) state[k] = test::fixture_tensor(c[k]).to(dtype);
  return state;
}

template <typename F>
void check_grad(F&& fn, const TensorList& inputs) {
  auto r = gradcheck([&](const TensorList& in) { return fn(in); }, inputs);
  INFO(r.message);
  CHECK(r.ok);
}

}  // namespace

// ---- initialisers ------------------------------------------------------------------------------

TEST_CASE("init: fans and gains follow PyTorch", "[layers]") {
  auto f = init::calculate_fan_in_and_fan_out(zeros({4, 6}));
  CHECK(f.fan_in == 6);
  CHECK(f.fan_out == 4);
  f = init::calculate_fan_in_and_fan_out(zeros({8, 3, 3, 2}));  // conv OIHW: receptive field 3·2
  CHECK(f.fan_in == 18);
  CHECK(f.fan_out == 48);
  CHECK_THROWS_WITH(init::calculate_fan_in_and_fan_out(zeros({5})),
                    Catch::Contains("calculate_fan_in_and_fan_out") && Catch::Contains("{5}"));
  CHECK_THROWS_WITH(init::xavier_uniform_(zeros({5})), Catch::Contains("{5}"));
  using NL = init::Nonlinearity;
  CHECK(init::calculate_gain(NL::Linear) == 1.0);
  CHECK(init::calculate_gain(NL::Conv) == 1.0);
  CHECK(init::calculate_gain(NL::Sigmoid) == 1.0);
  CHECK(init::calculate_gain(NL::Tanh) == 5.0 / 3.0);
  CHECK(init::calculate_gain(NL::ReLU) == std::sqrt(2.0));
  CHECK(init::calculate_gain(NL::SELU) == 0.75);
  CHECK(init::calculate_gain(NL::LeakyReLU) == std::sqrt(2.0 / (1.0 + 0.01 * 0.01)));
  CHECK(init::calculate_gain(NL::LeakyReLU, std::sqrt(5.0)) == Approx(std::sqrt(1.0 / 3.0)).epsilon(1e-15));
}

TEST_CASE("init: uniform_, normal_ and constants", "[layers]") {
  Generator gen(11);
  Tensor u = empty({200000}, kF64);
  init::uniform_(u, -2.0, 3.0, &gen);
  check_bounds(u, -2.0, 3.0);
  // U(a, b): mean (a+b)/2, variance (b−a)²/12, fourth central moment (b−a)⁴/80.
  check_moments(u, 0.5, 25.0 / 12, 625.0 / 80);
  Tensor n = empty({200000});
  init::normal_(n, 1.0, 2.0, &gen);
  check_normal(n, 1.0, 2.0);

  // Same generator state, same values; the default generator is used without one.
  Generator g1(5), g2(5);
  Tensor a = empty({64}), b = empty({64});
  init::normal_(a, 0, 1, &g1);
  init::normal_(b, 0, 1, &g2);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  manual_seed(5);
  Tensor c = empty({64});
  init::normal_(c);
  CHECK(c.to_vector<float>() == a.to_vector<float>());

  // Constants write into parameters that require grad while grad mode is on.
  Tensor p = empty({2, 3}).requires_grad_(true);
  init::constant_(p, 2.5);
  test::check_equal<float>(p, {2, 3}, std::vector<float>(6, 2.5f));
  init::zeros_(p);
  test::check_equal<float>(p, {2, 3}, std::vector<float>(6, 0.0f));
  init::ones_(p.t());  // a non-contiguous view
  test::check_equal<float>(p, {2, 3}, std::vector<float>(6, 1.0f));
  CHECK(p.requires_grad());
  CHECK_THROWS_WITH(init::normal_(zeros({3}, kI64)), Catch::Contains("normal_") && Catch::Contains("i64"));
}

TEST_CASE("init: trunc_normal_ is a truncated normal within its bounds", "[layers]") {
  struct Case {
    double mean, sd, a, b;
    DType dtype;
  };
  // Standard, shifted and asymmetric, and timm's std = 0.02 with the absolute default bounds
  // (±2 = ±100σ: no truncation in practice).
  for (const Case& k : {Case{0, 1, -2, 2, kF32}, Case{0.5, 2, -1, 3, kF64}, Case{0, 0.02, -2, 2, kF32},
                        Case{1, 1, 0.5, 4, kF64}}) {
    INFO("mean " << k.mean << " std " << k.sd << " [" << k.a << ", " << k.b << "] " << k.dtype);
    Generator gen(21);
    const int64_t n = 200000;
    Tensor t = empty({n}, k.dtype).requires_grad_(true);
    init::trunc_normal_(t, k.mean, k.sd, k.a, k.b, &gen);
    check_bounds(t, k.a, k.b);
    const Truncated m = truncated_moments(k.mean, k.sd, std::max(k.a, k.mean - 12 * k.sd),
                                          std::min(k.b, k.mean + 12 * k.sd));
    check_moments(t, m.mean, m.var, m.mu4);
    // Kolmogorov–Smirnov distance to the truncated CDF: below 1.95/√n at the 0.1% level.
    std::vector<double> v = t.to_vector<double>();
    std::sort(v.begin(), v.end());
    const double lo = Phi((k.a - k.mean) / k.sd), hi = Phi((k.b - k.mean) / k.sd);
    double d = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const double cdf = (Phi((v[i] - k.mean) / k.sd) - lo) / (hi - lo);
      d = std::max({d, std::fabs(cdf - double(i) / n), std::fabs(cdf - double(i + 1) / n)});
    }
    // f32 draws are rounded to 24 bits: the CDF moves by at most pdf·|x|·2⁻²⁴ ≈ 1e−7, negligible.
    CHECK(d <= 1.95 / std::sqrt(double(n)));
  }
  // Reproducible from the generator; a non-contiguous view is filled in place.
  Generator g1(4), g2(4);
  Tensor a = empty({3, 5}), b = empty({5, 3});
  init::trunc_normal_(a, 0, 1, -2, 2, &g1);
  init::trunc_normal_(b.t(), 0, 1, -2, 2, &g2);
  CHECK(a.to_vector<float>() == b.t().contiguous().to_vector<float>());

  using Catch::Contains;
  CHECK_THROWS_WITH(init::trunc_normal_(empty({4}), 0, 0), Contains("trunc_normal_") && Contains("std"));
  CHECK_THROWS_WITH(init::trunc_normal_(empty({4}), 0, 1, 2, -2), Contains("trunc_normal_"));
  CHECK_THROWS_WITH(init::trunc_normal_(empty({4}), 10, 1, -2, 2), Contains("trunc_normal_") && Contains("mean 10"));
}

TEST_CASE("init: xavier and kaiming bounds and moments", "[layers]") {
  Generator gen(31);
  // xavier_uniform_: bound = gain·√(6/(fan_in + fan_out)) = 2·√(6/800) for [300, 500].
  Tensor w = empty({300, 500});
  init::xavier_uniform_(w, /*gain=*/2.0, &gen);
  const double xb = 2.0 * std::sqrt(6.0 / 800.0);
  check_bounds(w, -xb, xb);
  check_uniform(w, xb);
  // xavier_normal_: std = gain·√(2/(fan_in + fan_out)).
  init::xavier_normal_(w, 1.0, &gen);
  check_normal(w, 0.0, std::sqrt(2.0 / 800.0));

  // kaiming_uniform_ on a conv weight [64, 16, 3, 3]: fan_in 144, fan_out 576, gain √2 (a = 0).
  Tensor k = empty({64, 16, 3, 3}, kF64);
  init::kaiming_uniform_(k, 0.0, init::FanMode::FanIn, init::Nonlinearity::LeakyReLU, &gen);
  const double kb = std::sqrt(2.0) * std::sqrt(3.0 / 144.0);
  check_bounds(k, -kb, kb);
  check_uniform(k, kb);
  init::kaiming_uniform_(k, 0.0, init::FanMode::FanOut, init::Nonlinearity::ReLU, &gen);
  check_bounds(k, -std::sqrt(6.0 / 576.0), std::sqrt(6.0 / 576.0));
  // PyTorch's Linear/Conv default: a = √5 gives bound 1/√fan_in.
  init::kaiming_uniform_(k, std::sqrt(5.0), init::FanMode::FanIn, init::Nonlinearity::LeakyReLU, &gen);
  check_bounds(k, -1.0 / 12.0, 1.0 / 12.0);
  check_uniform(k, 1.0 / 12.0);
  init::kaiming_normal_(k, 0.0, init::FanMode::FanIn, init::Nonlinearity::ReLU, &gen);
  check_normal(k, 0.0, std::sqrt(2.0 / 144.0));

  // Zero-element tensors are left alone (PyTorch warns and does nothing).
  Tensor none = empty({0, 5});
  CHECK_NOTHROW(init::xavier_uniform_(none));
  CHECK_NOTHROW(init::kaiming_uniform_(none));
  CHECK_NOTHROW(init::trunc_normal_(none));
}

// ---- Linear --------------------------------------------------------------------------------------

TEST_CASE("Linear matches PyTorch exactly and has its names and default init", "[layers]") {
  // Dyadic fixture values (x, g: k/4; weight k/8; bias k/2): every product and partial sum is
  // exact in f32 and f64, so y, dx, dweight and dbias must match with tolerance 0.
  for (const char* name : {"linear", "linear_nobias", "linear_vector"}) {
    const auto& c = fixture()[name];
    const bool has_bias = c.contains("bias");
    const Tensor w0 = test::fixture_tensor(c["weight"]);
    for (DType dtype : {kF64, kF32}) {
      INFO(name << " " << dtype);
      nn::Linear lin(w0.size(1), w0.size(0), has_bias);
      lin.to(dtype);
      lin.load_state_dict(state_from(c, has_bias ? std::vector<std::string>{"weight", "bias"}
                                                 : std::vector<std::string>{"weight"},
                                     dtype));
      Tensor x = test::fixture_tensor(c["x"]).to(dtype).requires_grad_(true);
      Tensor y = lin.forward(x);
      test::check_close(y, test::fixture_tensor(c["y"]), 0, 0);
      y.backward(test::fixture_tensor(c["g"]).to(dtype));
      test::check_close(x.grad(), test::fixture_tensor(c["dx"]), 0, 0);
      test::check_close(lin.weight.grad(), test::fixture_tensor(c["dweight"]), 0, 0);
      if (has_bias) test::check_close(lin.bias.grad(), test::fixture_tensor(c["dbias"]), 0, 0);
    }
  }

  manual_seed(1);
  nn::Linear lin(400, 300);
  CHECK(names_of(lin.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(lin.weight.shape() == Shape{300, 400});
  CHECK(lin.bias.shape() == Shape{300});
  CHECK(lin.weight.requires_grad());
  CHECK(lin.parameter_count() == 400 * 300 + 300);
  CHECK(lin.extra_repr() == "in_features=400, out_features=300, bias=true");
  CHECK(nn::Linear(3, 2, false).extra_repr() == "in_features=3, out_features=2, bias=false");
  // Default init: weight and bias U(±1/√in_features) = U(±1/20).
  check_bounds(lin.weight, -0.05, 0.05);
  check_uniform(lin.weight, 0.05);
  check_bounds(lin.bias, -0.05, 0.05);
  // reset_parameters draws from the given generator.
  Generator g1(3), g2(3);
  nn::Linear l1(4, 3), l2(4, 3);
  l1.reset_parameters(&g1);
  l2.reset_parameters(&g2);
  CHECK(l1.weight.to_vector<float>() == l2.weight.to_vector<float>());
  CHECK(l1.bias.to_vector<float>() == l2.bias.to_vector<float>());

  CHECK_THROWS_WITH(nn::Linear(5, 4).forward(zeros({2, 3})),
                    Catch::Contains("Linear") && Catch::Contains("{2, 3}") && Catch::Contains("in_features=5"));
}

TEST_CASE("Linear passes f64 gradcheck for input, weight and bias", "[layers]") {
  nn::Linear lin(5, 3);
  lin.to(kF64);
  Tensor x = test::grad_input({2, 4, 5}, 1);
  check_grad([&](const TensorList& in) { return lin.forward(in[0]); }, {x, lin.weight, lin.bias});
  check_grad([&](const TensorList& in) { return lin.forward(in[0]); }, {test::grad_input({5}, 2), lin.weight});
  nn::Linear nobias(4, 2, false);
  nobias.to(kF64);
  check_grad([&](const TensorList& in) { return nobias.forward(in[0]); }, {test::grad_input({3, 4}, 3), nobias.weight});
}

// ---- LayerNorm -------------------------------------------------------------------------------------

TEST_CASE("LayerNorm matches PyTorch and has its names and default init", "[layers]") {
  const auto& c = fixture()["layer_norm"];
  for (DType dtype : {kF64, kF32}) {
    INFO(dtype);
    nn::LayerNorm ln(Shape{2, 3});
    ln.to(dtype);
    ln.load_state_dict(state_from(c, {"weight", "bias"}, dtype));
    Tensor x = test::fixture_tensor(c["x"]).to(dtype).requires_grad_(true);
    Tensor y = ln.forward(x);
    // Rows of n = 6: mean and variance sums carry ≤ n·u relative error, rstd one more u, the
    // normalisation and affine a few u; inputs rounded to dtype add ≤ u·|x|·rstd·|w| each. All
    // values here are O(1) (standard normal data), so atol = rtol = 64·n·u bounds every term,
    // u = 2⁻⁵³ (f64) or 2⁻²⁴ (f32). The gradients combine the same quantities with g (O(1)).
    const double u = dtype == kF64 ? 0x1p-53 : 0x1p-24, tol = 64 * 6 * u;
    test::check_close(y, test::fixture_tensor(c["y"]), tol, tol);
    y.backward(test::fixture_tensor(c["g"]).to(dtype));
    test::check_close(x.grad(), test::fixture_tensor(c["dx"]), tol, tol);
    test::check_close(ln.weight.grad(), test::fixture_tensor(c["dweight"]), tol, tol);
    test::check_close(ln.bias.grad(), test::fixture_tensor(c["dbias"]), tol, tol);
  }
  nn::LayerNorm ln(8);
  CHECK(names_of(ln.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  test::check_equal<float>(ln.weight, {8}, std::vector<float>(8, 1.0f));
  test::check_equal<float>(ln.bias, {8}, std::vector<float>(8, 0.0f));
  CHECK(ln.extra_repr() == "normalized_shape={8}, eps=1e-05, elementwise_affine=true");
  nn::LayerNorm plain(Shape{2, 8}, 1e-6, false);
  CHECK(plain.named_parameters().empty());
  CHECK(plain.extra_repr() == "normalized_shape={2, 8}, eps=1e-06, elementwise_affine=false");
  CHECK_THROWS_WITH(ln.forward(zeros({3, 7})), Catch::Contains("layer_norm") && Catch::Contains("{3, 7}"));
  CHECK_THROWS_WITH(nn::LayerNorm(Shape{}), Catch::Contains("LayerNorm"));
}

TEST_CASE("LayerNorm passes f64 gradcheck for input, weight and bias", "[layers]") {
  nn::LayerNorm ln(Shape{2, 3});
  ln.to(kF64);
  {
    NoGradGuard g;  // non-trivial affine parameters
    ln.weight.copy_(randn({2, 3}, kF64));
    ln.bias.copy_(randn({2, 3}, kF64));
  }
  check_grad([&](const TensorList& in) { return ln.forward(in[0]); }, {test::grad_input({4, 2, 3}, 5), ln.weight, ln.bias});
  nn::LayerNorm plain(5, 1e-5, false);
  plain.to(kF64);
  check_grad([&](const TensorList& in) { return plain.forward(in[0]); }, {test::grad_input({3, 5}, 6)});
}

// ---- Embedding --------------------------------------------------------------------------------------

TEST_CASE("Embedding matches PyTorch, N(0, 1) init with a zero padding row", "[layers]") {
  const auto& c = fixture()["embedding"];
  const Tensor g = test::fixture_tensor(c["g"]);
  double max_g = 0;
  for (double v : g.to_vector<double>()) max_g = std::max(max_g, std::fabs(v));
  for (DType dtype : {kF64, kF32}) {
    INFO(dtype);
    nn::Embedding emb(5, 3, c["padding_idx"].get<int64_t>());
    emb.to(dtype);
    emb.load_state_dict(state_from(c, {"weight"}, dtype));
    Tensor y = emb.forward(test::fixture_tensor(c["ids"]));
    test::check_close(y, test::fixture_tensor(c["y"]), 0, 0);  // a gather copies exactly
    y.backward(g.to(dtype));
    // Each row sums ≤ 2 values of g (id 4 occurs twice): exact in f64 up to one rounding of the
    // sum (as PyTorch's); in f32, g's rounding (u each) and the sum's: ≤ 3u·2·max|g|, u = 2⁻²⁴.
    const double tol = dtype == kF64 ? 0x1p-53 * 2 * max_g : 3 * 0x1p-24 * 2 * max_g;
    test::check_close(emb.weight.grad(), test::fixture_tensor(c["dweight"]), tol, 0);
  }
  manual_seed(2);
  nn::Embedding emb(1000, 64, /*padding_idx=*/-1);
  CHECK(emb.padding_idx() == 999);
  CHECK(names_of(emb.named_parameters()) == std::vector<std::string>{"weight"});
  CHECK(emb.weight.shape() == Shape{1000, 64});
  CHECK(emb.extra_repr() == "1000, 64, padding_idx=999");
  test::check_equal<float>(emb.weight.select(0, 999), {64}, std::vector<float>(64, 0.0f));
  check_normal(emb.weight.narrow(0, 0, 999), 0.0, 1.0);
  CHECK(nn::Embedding(4, 2).extra_repr() == "4, 2");
  CHECK_THROWS_WITH(nn::Embedding(10, 4, 10), Catch::Contains("Embedding") && Catch::Contains("padding_idx 10"));
  CHECK_THROWS_WITH(nn::Embedding(10, 4, -11), Catch::Contains("Embedding") && Catch::Contains("padding_idx -11"));
  CHECK_THROWS_WITH(nn::Embedding(4, 2).forward(tensor(std::vector<int64_t>{4})), Catch::Contains("4"));
}

TEST_CASE("Embedding passes f64 gradcheck for its weight", "[layers]") {
  nn::Embedding emb(6, 3, /*padding_idx=*/5);  // the ids below never use the padding row
  emb.to(kF64);
  Tensor ids = tensor(std::vector<int64_t>{0, 3, 3, 1, 4, 2}, {2, 3});
  check_grad([&](const TensorList&) { return emb.forward(ids); }, {emb.weight});
}

// ---- Dropout and activations -------------------------------------------------------------------------

TEST_CASE("Dropout drops in training mode and is the identity in eval mode", "[layers]") {
  Generator gen(8);
  nn::Dropout drop(0.3, &gen);
  CHECK(drop.extra_repr() == "p=0.3");
  Tensor x = ones({100000});
  Tensor y = drop.forward(x);
  const auto v = y.to_vector<float>();
  const float kept = float(1.0 / 0.7);
  int64_t zeros_count = 0, others = 0;
  for (float e : v) {
    if (e == 0.0f) ++zeros_count;
    else if (e != kept) ++others;
  }
  CHECK(others == 0);  // every kept element is scaled by 1/(1 − p)
  // The dropped count is Binomial(n, p): within 5 standard deviations √(n·p·(1−p)) of n·p.
  const double n = 100000, p = 0.3;
  CHECK(std::fabs(double(zeros_count) - n * p) <= 5 * std::sqrt(n * p * (1 - p)));
  // The mask replays from the generator state.
  gen.manual_seed(8);
  CHECK(drop.forward(x).to_vector<float>() == v);

  drop.eval();
  CHECK(drop.forward(x).is_same(x));
  drop.train();
  CHECK(!drop.forward(x).is_same(x));
  CHECK(nn::Dropout(0.0).forward(x).is_same(x));
  test::check_equal<float>(nn::Dropout(1.0).forward(ones({4})), {4}, std::vector<float>(4, 0.0f));
  CHECK_THROWS_WITH(nn::Dropout(1.5), Catch::Contains("Dropout") && Catch::Contains("1.5"));

  // Gradient in training mode, with the mask fixed by re-seeding before every evaluation.
  nn::Dropout d(0.4, &gen);
  check_grad([&](const TensorList& in) {
    gen.manual_seed(3);
    return d.forward(in[0]);
  }, {test::grad_input({3, 7}, 9)});
}

TEST_CASE("GELU and ReLU modules apply their ops", "[layers]") {
  Tensor x = test::grad_input({4, 5}, 10);
  nn::GELU gelu_exact;
  nn::GELU gelu_tanh(GeluApproximation::Tanh);
  nn::ReLU relu_module;
  test::check_close(gelu_exact.forward(x), gelu(x), 0, 0);
  test::check_close(gelu_tanh.forward(x), gelu(x, GeluApproximation::Tanh), 0, 0);
  test::check_close(relu_module.forward(x), relu(x), 0, 0);
  CHECK(gelu_exact.extra_repr() == "approximate='none'");
  CHECK(gelu_tanh.extra_repr() == "approximate='tanh'");
  CHECK(nn::make_activation(nn::Activation::ReLU)->type_name() == "ReLU");
  CHECK(nn::make_activation(nn::Activation::GELUTanh)->extra_repr() == "approximate='tanh'");
  check_grad([&](const TensorList& in) { return gelu_exact.forward(in[0]); }, {x});
  check_grad([&](const TensorList& in) { return gelu_tanh.forward(in[0]); }, {x});
  check_grad([&](const TensorList& in) { return relu_module.forward(in[0]); }, {x});
}

// ---- Mlp -------------------------------------------------------------------------------------------

TEST_CASE("Mlp matches PyTorch's fc1 → act → fc2 and has timm's names", "[layers]") {
  for (const char* name : {"mlp_gelu", "mlp_relu"}) {
    const auto& c = fixture()[name];
    INFO(name);
    nn::Mlp mlp(4, {.hidden_features = 6,
                    .activation = std::string(name) == "mlp_gelu" ? nn::Activation::GELU : nn::Activation::ReLU});
    mlp.to(kF64);
    mlp.load_state_dict(state_from(c, {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}, kF64));
    Tensor x = test::fixture_tensor(c["x"]).requires_grad_(true);
    Tensor y = mlp.forward(x);
    // f64: two dot products of ≤ 6 terms around GELU (erf, accurate to a few u): every value
    // is O(1), atol = rtol = 64·6·2⁻⁵³ covers the accumulated rounding.
    const double tol = 64 * 6 * 0x1p-53;
    test::check_close(y, test::fixture_tensor(c["y"]), tol, tol);
    y.backward(test::fixture_tensor(c["g"]));
    test::check_close(x.grad(), test::fixture_tensor(c["dx"]), tol, tol);
  }
  manual_seed(12);
  nn::Mlp mlp(8, {.hidden_features = 32, .out_features = 4, .dropout = 0.5});
  CHECK(names_of(mlp.named_parameters()) ==
        std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  CHECK(mlp.fc1->weight.shape() == Shape{32, 8});
  CHECK(mlp.fc2->weight.shape() == Shape{4, 32});
  std::vector<std::string> children;
  for (const auto& [name, child] : mlp.named_children()) children.push_back(name + ":" + child->type_name());
  CHECK(children == std::vector<std::string>{"fc1:Linear", "act:GELU", "drop1:Dropout", "fc2:Linear", "drop2:Dropout"});
  CHECK(nn::Mlp(8).fc1->weight.shape() == Shape{8, 8});
  CHECK(nn::Mlp(8, {.bias = false}).named_parameters().size() == 2);
  // Dropout only in training mode: eval equals the plain composition.
  Tensor x = randn({3, 8});
  mlp.eval();
  test::check_close(mlp.forward(x), mlp.fc2->forward(gelu(mlp.fc1->forward(x))), 0, 0);
  mlp.train();
  const auto train_out = mlp.forward(x).to_vector<float>();
  int64_t zeros_count = std::count(train_out.begin(), train_out.end(), 0.0f);
  CHECK(zeros_count > 0);  // P(no zero among 12 outputs at p = 0.5) = 2⁻¹²
}

TEST_CASE("Mlp passes f64 gradcheck for input and every parameter", "[layers]") {
  nn::Mlp mlp(3, {.hidden_features = 5, .out_features = 2});
  mlp.to(kF64);
  TensorList inputs{test::grad_input({2, 3}, 12)};
  for (const Tensor& p : mlp.parameters()) inputs.push_back(p);
  check_grad([&](const TensorList& in) { return mlp.forward(in[0]); }, inputs);
}

// ---- Sequential and ModuleList ---------------------------------------------------------------------

TEST_CASE("Sequential chains layers and numbers its children", "[layers]") {
  auto seq = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(0.2)});
  auto last = seq->push_back(std::make_shared<nn::Linear>(6, 2));
  CHECK(seq->size() == 4);
  CHECK(names_of(seq->named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias"});
  CHECK(last->out_features() == 2);
  seq->eval();
  Tensor x = randn({5, 4});
  auto first = std::dynamic_pointer_cast<nn::Linear>((*seq)[0]);
  REQUIRE(first != nullptr);
  test::check_close(seq->forward(x), last->forward(relu(first->forward(x))), 0, 0);
  CHECK(nn::Sequential().forward(x).is_same(x));
  CHECK_THROWS_WITH((*seq)[4], Catch::Contains("Sequential") && Catch::Contains("index 4"));
  // Nested: a Sequential is a Layer.
  nn::Sequential outer({seq, std::make_shared<nn::GELU>()});
  CHECK(names_of(outer.named_parameters()).front() == "0.0.weight");

  seq->to(kF64);
  TensorList inputs{test::grad_input({3, 4}, 13)};
  for (const Tensor& p : seq->parameters()) inputs.push_back(p);
  check_grad([&](const TensorList& in) { return seq->forward(in[0]); }, inputs);
}

TEST_CASE("ModuleList numbers its children and gives typed access", "[layers]") {
  nn::ModuleList list;
  list.push_back(std::make_shared<nn::Linear>(2, 3));
  auto norm = list.push_back(std::make_shared<nn::LayerNorm>(3));
  list.push_back(std::make_shared<nn::ReLU>());
  CHECK(list.size() == 3);
  CHECK(names_of(list.named_parameters()) ==
        std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"});
  CHECK(list.at<nn::LayerNorm>(1) == norm);
  CHECK(list.at<nn::Layer>(2)->type_name() == "ReLU");
  CHECK_THROWS_WITH(list.at<nn::LayerNorm>(0), Catch::Contains("ModuleList") && Catch::Contains("Linear"));
  CHECK_THROWS_WITH(list[3], Catch::Contains("ModuleList") && Catch::Contains("index 3"));
  CHECK_THROWS_WITH(list.push_back(std::shared_ptr<nn::Linear>()), Catch::Contains("ModuleList"));
  nn::ModuleList from({std::make_shared<nn::Linear>(1, 1), std::make_shared<nn::Linear>(1, 1)});
  CHECK(names_of(from.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"});
}
