// Learning-rate schedules: OneCycle's lr and momentum at every step against PyTorch 1.13's
// OneCycleLR (linear and cos, two and three phases, no warmup), the formula schedules against
// the formulas of docs/transformer-ls.md evaluated by tests/fixtures/gen_optim.py, values known
// by hand, apply_schedule on SGD's momentum and Adam's beta1, and the argument errors.
#include <cmath>

#include "helpers.h"
#include "optim_helpers.h"
#include "lsformer/models/optim/adam.h"
#include "lsformer/models/optim/schedule.h"
#include "lsformer/models/optim/sgd.h"

using namespace lsf;
using nlohmann::json;

namespace {

// The schedules evaluate their reference's expression in the same order in double, so the
// values agree to rounding: a few operations of ≤ ½ ulp each (≤ 4·2⁻⁵³ relative), taken
// relative to the largest value of the schedule since a value near zero inherits the absolute
// error of the terms it was computed from (e.g. PyTorch's (end − start)·pct + start).
void check_values(const std::vector<double>& got, const json& expected, double scale) {
  REQUIRE(got.size() == expected.size());
  const double tol = 8 * 0x1p-53 * scale;
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("step " << i << ": got " << got[i] << ", expected " << expected[i].get<double>());
    CHECK(std::fabs(got[i] - expected[i].get<double>()) <= tol);
  }
}

using test::onecycle_options;

}  // namespace

TEST_CASE("OneCycle matches PyTorch's OneCycleLR in lr and momentum at every step", "[schedule]") {
  const json fx = test::load_fixture("optim").at("onecycle");
  int cases = 0;
  for (const auto& [name, c] : fx.items()) {
    INFO("case " << name);
    const optim::OneCycleOptions o = onecycle_options(c.at("options"));
    optim::OneCycle s(o);
    std::vector<double> lr, momentum;
    for (int64_t step = 0; step <= o.total_steps; ++step) {
      lr.push_back(s.lr(step));
      REQUIRE(s.momentum(step).has_value());
      momentum.push_back(*s.momentum(step));
    }
    check_values(lr, c.at("lr"), o.max_lr);
    check_values(momentum, c.at("momentum"), o.max_momentum);
    ++cases;
  }
  CHECK(cases == 5);
}

TEST_CASE("the LRA OneCycle runs 4e-6 → 1e-4 → 4e-10 with beta1 0.95 → 0.85 → 0.95", "[schedule]") {
  optim::OneCycle s({.max_lr = 1e-4, .total_steps = 1000, .pct_start = 0.1, .anneal = optim::Anneal::Linear});
  CHECK(s.lr(0) == Approx(4e-6).epsilon(1e-14));
  CHECK(s.lr(99) == Approx(1e-4).epsilon(1e-14));  // the peak at pct_start·total − 1
  CHECK(s.lr(999) == Approx(4e-10).epsilon(1e-9));
  CHECK(*s.momentum(0) == 0.95);
  CHECK(*s.momentum(99) == Approx(0.85).epsilon(1e-14));
  CHECK(*s.momentum(999) == Approx(0.95).epsilon(1e-14));
  optim::OneCycle plain({.max_lr = 1e-4, .total_steps = 10, .cycle_momentum = false});
  CHECK_FALSE(plain.momentum(3).has_value());
}

