// Optimizers: SGD (plain, momentum + dampening, Nesterov, weight decay), Adam (with amsgrad and
// L2 decay) and AdamW trajectories over 100 steps against PyTorch 1.13 (tests/fixtures/
// gen_optim.py), with parameter groups, a no-decay group chosen by name, and OneCycle driving lr
// and beta1; float32 steps on given gradients; the parallel and strided kernel paths against
// the small dense one; state save → load → continue bit-identical to an uninterrupted run; and
// every validation error (options, parameters, saved state).
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "helpers.h"
#include "optim_helpers.h"
#include "lsformer/models/optim/adam.h"
#include "lsformer/models/optim/schedule.h"
#include "lsformer/models/optim/sgd.h"
#include "lsformer/ops/optim_update.h"

using namespace lsf;
using nlohmann::json;

namespace {

// ---- building optimizers from fixture options ----

optim::SGDOptions sgd_options(const json& o) {
  return {.lr = o.at("lr"), .momentum = o.at("momentum"), .dampening = o.at("dampening"),
          .weight_decay = o.at("weight_decay"), .nesterov = o.at("nesterov")};
}

template <typename Options>
Options adam_options(const json& o) {
  Options r;
  r.lr = o.at("lr");
  r.betas = {o.at("betas")[0].get<double>(), o.at("betas")[1].get<double>()};
  r.eps = o.at("eps");
  r.weight_decay = o.at("weight_decay");
  r.amsgrad = o.at("amsgrad");
  return r;
}

template <typename Options>
std::vector<optim::ParamGroup<Options>> typed_groups(const std::vector<std::pair<NamedTensors, json>>& groups,
                                                     Options (*convert)(const json&)) {
  std::vector<optim::ParamGroup<Options>> out;
  for (const auto& [params, options] : groups) out.push_back({params, convert(options)});
  return out;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& kind,
                                                 const std::vector<std::pair<NamedTensors, json>>& groups) {
  if (kind == "SGD") return std::make_unique<optim::SGD>(typed_groups(groups, &sgd_options));
  if (kind == "Adam") return std::make_unique<optim::Adam>(typed_groups(groups, &adam_options<optim::AdamOptions>));
  return std::make_unique<optim::AdamW>(typed_groups(groups, &adam_options<optim::AdamWOptions>));
}

using test::onecycle_options;

// ---- the least-squares problem of the fixture: loss = mean((X·W + b − Y)²) ----

struct Problem {
  Tensor X, Y;           // [12, 4], [12, 3]
  NamedTensors params;   // fc.weight [4, 3], fc.bias [3], skip.weight [2] (never gets a gradient)

  explicit Problem(const json& data) {
    X = test::fixture_tensor(data.at("X"));
    Y = test::fixture_tensor(data.at("Y"));
    for (const char* name : {"fc.weight", "fc.bias", "skip.weight"})
      params.emplace_back(name, test::fixture_tensor(data.at(name)).requires_grad_(true));
  }
  const Tensor& param(const std::string& name) const {
    for (const auto& [n, t] : params)
      if (n == name) return t;
    FAIL("no parameter " << name);
    return params[0].second;
  }
  NamedTensors select(const json& names) const {
    NamedTensors out;
    for (const auto& n : names) out.emplace_back(n.get<std::string>(), param(n.get<std::string>()));
    return out;
  }
  void forward_backward() const {
    Tensor r = matmul(X, param("fc.weight")) + param("fc.bias") - Y;
    mean(r * r).backward();
  }
};

// One training step as the tools run it: schedule, fresh gradients, step.
void train_step(optim::Optimizer& opt, const Problem& pb, const optim::Schedule* schedule, int64_t step) {
  if (schedule != nullptr) optim::apply_schedule(*schedule, opt, step);
  opt.zero_grad();
  pb.forward_backward();
  opt.step();
}

std::vector<double> values_of(const NamedTensors& ts) {
  std::vector<double> out;
  for (const auto& [n, t] : ts)
    for (double v : t.to_vector<double>()) out.push_back(v);
  return out;
}

std::string names_of(const NamedTensors& ts) {
  std::string s;
  for (const auto& [n, t] : ts) s += n + " ";
  return s;
}

}  // namespace

