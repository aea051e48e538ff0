// clip_grad_norm_: total norm and clipped gradients against PyTorch 1.13 for L2, L1, L3 and
// inf norms (f64 and f32), the non-finite modes (Error, Skip, Ignore — the last against
// PyTorch), parameters without gradients, a large gradient summed identically for every
// thread count, and argument errors.
#include <cmath>

#include "helpers.h"
#include "lsformer/models/optim/clip.h"
#include "lsformer/ops/optim_update.h"

using namespace lsf;
using nlohmann::json;

namespace {

// Leaves holding the fixture's gradients (plus one without a gradient, ignored by clipping).
TensorList params_with_grads(const json& grads, DType dt) {
  TensorList ps;
  for (const auto& g : grads) {
    Tensor grad = test::fixture_tensor(g).to(dt);
    Tensor p = zeros(grad.shape(), dt).requires_grad_(true);
    p.set_grad(grad);
    ps.push_back(p);
  }
  ps.push_back(zeros({5}, dt).requires_grad_(true));
  return ps;
}

double norm_type_of(const json& c) {
  return c.at("norm_type").is_string() ? optim::kInfNorm : c.at("norm_type").get<double>();
}

}  // namespace

TEST_CASE("clip_grad_norm_ matches PyTorch in norm and clipped gradients", "[clip]") {
  const json fx = test::load_fixture("optim").at("clip");
  for (const auto& [name, c] : fx.at("cases").items()) {
    INFO("case " << name);
    const DType dt = c.at("dtype") == "f32" ? kF32 : kF64;
    TensorList ps = params_with_grads(fx.at("grads"), dt);
    const double max_norm = c.at("max_norm");
    optim::ClipResult r = optim::clip_grad_norm_(ps, max_norm, norm_type_of(c));
    // f64: our Σ|g|^p over 23 elements in double vs PyTorch's per-tensor norms then the norm of
    // norms, each within ~(23 + 4)·2⁻⁵³ relative: 64·2⁻⁵³ covers both. f32: PyTorch reduces in
    // float32 (≤ (23 + 4)·2⁻²⁴) and we in double, and its clip coefficient is a float32 too;
    // gradients get one more rounding: 64·2⁻²⁴.
    const double tol = 64 * (dt == kF32 ? 0x1p-24 : 0x1p-53);
    CHECK(r.norm == Approx(c.at("total_norm").get<double>()).epsilon(tol).margin(0));
    CHECK(r.finite);
    CHECK(r.clipped == (max_norm / (r.norm + 1e-6) < 1.0));
    for (size_t i = 0; i < c.at("grads_after").size(); ++i) {
      INFO("gradient " << i);
      test::check_close(ps[i].grad(), test::fixture_tensor(c.at("grads_after")[i]), tol, tol);
    }
    CHECK_FALSE(ps.back().grad().defined());
  }
}

TEST_CASE("the clipped norm equals max_norm, no gradients give norm 0", "[clip]") {
  Tensor p = zeros({3}, kF64).requires_grad_(true);
  p.set_grad(tensor(std::vector<double>{3, 4, 12}));
  optim::ClipResult r = optim::clip_grad_norm_(NamedTensors{{"p", p}}, 2.6);
  CHECK(r.norm == 13.0);
  CHECK(r.clipped);
  // PyTorch's coefficient max_norm / (norm + 1e-6): the new norm is max_norm·norm/(norm + 1e-6).
  CHECK(optim::grad_norm({p}) == Approx(2.6 * 13.0 / (13.0 + 1e-6)).epsilon(1e-15));
  // Under the limit: untouched.
  const std::vector<double> clipped = p.grad().to_vector<double>();
  r = optim::clip_grad_norm_({p}, 100.0);
  CHECK_FALSE(r.clipped);
  CHECK(p.grad().to_vector<double>() == clipped);
  Tensor q = zeros({2}).requires_grad_(true);
  r = optim::clip_grad_norm_({q}, 1.0);
  CHECK(r.norm == 0.0);
  CHECK_FALSE(r.clipped);
  CHECK(r.finite);
}

