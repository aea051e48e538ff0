// optim::GradScaler (models/optim/grad_scaler.h): the scale's grow / back-off sequence, skipped
// and taken steps, unscaling, and misuse.
//
// Reference. Debian's PyTorch (1.13) runs GradScaler on CUDA only (its CPU build lacks
// _amp_update_scale_ and _amp_foreach_non_finite_check_and_unscale_), so no fixture could be
// generated here. The first case is PyTorch's own test of the update rule
// (test/test_cuda.py, test_grad_scaling_update_scale: growth 2, backoff 0.25, interval 2, scale 4:
// two finite steps → tracker 1 / scale 4, then tracker 0 / scale 8; one with an inf → tracker 0 /
// scale 2); the others follow the rule that test pins down and GradScaler's documentation
// (a step with an inf or NaN gradient is skipped; a growth that would overflow f32 is not applied).
#include <cmath>

#include "helpers.h"
#include "lsformer/models/optim/grad_scaler.h"
#include "lsformer/models/optim/sgd.h"

using namespace lsf;
using Catch::Contains;

namespace {

// A single parameter [2] under SGD (lr 1), whose gradient each step is set by hand.
struct Rig {
  Tensor p = tensor(std::vector<float>{1.0f, 2.0f}, {2}).requires_grad_(true);
  optim::SGD sgd{{{"p", p}}, optim::SGDOptions{.lr = 1.0}};
  void set_grad(float a, float b) { p.set_grad(tensor(std::vector<float>{a, b}, {2})); }
};

}  // namespace

TEST_CASE("GradScaler's update rule is PyTorch's (its test_grad_scaling_update_scale)", "[optim][grad_scaler]") {
  Rig r;
  optim::GradScaler scaler({.init_scale = 4.0, .growth_factor = 2.0, .backoff_factor = 0.25, .growth_interval = 2});
  r.set_grad(1, 1);
  CHECK(scaler.step(r.sgd));
  scaler.update();
  CHECK(scaler.growth_tracker() == 1);
  CHECK(scaler.get_scale() == 4.0);
  r.set_grad(1, 1);
  CHECK(scaler.step(r.sgd));
  scaler.update();
  CHECK(scaler.growth_tracker() == 0);
  CHECK(scaler.get_scale() == 8.0);
  r.set_grad(INFINITY, 1);
  CHECK_FALSE(scaler.step(r.sgd));
  scaler.update();
  CHECK(scaler.growth_tracker() == 0);
  CHECK(scaler.get_scale() == 2.0);
}

TEST_CASE("GradScaler: gradients divided by the scale, non-finite steps skipped, the scale backs off and grows",
          "[optim][grad_scaler]") {
  Rig r;
  optim::GradScaler scaler({.init_scale = 1024.0, .growth_factor = 2.0, .backoff_factor = 0.5, .growth_interval = 3});
  // The loss is multiplied by the scale, so its gradients are too.
  const Tensor loss = sum(mul(r.p, r.p));
  scaler.scale(loss).backward();
  test::check_equal<float>(r.p.grad(), {2}, {2048.0f, 4096.0f});  // 1024 · 2p
  CHECK(scaler.unscale_(r.sgd));
  test::check_equal<float>(r.p.grad(), {2}, {2.0f, 4.0f});
  CHECK_THROWS_WITH(scaler.unscale_(r.sgd), Contains("already called since the last update()"));
  CHECK(scaler.step(r.sgd));  // unscaled already: steps with the true gradient
  test::check_equal<float>(r.p, {2}, {-1.0f, -2.0f});
  scaler.update();

  struct Step {
    float a, b;    // the (scaled) gradient set by hand
    bool stepped;  // expected
    double scale;  // expected after update()
  };
  // 1 finite step already counted; 2 more grow it (interval 3); NaN and inf halve it and restart
  // the run; 3 finite ones grow it again.
  const Step steps[] = {{2048, 0, true, 1024}, {2048, 2048, true, 2048}, {NAN, 1, false, 1024},
                        {1, -INFINITY, false, 512},  {512, 512, true, 512},    {512, 0, true, 512},
                        {0, 512, true, 1024}};
  for (size_t i = 0; i < std::size(steps); ++i) {
    INFO("step " << i);
    const Step& s = steps[i];
    const std::vector<float> before = r.p.to_vector<float>();
    const double scale = scaler.get_scale();
    r.set_grad(s.a, s.b);
    CHECK(scaler.step(r.sgd) == s.stepped);
    const std::vector<float> after = r.p.to_vector<float>();
    if (s.stepped) {
      CHECK(after[0] == before[0] - float(double(s.a) / scale));
      CHECK(after[1] == before[1] - float(double(s.b) / scale));
    } else {
      CHECK(after == before);  // skipped: the parameter is untouched
    }
    scaler.update();
    CHECK(scaler.get_scale() == s.scale);
  }
  CHECK_THROWS_WITH(scaler.update(), Contains("no step() or unscale_() since the last update()"));
}

TEST_CASE("GradScaler: a growth past the f32 range is not applied, state and options are checked", "[optim][grad_scaler]") {
  Rig r;
  optim::GradScaler top({.init_scale = std::ldexp(1.0, 127), .growth_interval = 1});
  r.set_grad(1, 1);
  CHECK(top.step(r.sgd));
  top.update();
  CHECK(top.get_scale() == std::ldexp(1.0, 127));  // 2^128 overflows f32: kept
  CHECK(top.growth_tracker() == 0);

  optim::GradScaler s({.growth_interval = 4});
  s.set_state(256.0, 3);
  CHECK(s.get_scale() == 256.0);
  CHECK(s.growth_tracker() == 3);
  CHECK_THROWS_WITH(s.set_state(0.0, 0), Contains("the scale must be a positive finite f32 value, got 0"));
  CHECK_THROWS_WITH(s.set_state(1e40, 0), Contains("positive finite f32 value"));
  CHECK_THROWS_WITH(s.set_state(8.0, 4), Contains("growth_tracker must be in [0, growth_interval = 4), got 4"));
  CHECK_THROWS_WITH(optim::GradScaler({.init_scale = 0.0}), Contains("init_scale must be a positive finite number, got 0"));
  CHECK_THROWS_WITH(optim::GradScaler({.init_scale = 1e39}), Contains("overflows f32"));
  CHECK_THROWS_WITH(optim::GradScaler({.growth_factor = 1.0}), Contains("growth_factor must be > 1, got 1"));
  CHECK_THROWS_WITH(optim::GradScaler({.backoff_factor = 1.0}), Contains("backoff_factor must be in (0, 1), got 1"));
  CHECK_THROWS_WITH(optim::GradScaler({.growth_interval = 0}), Contains("growth_interval must be ≥ 1, got 0"));
  CHECK_THROWS_WITH(s.scale(Tensor()), Contains("the loss is undefined"));
}