TEST_CASE("warmup-cosine, warmup-constant and linear decay match their formulas", "[schedule]") {
  const json fx = test::load_fixture("optim").at("formulas");
  auto eval = [](const optim::Schedule& s, const json& steps) {
    std::vector<double> out;
    for (const auto& step : steps) out.push_back(s.lr(step.get<int64_t>()));
    return out;
  };
  SECTION("ViL: warmup from 0.002·lr, cosine on the global step to 1e-6") {
    const json& c = fx.at("vil");
    optim::WarmupCosine s(optim::vil_warmup_cosine(c.at("lr"), c.at("warmup_steps"), c.at("total_steps")));
    check_values(eval(s, c.at("steps")), c.at("values"), c.at("lr"));
    CHECK(s.lr(0) == 0.002 * 8e-4);
    // Not rebased: at the end of warmup the cosine is already past its peak.
    CHECK(s.lr(50) < 8e-4);
    CHECK(s.lr(500) == Approx(1e-6).epsilon(1e-12));
  }
  SECTION("cosine rebased at the end of warmup") {
    const json& c = fx.at("rebased_cosine");
    optim::WarmupCosine s({.lr = c.at("lr"), .warmup_steps = c.at("warmup_steps"), .total_steps = c.at("total_steps"),
                           .min_lr = c.at("min_lr")});
    check_values(eval(s, c.at("steps")), c.at("values"), c.at("lr"));
    CHECK(s.lr(50) == 3e-3);  // the peak, exactly
    CHECK(s.lr(0) == 0.0);
    CHECK(s.lr(10'000) == s.lr(500));  // held at the floor past total_steps
  }
  SECTION("fairseq's warmup then constant") {
    const json& c = fx.at("warmup_constant");
    optim::WarmupConstant s({.lr = c.at("lr"), .warmup_steps = c.at("warmup_steps")});
    check_values(eval(s, c.at("steps")), c.at("values"), c.at("lr"));
    CHECK(s.lr(49) == 2.5e-4);
    CHECK(optim::WarmupConstant({.lr = 0.1}).lr(0) == 0.1);  // no warmup
  }
  SECTION("linear warmup then linear decay") {
    const json& c = fx.at("linear_decay");
    optim::LinearDecay s({.lr = c.at("lr"), .total_steps = c.at("total_steps"), .warmup_steps = c.at("warmup_steps"),
                          .end_lr = c.at("end_lr")});
    check_values(eval(s, c.at("steps")), c.at("values"), c.at("lr"));
    CHECK(s.lr(500) == 1e-5);
  }
  SECTION("constant") {
    optim::ConstantLR s(0.25);
    CHECK(s.lr(0) == 0.25);
    CHECK(s.lr(123456) == 0.25);
    CHECK_FALSE(s.momentum(3).has_value());
  }
}

TEST_CASE("apply_schedule sets every group's lr and cycles SGD momentum and Adam beta1", "[schedule]") {
  Tensor a = zeros({2}).requires_grad_(true), b = zeros({3}).requires_grad_(true);
  optim::OneCycle s({.max_lr = 0.1, .total_steps = 20, .pct_start = 0.5, .anneal = optim::Anneal::Linear,
                     .base_momentum = 0.8, .max_momentum = 0.9});
  optim::AdamW adamw(std::vector<optim::ParamGroup<optim::AdamWOptions>>{{{{"a", a}}, {.lr = 1.0}},
                                                                         {{{"b", b}}, {.lr = 2.0, .weight_decay = 0}}});
  optim::SGD sgd(NamedTensors{{"a", a}}, {.lr = 1.0, .momentum = 0.5});
  for (int64_t step : {0, 5, 9, 13, 19}) {
    INFO("step " << step);
    optim::apply_schedule(s, adamw, step);
    optim::apply_schedule(s, sgd, step);
    for (size_t g = 0; g < 2; ++g) {
      CHECK(adamw.lr(g) == s.lr(step));
      CHECK(adamw.options(g).betas[0] == *s.momentum(step));
      CHECK(adamw.options(g).betas[1] == 0.999);  // beta2 untouched
    }
    CHECK(sgd.lr() == s.lr(step));
    CHECK(sgd.options().momentum == *s.momentum(step));
  }
  // Non-cycling schedules leave momentum alone.
  optim::apply_schedule(optim::ConstantLR(0.3), sgd, 7);
  CHECK(sgd.lr() == 0.3);
  CHECK(sgd.options().momentum == *s.momentum(19));
  // PyTorch's last phase extrapolates below zero at step == total_steps; no optimizer takes it.
  optim::OneCycle lra({.max_lr = 1e-4, .total_steps = 200, .pct_start = 0.05, .anneal = optim::Anneal::Linear});
  CHECK(lra.lr(200) < 0.0);
  CHECK_THROWS_WITH(optim::apply_schedule(lra, adamw, 200), Catch::Contains("AdamW: invalid learning rate -"));
}

TEST_CASE("schedules reject bad arguments with clear errors", "[schedule]") {
  CHECK_THROWS_WITH(optim::OneCycle({.max_lr = 0.1, .total_steps = 0}),
                    Catch::Contains("OneCycle: total_steps must be a positive integer, got 0"));
  CHECK_THROWS_WITH(optim::OneCycle({.max_lr = 0.1, .total_steps = 10, .pct_start = 1.5}),
                    Catch::Contains("pct_start must lie in [0, 1], got 1.5"));
  CHECK_THROWS_WITH(optim::OneCycle({.max_lr = 0.1, .total_steps = 10, .pct_start = 0.1}),
                    Catch::Contains("phase 1 of 2 has zero length"));
  CHECK_THROWS_WITH(optim::OneCycle({.max_lr = 0.1, .total_steps = 10, .pct_start = 1.0}),
                    Catch::Contains("phase 2 of 2 has zero length"));
  CHECK_THROWS_WITH(optim::OneCycle({.max_lr = -0.1, .total_steps = 10}), Catch::Contains("max_lr must be"));
  CHECK_THROWS_WITH(optim::OneCycle({.max_lr = 0.1, .total_steps = 10, .div_factor = 0}),
                    Catch::Contains("div_factor and final_div_factor must be positive"));
  optim::OneCycle s({.max_lr = 0.1, .total_steps = 10});
  CHECK_THROWS_WITH(s.lr(11), Catch::Contains("OneCycle: step 11 is past total_steps 10"));
  CHECK_THROWS_WITH(s.momentum(-1), Catch::Contains("OneCycle: step must be ≥ 0, got -1"));
  CHECK_THROWS_WITH(optim::WarmupCosine({.lr = 1e-3, .warmup_steps = 10, .total_steps = 10}),
                    Catch::Contains("WarmupCosine: need 0 ≤ warmup_steps < total_steps, got warmup_steps 10"));
  CHECK_THROWS_WITH(optim::WarmupCosine({.lr = 1e-3, .total_steps = 10, .min_lr = -1}), Catch::Contains("min_lr"));
  CHECK_THROWS_WITH(optim::WarmupConstant({.lr = 1e-3, .warmup_steps = -1}), Catch::Contains("warmup_steps must be ≥ 0"));
  CHECK_THROWS_WITH(optim::LinearDecay({.lr = 1e-3, .total_steps = 0}), Catch::Contains("LinearDecay: need"));
  CHECK_THROWS_WITH(optim::ConstantLR(-1.0), Catch::Contains("ConstantLR: lr must be a finite number ≥ 0, got -1"));
  CHECK_THROWS_WITH(optim::ConstantLR(1.0).lr(-3), Catch::Contains("step must be ≥ 0, got -3"));
}