TEST_CASE("non-finite norms: Error names it, Skip leaves gradients, Ignore does what PyTorch does", "[clip]") {
  const json fx = test::load_fixture("optim").at("clip").at("inf_ignore");
  SECTION("Error") {
    TensorList ps = params_with_grads(fx.at("grads"), kF64);
    CHECK_THROWS_WITH(optim::clip_grad_norm_(ps, 1.0),
                      Catch::Contains("clip_grad_norm_: the total norm of order 2 of the gradients is inf (non-finite)"));
    CHECK(ps[0].grad().to_vector<double>() == test::fixture_tensor(fx.at("grads")[0]).to_vector<double>());
  }
  SECTION("Skip, with inf and with NaN") {
    TensorList ps = params_with_grads(fx.at("grads"), kF64);
    optim::ClipResult r = optim::clip_grad_norm_(ps, 1.0, 2.0, optim::NonFinite::Skip);
    CHECK(std::isinf(r.norm));
    CHECK_FALSE(r.finite);
    CHECK_FALSE(r.clipped);
    CHECK(ps[0].grad().to_vector<double>() == test::fixture_tensor(fx.at("grads")[0]).to_vector<double>());
    ps[0].grad().fill_(NAN);
    r = optim::clip_grad_norm_(ps, 1.0, optim::kInfNorm, optim::NonFinite::Skip);
    CHECK(std::isnan(r.norm));
    CHECK_FALSE(r.finite);
  }
  SECTION("Ignore") {
    TensorList ps = params_with_grads(fx.at("grads"), kF64);
    optim::ClipResult r = optim::clip_grad_norm_(ps, 1.0, 2.0, optim::NonFinite::Ignore);
    CHECK(std::isinf(r.norm));
    CHECK(r.clipped);
    for (size_t i = 0; i < fx.at("grads_after").size(); ++i)
      test::check_close(ps[i].grad(), test::fixture_tensor(fx.at("grads_after")[i]), 0, 0);  // 0 and NaN, exactly
  }
}

TEST_CASE("a large gradient's norm is the same bit for bit for any thread count", "[clip]") {
  // 5 chunks of kParallelGrain: partial sums in fixed chunks, added in order.
  Generator gen(11);
  Tensor p = zeros({163840 + 7}).requires_grad_(true);
  p.set_grad(randn({163840 + 7}, kF32, &gen));
  std::vector<double> norms;
  for (int threads : {1, 2, 3}) {
    const test::ThreadCount scoped(threads);
    for (double type : {1.0, 2.0, 3.0, optim::kInfNorm}) norms.push_back(optim::grad_norm({p}, type));
  }
  for (size_t i = 4; i < norms.size(); ++i) CHECK(norms[i] == norms[i % 4]);
  // Against a plain double sum: both add the same f64 squares of f32 values (exact), in a
  // different order: ≤ n·2⁻⁵³ relative with n = 163847.
  std::vector<float> g = p.grad().to_vector<float>();
  double sq = 0;
  for (float v : g) sq += double(v) * double(v);
  CHECK(norms[1] == Approx(std::sqrt(sq)).epsilon(163847 * 0x1p-53));
}

TEST_CASE("clip_grad_norm_ rejects bad arguments", "[clip]") {
  Tensor p = zeros({2}).requires_grad_(true);
  p.set_grad(ones({2}));
  CHECK_THROWS_WITH(optim::clip_grad_norm_({p}, -1.0), Catch::Contains("clip_grad_norm_: max_norm must be a finite number ≥ 0, got -1"));
  CHECK_THROWS_WITH(optim::clip_grad_norm_({p}, NAN), Catch::Contains("max_norm"));
  CHECK_THROWS_WITH(optim::clip_grad_norm_({p}, 1.0, 0.0), Catch::Contains("norm_type must be positive or inf, got 0"));
  CHECK_THROWS_WITH(optim::clip_grad_norm_({p}, 1.0, -2.0), Catch::Contains("got -2"));
  CHECK_THROWS_WITH(optim::clip_grad_norm_({p, Tensor()}, 1.0), Catch::Contains("a parameter is undefined"));
  CHECK_THROWS_WITH(scale_(zeros({1}).expand({3}), 0.5), Catch::Contains("scale_") && Catch::Contains("broadcast view"));
}