TEST_CASE("SGD, Adam and AdamW trajectories match PyTorch over 100 steps", "[optim]") {
  const json fx = test::load_fixture("optim");
  int checked = 0;
  for (const auto& [name, c] : fx.at("trajectories").items()) {
    INFO("case " << name);
    Problem pb(fx.at("data"));
    std::vector<std::pair<NamedTensors, json>> groups;
    for (const auto& g : c.at("groups")) groups.emplace_back(pb.select(g.at("params")), g.at("options"));
    std::unique_ptr<optim::Optimizer> opt;
    if (c.contains("no_decay_patterns")) {
      // The groups come from the name patterns; they must equal the fixture's explicit ones.
      auto built = optim::decay_groups(pb.params, adam_options<optim::AdamWOptions>(groups[0].second),
                                       c.at("no_decay_patterns").get<std::vector<std::string>>());
      REQUIRE(built.size() == 2);
      CHECK(names_of(built[0].params) == names_of(groups[0].first));
      CHECK(names_of(built[1].params) == names_of(groups[1].first));
      CHECK(built[1].options.weight_decay == 0.0);
      opt = std::make_unique<optim::AdamW>(built);
    } else {
      opt = make_optimizer(c.at("optimizer"), groups);
    }
    std::unique_ptr<optim::Schedule> schedule;
    if (!c.at("schedule").is_null())
      schedule = std::make_unique<optim::OneCycle>(onecycle_options(c.at("schedule").at("options")));
    const Tensor skip_before = pb.param("skip.weight").clone();
    const int64_t steps = c.at("steps");
    for (int64_t step = 0; step < steps; ++step) {
      train_step(*opt, pb, schedule.get(), step);
      const std::string key = std::to_string(step + 1);
      if (!c.at("checkpoints").contains(key)) continue;
      for (const auto& [pname, expected] : c.at("checkpoints").at(key).items()) {
        INFO("after step " << key << ", parameter " << pname);
        // f64 throughout. Each step rounds ~20 times per element (12-term matmul sums, the
        // update's ~10 operations), ≤ 32·2⁻⁵³ ≈ 3.6e-15 relative, in both implementations; the
        // problem is a stable quadratic, so errors add up over the 100 steps rather than
        // grow: 2 · 100 · 3.6e-15 ≈ 7e-13. Adam divides by √v̂ + eps, which turns an absolute
        // gradient error into a relative update error no larger than that of the gradient.
        // Bound: rtol = atol = 1e-12 (well inside the 1e-6 asked of the implementation).
        test::check_close(pb.param(pname), test::fixture_tensor(expected), 1e-12, 1e-12);
        ++checked;
      }
    }
    CHECK(opt->step_count() == steps);
    // The parameter without a gradient was skipped: unchanged, no state.
    CHECK(pb.param("skip.weight").to_vector<double>() == skip_before.to_vector<double>());
    CHECK(opt->state("skip.weight") == nullptr);
    REQUIRE(opt->state("fc.weight") != nullptr);
    CHECK(opt->state("fc.weight")->step == steps);
  }
  CHECK(checked == 12 * 5 * 3);
}

TEST_CASE("float32 updates match PyTorch step by step", "[optim]") {
  const json fx = test::load_fixture("optim").at("f32_steps");
  const Tensor p0 = test::fixture_tensor(fx.at("p0"));
  REQUIRE(p0.dtype() == kF32);
  for (const auto& [name, c] : fx.at("cases").items()) {
    INFO("case " << name);
    Tensor p = p0.clone().requires_grad_(true);
    auto opt = make_optimizer(c.at("optimizer"), {{NamedTensors{{"p", p}}, c.at("options")}});
    for (size_t k = 0; k < fx.at("grads").size(); ++k) {
      INFO("step " << k + 1);
      p.set_grad(test::fixture_tensor(fx.at("grads")[k]));
      opt->step();
      // Same operations in the same order on the same f32 inputs; PyTorch's vectorised CPU
      // kernels may fuse a multiply-add (one rounding instead of two), so each of the ~10
      // operations of a step may differ by an ulp: ≤ 10·2⁻²⁴ relative to max(|p|, |update|),
      // and the moments carry it into later steps: 3 steps · 10 · 2⁻²⁴ < 32·2⁻²⁴ (|p| ~ 1).
      const double tol = 32 * 0x1p-24;
      test::check_close(p, test::fixture_tensor(c.at("after")[k]), tol, tol);
    }
  }
}

TEST_CASE("the parallel, strided and small kernel paths agree bit for bit", "[optim]") {
  // One update is elementwise, so the element values cannot depend on how the loop is cut:
  // a [3, 70001] parameter (chunks over threads), its transposed layout (strided runs) and
  // each row updated alone (short dense runs) must give identical bits.
  for (DType dt : {kF32, kF64}) {
    INFO("dtype " << dt);
    Generator gen(5);
    const Tensor base = randn({3, 70001}, dt, &gen);
    const Tensor grad = randn({3, 70001}, dt, &gen);
    auto run = [&](Tensor p, const Tensor& g, bool amsgrad) {
      p.requires_grad_(true);
      p.set_grad(g);
      optim::AdamW opt(NamedTensors{{"p", p}}, {.lr = 0.01, .weight_decay = 0.1, .amsgrad = amsgrad});
      opt.step();
      p.set_grad(mul(g, -0.5));
      opt.step();
      return p.to_vector<double>();
    };
    auto run_sgd = [&](Tensor p, const Tensor& g) {
      p.requires_grad_(true);
      p.set_grad(g);
      optim::SGD opt(NamedTensors{{"p", p}}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
      opt.step();
      opt.step();
      return p.to_vector<double>();
    };
    for (bool amsgrad : {false, true}) {
      const auto whole = run(base.clone(), grad, amsgrad);
      // Transposed storage: the parameter is a [3, 70001] view with strides {1, 3}.
      const Tensor p_t = base.t().contiguous().t();
      REQUIRE_FALSE(p_t.is_contiguous());
      CHECK(run(p_t, grad.t().contiguous().t(), amsgrad) == whole);
      std::vector<double> rows;
      for (int64_t r = 0; r < 3; ++r) {
        auto row = run(base.select(0, r).clone(), grad.select(0, r).clone(), amsgrad);
        rows.insert(rows.end(), row.begin(), row.end());
      }
      CHECK(rows == whole);
    }
    const auto sgd_whole = run_sgd(base.clone(), grad);
    CHECK(run_sgd(base.t().contiguous().t(), grad.t().contiguous().t()) == sgd_whole);
  }
}

TEST_CASE("a step bumps the parameter's version, so stale saved values are caught", "[optim]") {
  Tensor p = tensor(std::vector<double>{1, 2, 3}).requires_grad_(true);
  Tensor y = sum(mul(p, p));  // saves p for backward
  const uint64_t before = p.storage()->version();
  p.set_grad(ones({3}, kF64));
  optim::SGD opt(NamedTensors{{"p", p}}, {.lr = 0.1});
  opt.step();
  CHECK(p.storage()->version() > before);
  test::check_equal<double>(p, {3}, {0.9, 1.9, 2.9});
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("modified by an in-place operation"));
}

TEST_CASE("zero_grad drops or zeroes gradients, groups read and set lr and momentum", "[optim]") {
  Tensor a = ones({2}, kF64).requires_grad_(true), b = ones({3}, kF64).requires_grad_(true);
  optim::Adam opt(std::vector<optim::ParamGroup<optim::AdamOptions>>{
      {{{"a", a}}, {.lr = 0.1}}, {{{"b", b}}, {.lr = 0.2, .betas = {0.8, 0.9}}}});
  a.set_grad(ones({2}, kF64));
  b.set_grad(ones({3}, kF64));
  opt.zero_grad(/*set_to_none=*/false);
  test::check_equal<double>(a.grad(), {2}, {0, 0});
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
  CHECK(opt.num_groups() == 2);
  CHECK(opt.lr(1) == 0.2);
  CHECK(opt.momentum(1) == 0.8);
  opt.set_lr(0.05);
  opt.set_momentum(1, 0.95);
  CHECK(opt.lr(0) == 0.05);
  CHECK(opt.lr(1) == 0.05);
  CHECK(opt.options(1).betas[0] == 0.95);
  CHECK(opt.options(0).betas[0] == 0.9);
  CHECK(std::get<double>(opt.option_map(1).at("beta2")) == 0.9);
  CHECK(names_of(opt.named_parameters()) == "a b ");
  // No gradient at all: nothing moves, no state appears, the step still counts.
  opt.step();
  CHECK(opt.step_count() == 1);
  CHECK(opt.state_tensors().empty());
  test::check_equal<double>(a, {2}, {1, 1});
}

TEST_CASE("the ViL no-decay patterns match by substring", "[optim]") {
  NamedTensors params;
  for (const char* n : {"patch_embed.proj.weight", "pos_embed", "cls_token", "blocks.0.norm1.weight", "norm.weight",
                        "norm.bias", "blocks.0.attn.dual_ln_s.weight", "blocks.0.attn.relative_position_bias_table",
                        "head.weight", "head.bias", "blocks.0.attn.to_dynamic_projection.bias", "norm_embed.0.weight"})
    params.emplace_back(n, zeros({1}));
  auto split = optim::split_by_name(params, optim::vil_no_decay_patterns());
  CHECK(names_of(split.no_decay) ==
        "pos_embed cls_token norm.weight norm.bias blocks.0.attn.relative_position_bias_table head.bias "
        "norm_embed.0.weight ");
  // "blocks.0.norm1.weight" does not contain "norm.weight": decayed, as in the ViL code.
  CHECK(names_of(split.decay) ==
        "patch_embed.proj.weight blocks.0.norm1.weight blocks.0.attn.dual_ln_s.weight head.weight "
        "blocks.0.attn.to_dynamic_projection.bias ");
}

namespace {

// Runs `steps` updates of a fresh problem; with `resume_at` ≥ 0 the run stops there, saves
// parameters and optimizer state through a safetensors byte string, and continues in a new
// problem and a new optimizer loaded from it.
template <typename MakeOpt>
std::vector<double> run_with_resume(const json& data, MakeOpt make_opt, const optim::Schedule* schedule,
                                    int64_t steps, int64_t resume_at) {
  auto pb = std::make_unique<Problem>(data);
  auto opt = make_opt(pb->params);
  for (int64_t step = 0; step < steps; ++step) {
    if (step == resume_at) {
      NamedTensors saved = opt->state_tensors();
      for (const auto& [n, t] : pb->params) saved.emplace_back("model." + n, t);
      const std::string bytes = serialize_safetensors(saved, {{"optimizer", opt->state_json()}});
      SafetensorsContents c = parse_safetensors(bytes);
      pb = std::make_unique<Problem>(data);  // fresh parameters (initial values) ...
      std::map<std::string, Tensor> opt_tensors;
      for (const auto& [n, t] : c.tensors) {
        if (n.rfind("model.", 0) == 0) {
          NoGradGuard g;
          pb->param(n.substr(6)).copy_(t);  // ... overwritten by the checkpoint
        } else {
          opt_tensors[n] = t;
        }
      }
      opt = make_opt(pb->params);
      opt->load_state(opt_tensors, c.metadata.at("optimizer"));
      CHECK(opt->step_count() == resume_at);
    }
    train_step(*opt, *pb, schedule, step);
  }
  return values_of(pb->params);
}

}  // namespace

TEST_CASE("save → load into a fresh optimizer → continue is bit-identical", "[optim]") {
  const json data = test::load_fixture("optim").at("data");
  optim::OneCycle onecycle({.max_lr = 0.02, .total_steps = 40, .pct_start = 0.25, .anneal = optim::Anneal::Linear});
  SECTION("AdamW with amsgrad, two groups and OneCycle cycling beta1") {
    auto make = [](const NamedTensors& ps) {
      auto groups = optim::decay_groups(ps, optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true},
                                        {"bias"});
      return std::make_unique<optim::AdamW>(groups);
    };
    const auto straight = run_with_resume(data, make, &onecycle, 40, -1);
    CHECK(run_with_resume(data, make, &onecycle, 40, 17) == straight);
    CHECK(run_with_resume(data, make, &onecycle, 40, 0) == straight);
  }
  SECTION("Adam with L2 decay") {
    auto make = [](const NamedTensors& ps) {
      return std::make_unique<optim::Adam>(ps, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.05});
    };
    CHECK(run_with_resume(data, make, nullptr, 30, 11) == run_with_resume(data, make, nullptr, 30, -1));
  }
  SECTION("SGD with Nesterov momentum") {
    auto make = [](const NamedTensors& ps) {
      return std::make_unique<optim::SGD>(ps, optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true});
    };
    CHECK(run_with_resume(data, make, nullptr, 30, 11) == run_with_resume(data, make, nullptr, 30, -1));
  }
}

TEST_CASE("state keys, JSON and file round trip", "[optim]") {
  const json data = test::load_fixture("optim").at("data");
  Problem pb(data);
  optim::AdamW opt(pb.params, {.lr = 0.01, .amsgrad = true});
  train_step(opt, pb, nullptr, 0);
  std::vector<std::string> keys;
  for (const auto& [k, t] : opt.state_tensors()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"fc.weight.exp_avg", "fc.weight.exp_avg_sq", "fc.weight.max_exp_avg_sq",
                                         "fc.bias.exp_avg", "fc.bias.exp_avg_sq", "fc.bias.max_exp_avg_sq"});
  const json j = json::parse(opt.state_json());
  CHECK(j.at("type") == "AdamW");
  CHECK(j.at("step_count") == 1);
  CHECK(j.at("state").at("fc.bias").at("step") == 1);
  CHECK_FALSE(j.at("state").contains("skip.weight"));
  CHECK(j.at("groups")[0].at("options").at("amsgrad") == true);
  CHECK(j.at("groups")[0].at("params") == json({"fc.weight", "fc.bias", "skip.weight"}));

  const auto dir = std::filesystem::temp_directory_path() / ("lsf_optim_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "opt.safetensors").string();
  opt.save(path);
  Problem pb2(data);
  optim::AdamW opt2(pb2.params, {.lr = 0.5});  // options are restored from the file
  opt2.load(path);
  CHECK(opt2.lr() == 0.01);
  CHECK(opt2.options().amsgrad);
  CHECK(values_of(opt2.state_tensors()) == values_of(opt.state_tensors()));
  // Loaded buffers are private copies.
  CHECK_FALSE(opt2.state_tensors()[0].second.storage() == opt.state_tensors()[0].second.storage());
  // A file that is not an optimizer state.
  save_safetensors(path, {{"w", zeros({2})}});
  CHECK_THROWS_WITH(opt2.load(path), Catch::Contains("no 'optimizer' metadata"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("load_state rejects state that does not fit, and changes nothing then", "[optim]") {
  const json data = test::load_fixture("optim").at("data");
  Problem pb(data);
  optim::Adam opt(pb.params, {.lr = 0.01});
  train_step(opt, pb, nullptr, 0);
  std::map<std::string, Tensor> tensors;
  for (const auto& [k, t] : opt.state_tensors()) tensors[k] = t.clone();
  const std::string js = opt.state_json();

  Problem pb2(data);
  optim::Adam fresh(pb2.params, {.lr = 0.3});
  auto expect_unchanged = [&]() {
    CHECK(fresh.lr() == 0.3);
    CHECK(fresh.state_tensors().empty());
    CHECK(fresh.step_count() == 0);
  };

  SECTION("mismatched state shapes") {
    auto bad = tensors;
    bad["fc.weight.exp_avg"] = zeros({3, 4}, kF64);
    CHECK_THROWS_WITH(fresh.load_state(bad, js), Catch::Contains("'fc.weight.exp_avg' has shape {3, 4}") &&
                                                     Catch::Contains("the parameter {4, 3}"));
    expect_unchanged();
  }
  SECTION("unknown parameter names in the state") {
    json j = json::parse(js);
    j["state"]["fc2.weight"] = j["state"]["fc.weight"];
    CHECK_THROWS_WITH(fresh.load_state(tensors, j.dump()),
                      Catch::Contains("unknown parameter name 'fc2.weight'"));
    json g = json::parse(js);
    g["groups"][0]["params"][0] = "fc9.weight";
    CHECK_THROWS_WITH(fresh.load_state(tensors, g.dump()),
                      Catch::Contains("unknown parameter names in the state: 'fc9.weight'") &&
                          Catch::Contains("not in the state: 'fc.weight'"));
    expect_unchanged();
  }
  SECTION("missing and unexpected tensors") {
    auto missing = tensors;
    missing.erase("fc.bias.exp_avg_sq");
    CHECK_THROWS_WITH(fresh.load_state(missing, js), Catch::Contains("'fc.bias.exp_avg_sq' is missing"));
    auto extra = tensors;
    extra["fc.bias.velocity"] = zeros({3}, kF64);
    CHECK_THROWS_WITH(fresh.load_state(extra, js), Catch::Contains("unexpected tensors") &&
                                                       Catch::Contains("'fc.bias.velocity'"));
    json j = json::parse(js);
    j["state"]["fc.bias"]["buffers"] = {"exp_avg"};
    CHECK_THROWS_WITH(fresh.load_state(tensors, j.dump()), Catch::Contains("lacks its 'exp_avg_sq' buffer"));
    expect_unchanged();
  }
  SECTION("another optimizer type, group count or bad options") {
    optim::AdamW other(Problem(data).params);
    CHECK_THROWS_WITH(other.load_state(tensors, js), Catch::Contains("saved by a Adam optimizer, this is AdamW"));
    json j = json::parse(js);
    j["groups"].push_back(j["groups"][0]);
    CHECK_THROWS_WITH(fresh.load_state(tensors, j.dump()), Catch::Contains("has 2 parameter groups, this optimizer 1"));
    json o = json::parse(js);
    o["groups"][0]["options"]["beta1"] = 1.5;
    CHECK_THROWS_WITH(fresh.load_state(tensors, o.dump()), Catch::Contains("invalid beta parameter at index 0: 1.5"));
    json u = json::parse(js);
    u["groups"][0]["options"]["momentum"] = 0.9;
    CHECK_THROWS_WITH(fresh.load_state(tensors, u.dump()), Catch::Contains("unknown option 'momentum'"));
    CHECK_THROWS_WITH(fresh.load_state(tensors, "{not json"), Catch::Contains("does not parse"));
    expect_unchanged();
  }
  SECTION("a good state loads") {
    fresh.load_state(tensors, js);
    CHECK(fresh.lr() == 0.01);
    CHECK(fresh.step_count() == 1);
    CHECK(fresh.state("fc.weight")->step == 1);
  }
}

TEST_CASE("invalid options and parameters are errors that name them", "[optim]") {
  Tensor p = zeros({2, 3}, kF64).requires_grad_(true);
  NamedTensors ps{{"w", p}};
  CHECK_THROWS_WITH(optim::SGD(ps, {.lr = -0.1}), Catch::Contains("SGD: invalid learning rate -0.1"));
  CHECK_THROWS_WITH(optim::Adam(ps, {.lr = -1e-3}), Catch::Contains("Adam: invalid learning rate -0.001"));
  CHECK_THROWS_WITH(optim::AdamW(ps, {.betas = {0.9, 1.0}}), Catch::Contains("AdamW: invalid beta parameter at index 1: 1"));
  CHECK_THROWS_WITH(optim::Adam(ps, {.betas = {-0.1, 0.999}}), Catch::Contains("invalid beta parameter at index 0: -0.1"));
  CHECK_THROWS_WITH(optim::Adam(ps, {.eps = -1e-8}), Catch::Contains("invalid epsilon"));
  CHECK_THROWS_WITH(optim::AdamW(ps, {.weight_decay = -0.1}), Catch::Contains("invalid weight_decay -0.1"));
  CHECK_THROWS_WITH(optim::SGD(ps, {.momentum = -0.5}), Catch::Contains("invalid momentum -0.5"));
  CHECK_THROWS_WITH(optim::SGD(ps, {.nesterov = true}), Catch::Contains("Nesterov momentum requires a momentum > 0"));
  CHECK_THROWS_WITH(optim::SGD(ps, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                    Catch::Contains("zero dampening"));
  CHECK_THROWS_WITH(optim::SGD(NamedTensors{}), Catch::Contains("empty parameter list"));
  CHECK_THROWS_WITH(optim::SGD(NamedTensors{{"w", p}, {"w", zeros({1}).requires_grad_(true)}}),
                    Catch::Contains("parameter name 'w' appears twice"));
  CHECK_THROWS_WITH(optim::SGD(NamedTensors{{"w", p}, {"tied", p}}),
                    Catch::Contains("parameters 'w' and 'tied' are the same tensor"));
  CHECK_THROWS_WITH(optim::SGD(NamedTensors{{"y", mul(p, 2.0)}}), Catch::Contains("'y' (shape {2, 3}) is not a leaf"));
  CHECK_THROWS_WITH(optim::SGD(NamedTensors{{"i", zeros({2}, kI64)}}), Catch::Contains("'i' has dtype i64"));
  CHECK_THROWS_WITH(optim::SGD(NamedTensors{{"u", Tensor()}}), Catch::Contains("'u' (group 0) is undefined"));

  optim::AdamW opt(ps);
  CHECK_THROWS_WITH(opt.set_lr(-0.5), Catch::Contains("AdamW: invalid learning rate -0.5 (group 0)"));
  CHECK_THROWS_WITH(opt.set_lr(std::nan("")), Catch::Contains("invalid learning rate nan"));
  CHECK_THROWS_WITH(opt.set_momentum(1.0), Catch::Contains("invalid beta parameter at index 0: 1"));
  CHECK_THROWS_WITH(opt.lr(3), Catch::Contains("AdamW: group 3 does not exist (the optimizer has 1 group)"));
  // A gradient of another dtype than the parameter's cannot be set; one in a bf16 parameter
  // reaches the kernel, which has no bf16 CPU path.
  Tensor h = zeros({2}, kBF16).requires_grad_(true);
  optim::Adam bf(NamedTensors{{"h", h}});
  h.set_grad(zeros({2}, kBF16));
  CHECK_THROWS_WITH(bf.step(), Catch::Contains("adam_update_") && Catch::Contains("bf16"));
  CHECK(bf.state("h") == nullptr);  // the failed step left no state behind
  CHECK(bf.state_tensors().empty());
}

TEST_CASE("the update kernels check their arguments", "[optim]") {
  Tensor p = zeros({2, 3}), g = zeros({2, 3}), m = zeros({2, 3}), v = zeros({2, 3});
  CHECK_THROWS_WITH(adam_update_(p, zeros({3, 2}), m, v, Tensor(), {}),
                    Catch::Contains("adam_update_") && Catch::Contains("{3, 2}") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(adam_update_(p, g, zeros({6}), v, Tensor(), {}),
                    Catch::Contains("exp_avg buffer of shape {6}"));
  CHECK_THROWS_WITH(adam_update_(p, g, m, v, Tensor(), {.amsgrad = true}),
                    Catch::Contains("max_exp_avg_sq buffer is undefined"));
  CHECK_THROWS_WITH(adam_update_(p, g, m, v, Tensor(), {.step = 0}), Catch::Contains("step=0"));
  CHECK_THROWS_WITH(adam_update_(p, zeros({2, 3}, kF64), m, v, Tensor(), {}), Catch::Contains("adam_update_"));
  CHECK_THROWS_WITH(sgd_update_(p, g, Tensor(), {.momentum = 0.9}),
                    Catch::Contains("momentum_buffer buffer is undefined"));
  CHECK_THROWS_WITH(sgd_update_(zeros({1}).expand({4}), zeros({4}), Tensor(), {.lr = 0.1}),
                    Catch::Contains("broadcast view"));
  CHECK_THROWS_WITH(adam_update_(p, g, zeros({3, 2}).t(), v, Tensor(), {}),
                    Catch::Contains("exp_avg buffer must be contiguous"));
}
