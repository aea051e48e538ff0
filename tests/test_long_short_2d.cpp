// Tests of nn::LongShortAttention2d (docs/transformer-ls.md §4.2–4.3, test vectors §9.3): against the
// independent dense oracle of long_short_2d_oracle.h in f64 and f32, against a PyTorch
// implementation (fixtures/gen_long_short_2d.py; forward and gradients), the RPE index map and its
// collision counts, border masking, w = 1, full coverage vs dense attention, the global-token
// update, row-stochasticity and DualLN scale invariance, f64 gradchecks, bad configurations, and
// the probabilities an nn::CaptureScope records (the oracle's).
#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "helpers.h"
#include "long_short_2d_oracle.h"
#include "lsformer/models/attention/long_short_2d.h"
#include "lsformer/models/nn/capture.h"
#include "lsformer/models/nn/init.h"

using namespace lsf;
using nn::LongShortAttention2d;
using nn::LongShortAttention2dOptions;
using test::ls2d::OracleConfig;
using test::ls2d::OracleParams;

namespace {

// Random parameter values of O(1) effect: every branch (LN affines, projection, RPE) matters.
void randomise(LongShortAttention2d& m, uint64_t seed) {
  Generator gen(seed);
  for (auto& [name, t] : m.named_parameters()) {
    const bool is_gamma = name.find("dual_ln") != std::string::npos && name.find("weight") != std::string::npos;
    if (is_gamma) nn::init::normal_(t, 1.0, 0.3, &gen);
    else if (name == "local_relative_position_bias_table") nn::init::normal_(t, 0.0, 1.0, &gen);
    else nn::init::normal_(t, 0.0, 0.5, &gen);
  }
}

std::vector<double> values(const Tensor& t) { return t.defined() ? t.to_vector<double>() : std::vector<double>{}; }

OracleParams params_of(const LongShortAttention2d& m) {
  OracleParams p;
  p.w_qkv = values(m.qkv->weight);
  p.b_qkv = values(m.qkv->bias);
  p.w_o = values(m.proj->weight);
  p.b_o = values(m.proj->bias);
  if (m.to_dynamic_projection) {
    p.w_p = values(m.to_dynamic_projection->weight);
    p.b_p = values(m.to_dynamic_projection->bias);
  }
  if (m.dual_ln_full) {
    p.lnl_g = values(m.dual_ln_full->weight);
    p.lnl_b = values(m.dual_ln_full->bias);
    p.lng_g = values(m.dual_ln_dp->weight);
    p.lng_b = values(m.dual_ln_dp->bias);
  }
  p.table = values(m.local_relative_position_bias_table);
  return p;
}

OracleConfig config_of(const LongShortAttention2dOptions& o, int64_t B, int64_t nx, int64_t g) {
  return {.B = B, .C = o.dim, .heads = o.heads, .window = o.window, .rank = o.rank, .global = g, .side_len = nx,
          .rpe = o.rpe, .dual_ln = o.dual_ln};
}

nn::AttentionArgs map_args(int64_t nx, int64_t g) { return {.height = nx, .width = nx, .num_global = g}; }

// Module vs oracle in f64 and f32. Tolerance: the computation chains about 8 stages (qkv, LN_L,
// projection softmax and sum, LN_G, logits, joint softmax and weighted sum, global update, proj),
// each a reduction of length ≤ L = max(N, r + T² + g, C) over O(1) values that adds at most
// 8·L·u relative error, so atol = rtol = 64·L·u, u = 2⁻⁵³ (f64) or 2⁻²⁴ (f32). In f32 the oracle
// gets the f32-rounded parameters and inputs, so only the module's arithmetic is measured.
void check_against_oracle(const LongShortAttention2dOptions& o, int64_t B, int64_t nx, int64_t g, uint64_t seed) {
  INFO("w = " << o.window << ", r = " << o.rank << ", g = " << g << ", nx = " << nx << ", rpe = " << o.rpe);
  for (DType dtype : {kF64, kF32}) {
    INFO(dtype);
    LongShortAttention2d m(o);
    randomise(m, seed);
    m.to(dtype);
    Generator gen(seed + 1);
    Tensor x = randn({B, g + nx * nx, o.dim}, TensorOptions(kF64), &gen).to(dtype);
    Tensor y = m.forward(x, map_args(nx, g));
    REQUIRE(y.shape() == x.shape());
    std::vector<double> expected = test::ls2d::oracle_forward(config_of(o, B, nx, g), params_of(m), values(x));
    const int64_t T = m.span(), L = std::max({nx * nx, o.rank + T * T + g, o.dim});
    const double u = dtype == kF64 ? 0x1p-53 : 0x1p-24, tol = 64 * double(L) * u;
    test::check_close(y, expected, tol, tol);
  }
}

// A copy of x with patch (py, px) of batch 0 changed.
Tensor perturbed(const Tensor& x, int64_t g, int64_t nx, int64_t py, int64_t px) {
  std::vector<double> v = values(x);
  const int64_t C = x.size(2), t = g + py * nx + px;
  for (int64_t c = 0; c < C; ++c) v[size_t(t * C + c)] += 1.0 + 0.1 * double(c);
  return tensor(v, x.shape()).to(x.dtype());
}

bool rows_equal(const Tensor& a, const Tensor& b, int64_t row) {
  return a.select(1, row).to_vector<double>() == b.select(1, row).to_vector<double>();
}

}  // namespace

// ---- RPE index map (§4.3) ---------------------------------------------------------------------

TEST_CASE("2-D RPE index map reproduces the official colliding table layout", "[long_short_2d]") {
  // Distinct (dy, dx) offsets versus distinct table rows, regenerated from the coordinates.
  auto counts = [](int64_t w) {
    const int64_t p = w / 2, T = w + 2 * p;
    Tensor index = LongShortAttention2d::relative_position_index_for(w);
    REQUIRE(index.shape() == Shape{w * w, T * T});
    std::vector<int64_t> rows = index.to_vector<int64_t>();
    std::set<std::pair<int64_t, int64_t>> offsets;
    std::set<int64_t> used(rows.begin(), rows.end());
    for (int64_t qy = 0; qy < w; ++qy)
      for (int64_t qx = 0; qx < w; ++qx)
        for (int64_t ky = -p; ky < w + p; ++ky)
          for (int64_t kx = -p; kx < w + p; ++kx) offsets.insert({qy - ky, qx - kx});
    const int64_t table = LongShortAttention2d::rpe_table_rows(w);
    // Every row of the table is used: the used rows are exactly 0 .. table−1.
    CHECK(*used.begin() == 0);
    CHECK(*used.rbegin() == table - 1);
    return std::tuple<int64_t, int64_t, int64_t>(int64_t(offsets.size()), int64_t(used.size()), table);
  };
  CHECK(counts(2) == std::tuple<int64_t, int64_t, int64_t>(25, 21, 21));
  CHECK(counts(7) == std::tuple<int64_t, int64_t, int64_t>(361, 253, 253));  // 108 shared rows
  CHECK(counts(8) == std::tuple<int64_t, int64_t, int64_t>(529, 375, 375));
  // The general size 2(w+p−1)(2p+w+1)+1 (p = ⌊w/2⌋) equals the number of rows used, for every w.
  for (int64_t w = 2; w <= 12; ++w) {
    INFO("w = " << w);
    const int64_t p = w / 2;
    auto [offsets, used, table] = counts(w);
    CHECK(table == 2 * (w + p - 1) * (2 * p + w + 1) + 1);
    CHECK(used == table);
    CHECK(offsets == (2 * (w + p) - 1) * (2 * (w + p) - 1));
  }

  // The worked example of §4.3 (w = 2): each query's 16 keys, row-major from (−1,−1), map to
  // consecutive descending rows within each key row, 4 apart between key rows.
  Tensor index = LongShortAttention2d::relative_position_index_for(2);
  auto row_of = [&](int64_t q) { return index.select(0, q).to_vector<int64_t>(); };
  CHECK(row_of(0) == std::vector<int64_t>{15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  CHECK(row_of(1) == std::vector<int64_t>{16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
  CHECK(row_of(2) == std::vector<int64_t>{19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4});
  CHECK(row_of(3) == std::vector<int64_t>{20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5});
  // One explicit collision: query (0,0) with key (0,2) has offset (dy, dx) = (2, 0) → row 2·4 + 0 = 8;
  // query (1,1) with key (2,−1) has (1, 4) → row 1·4 + 4 = 8 as well (stride 4 < 5 distinct dx).
  CHECK(index.select(0, 0).to_vector<int64_t>()[1 * 4 + 3] == 8);  // key (0, 2) is slot (1, 3)
  CHECK(index.select(0, 3).to_vector<int64_t>()[3 * 4 + 0] == 8);  // key (2, −1) is slot (3, 0)

  CHECK_THROWS_WITH(LongShortAttention2d::relative_position_index_for(1),
                    Catch::Contains("LongShortAttention2d") && Catch::Contains("w = 1"));
}

TEST_CASE("2-D long-short attention has the official parameter names and shapes", "[long_short_2d]") {
  // ViL-LS-Medium stage 1: C 96, 3 heads, w 7, r 8.
  LongShortAttention2d m({.dim = 96, .heads = 3, .window = 7, .rank = 8});
  CHECK(m.side() == 3);
  CHECK(m.span() == 13);  // 169 window keys; with r = 8 and g = 1, 178 slots per query
  std::vector<std::pair<std::string, Shape>> expected = {
      {"local_relative_position_bias_table", {253, 3}}, {"relative_position_index", {49, 169}},
      {"qkv.weight", {288, 96}},                       {"qkv.bias", {288}},
      {"proj.weight", {96, 96}},                       {"proj.bias", {96}},
      {"to_dynamic_projection.weight", {24, 96}},      {"to_dynamic_projection.bias", {24}},
      {"dual_ln_dp.weight", {96}},                     {"dual_ln_dp.bias", {96}},
      {"dual_ln_full.weight", {96}},                   {"dual_ln_full.bias", {96}}};
  auto state = m.state_dict();
  REQUIRE(state.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(state[i].first == expected[i].first);
    CHECK(state[i].second.shape() == expected[i].second);
  }
  CHECK(m.relative_position_index.dtype() == kI64);
  // w = 8 (ViL-LS-Medium-384): T = 16, table 375 rows; r = 0 drops the projection; rpe off drops the table.
  LongShortAttention2d m8({.dim = 16, .heads = 2, .window = 8, .rank = 0});
  CHECK(m8.span() == 16);
  CHECK(m8.local_relative_position_bias_table.shape() == Shape{375, 2});
  CHECK(!m8.to_dynamic_projection);
  LongShortAttention2d plain({.dim = 16, .heads = 2, .window = 4, .rank = 2, .rpe = false});
  CHECK(plain.named_buffers().empty());
  CHECK(!plain.local_relative_position_bias_table.defined());
}

// ---- forward against the oracle ---------------------------------------------------------------

TEST_CASE("2-D long-short attention matches the dense oracle (T7 and variants)", "[long_short_2d]") {
  // T7: nx 4, C 8, h 2, w 2 (side 1, T 4), r 3, g 1, RPE on.
  check_against_oracle({.dim = 8, .heads = 2, .window = 2, .rank = 3}, 1, 4, 1, 11);
  // Batch of 2, no global token, no qkv bias.
  check_against_oracle({.dim = 8, .heads = 2, .window = 2, .rank = 3, .qkv_bias = false}, 2, 4, 0, 12);
  // Odd w = 3 (side 1, T 5, p 1) on a 6×6 map: 2×2 groups with masking on both sides.
  check_against_oracle({.dim = 8, .heads = 2, .window = 3, .rank = 2}, 1, 6, 1, 13);
  // w = 4 (side 2, T 8) with 2×2 groups; r = 0 (window and global slots only).
  check_against_oracle({.dim = 12, .heads = 3, .window = 4, .rank = 0}, 1, 8, 1, 14);
  // RPE off.
  check_against_oracle({.dim = 8, .heads = 2, .window = 2, .rank = 2, .rpe = false}, 1, 4, 1, 15);
  // One head, a single group covering the map (nx = w = 4).
  check_against_oracle({.dim = 4, .heads = 1, .window = 4, .rank = 1}, 1, 4, 1, 16);
  // Without DualLN (the ablation switch): no LN_L / LN_G parameters, raw keys and values.
  check_against_oracle({.dim = 8, .heads = 2, .window = 2, .rank = 3, .dual_ln = false}, 1, 4, 1, 17);
  LongShortAttention2d plain({.dim = 8, .heads = 2, .window = 2, .rank = 3, .dual_ln = false});
  for (const auto& [name, t] : plain.named_parameters()) CHECK(name.find("dual_ln") == std::string::npos);
  CHECK(plain.parameter_count() + 4 * 8 == LongShortAttention2d({.dim = 8, .heads = 2, .window = 2, .rank = 3}).parameter_count());
}

TEST_CASE("2-D long-short attention serves several map sizes with one module", "[long_short_2d]") {
  // The cached index tensors must follow the map side: 4×4, then 6×6, then 4×4 again.
  LongShortAttention2dOptions o{.dim = 8, .heads = 2, .window = 2, .rank = 2};
  LongShortAttention2d m(o);
  randomise(m, 17);
  m.to(kF64);
  Generator gen(18);
  for (auto [nx, g] : std::vector<std::pair<int64_t, int64_t>>{{4, 1}, {6, 0}, {4, 1}}) {
    INFO("nx = " << nx);
    Tensor x = randn({1, g + nx * nx, 8}, TensorOptions(kF64), &gen);
    std::vector<double> expected = test::ls2d::oracle_forward(config_of(o, 1, nx, g), params_of(m), values(x));
    const double tol = 64 * double(std::max<int64_t>(nx * nx, 2 + 16 + g)) * 0x1p-53;  // as check_against_oracle
    test::check_close(m.forward(x, map_args(nx, g)), expected, tol, tol);
  }
}

TEST_CASE("2-D long-short attention with w = 1 uses 3x3 neighbourhoods and refuses RPE", "[long_short_2d]") {
  // §1.6 / §4.3: w = 1 gives side 1, T = 3; the official RPE table cannot serve it.
  LongShortAttention2d m({.dim = 8, .heads = 2, .window = 1, .rank = 2, .rpe = false});
  CHECK(m.side() == 1);
  CHECK(m.span() == 3);
  check_against_oracle({.dim = 8, .heads = 2, .window = 1, .rank = 2, .rpe = false}, 1, 3, 1, 21);
  check_against_oracle({.dim = 8, .heads = 2, .window = 1, .rank = 0, .rpe = false}, 1, 4, 0, 22);
  // Locality: with r = 0 and g = 0, patch (0,0) sees exactly patches (0..1) × (0..1).
  LongShortAttention2d local({.dim = 8, .heads = 2, .window = 1, .rank = 0, .rpe = false});
  local.to(kF64);
  randomise(local, 23);
  Generator gen(24);
  Tensor x = randn({1, 16, 8}, TensorOptions(kF64), &gen);
  Tensor y = local.forward(x, map_args(4, 0));
  CHECK(!rows_equal(y, local.forward(perturbed(x, 0, 4, 1, 1), map_args(4, 0)), 0));
  CHECK(rows_equal(y, local.forward(perturbed(x, 0, 4, 2, 0), map_args(4, 0)), 0));
  CHECK(rows_equal(y, local.forward(perturbed(x, 0, 4, 0, 2), map_args(4, 0)), 0));
  CHECK_THROWS_WITH(LongShortAttention2d({.dim = 8, .heads = 2, .window = 1, .rank = 2}),
                    Catch::Contains("LongShortAttention2d") && Catch::Contains("w = 1") &&
                        Catch::Contains("rpe = false"));
}

TEST_CASE("2-D long-short attention masks keys outside the image (T7 border)", "[long_short_2d]") {
  // nx 4, w 2: group (0,0) covers rows/cols −1..2, of which 0..2 are real (9 valid, 7 masked);
  // group (1,1) covers rows/cols 1..4, of which 1..3 are real. With r = 0 and g = 0 nothing else
  // couples the tokens, so perturbing a patch changes exactly the groups whose blocks contain it.
  LongShortAttention2d m({.dim = 8, .heads = 2, .window = 2, .rank = 0});
  m.to(kF64);
  randomise(m, 31);
  Generator gen(32);
  Tensor x = randn({1, 16, 8}, TensorOptions(kF64), &gen);
  Tensor y = m.forward(x, map_args(4, 0));
  const std::vector<int64_t> group00 = {0, 1, 4, 5}, group11 = {10, 11, 14, 15};
  for (int64_t py = 0; py < 4; ++py) {
    for (int64_t px = 0; px < 4; ++px) {
      INFO("perturbed patch (" << py << ", " << px << ")");
      Tensor y2 = m.forward(perturbed(x, 0, 4, py, px), map_args(4, 0));
      const bool in00 = py <= 2 && px <= 2, in11 = py >= 1 && px >= 1;
      for (int64_t q : group00) CHECK(rows_equal(y, y2, q) == !in00);
      for (int64_t q : group11) CHECK(rows_equal(y, y2, q) == !in11);
    }
  }
}

TEST_CASE("2-D long-short attention with one group equals dense attention (T8)", "[long_short_2d]") {
  // nx = w = 4 (T = 8, side 2): the block covers the whole map; r = 0, RPE off.
  for (int64_t g : {0, 1}) {
    INFO("g = " << g);
    LongShortAttention2d m({.dim = 8, .heads = 2, .window = 4, .rank = 0, .rpe = false});
    m.to(kF64);
    randomise(m, 41 + uint64_t(g));
    Generator gen(43);
    const int64_t n = g + 16, C = 8, h = 2, e = 4;
    Tensor x = randn({1, n, C}, TensorOptions(kF64), &gen);
    Tensor y = m.forward(x, map_args(4, g));

    // Dense multi-head attention of every patch query over all g + N keys (LN_L on k and v).
    TensorList parts = split(m.qkv->forward(x), C, 2);
    auto heads = [&](const Tensor& t) { return t.reshape({1, n, h, e}).permute({0, 2, 1, 3}); };
    Tensor q = heads(parts[0] * (1.0 / 2.0));  // e^-1/2 = 1/2
    Tensor k = heads(m.dual_ln_full->forward(parts[1])), v = heads(m.dual_ln_full->forward(parts[2]));
    Tensor out = matmul(softmax(matmul(q.narrow(2, g, 16), k.transpose(-1, -2)), -1), v);  // [1, h, 16, e]
    Tensor all = out;
    if (g == 1) {
      // The global row: keys [k_g ; out_j], values [v_g ; out_j] (context as keys, §4.2 step 10).
      Tensor qg = q.narrow(2, 0, 1);
      Tensor keys = cat({k.narrow(2, 0, 1), out}, 2), vals = cat({v.narrow(2, 0, 1), out}, 2);
      all = cat({matmul(softmax(matmul(qg, keys.transpose(-1, -2)), -1), vals), out}, 2);
    }
    Tensor expected = m.proj->forward(all.permute({0, 2, 1, 3}).reshape({1, n, C}));
    // f64, reductions of length ≤ 17 through ~5 stages: 64·17·2⁻⁵³ as in check_against_oracle.
    const double tol = 64 * 17 * 0x1p-53;
    test::check_close(y, expected, tol, tol);
  }
}

TEST_CASE("2-D long-short attention probabilities sum to one per query", "[long_short_2d]") {
  // LN_L and LN_G with gamma 0 and beta c make every key and value (window, projected, global)
  // the constant vector c, so each output row is (Σ probabilities)·c: exactly c per head when
  // every query's joint row (masked slots included as zeros) and the global update sum to 1.
  for (int64_t g : {0, 1}) {
    LongShortAttention2d m({.dim = 8, .heads = 2, .window = 2, .rank = 3});
    m.to(kF64);
    randomise(m, 51);
    Generator gen(52);
    Tensor c = randn({8}, TensorOptions(kF64), &gen);
    {
      NoGradGuard no_grad;
      for (auto* ln : {m.dual_ln_full.get(), m.dual_ln_dp.get()}) {
        ln->weight.zero_();
        ln->bias.copy_(c);
      }
    }
    Tensor x = randn({2, g + 16, 8}, TensorOptions(kF64), &gen);
    Tensor y = m.forward(x, map_args(4, g));
    Tensor expected = m.proj->forward(c).expand({2, g + 16, 8});
    // Σ of ≤ 20 probabilities times c, then proj (length 8): 64·20·2⁻⁵³.
    const double tol = 64 * 20 * 0x1p-53;
    test::check_close(y, expected, tol, tol);
  }
}

TEST_CASE("2-D long-short attention is invariant to scaling W_k or W_v (DualLN)", "[long_short_2d]") {
  LongShortAttention2d m({.dim = 8, .heads = 2, .window = 2, .rank = 3});
  m.to(kF64);
  randomise(m, 61);
  Generator gen(62);
  Tensor x = randn({1, 17, 8}, TensorOptions(kF64), &gen);
  Tensor y = m.forward(x, map_args(4, 1));
  // LN_L(α·k) differs from LN_L(k) only through ε: (k − μ)/√(var + ε/α²) vs (k − μ)/√(var + ε), a
  // relative change ≤ ε·|1 − α⁻²|/(2·var) ≤ 15·1e-5/(2·var_min) for α ∈ {3, 1/4}. The rows of k and v
  // here (x ~ N(0,1), weights ~ N(0, 0.25), C = 8) have var_min ≥ 0.1 (asserted below), so the
  // normalised keys/values move by ≤ 7.5e-4 relative; softmax, LN_G and proj are Lipschitz with
  // O(1) constants on these O(1) values, so 1e-3 absolute/relative bounds the output change, far
  // below the O(1) change a real dependence on α would cause.
  {
    TensorList parts = split(m.qkv->forward(x), 8, 2);
    for (int64_t part : {1, 2}) {
      const double var_min = amin(var(parts[size_t(part)], {-1}, /*correction=*/0)).item<double>();
      CHECK(var_min >= 0.1);
    }
  }
  for (int64_t part : {1, 2}) {  // 1: W_k, b_k; 2: W_v, b_v
    for (double alpha : {3.0, 0.25}) {
      INFO("part " << part << ", alpha " << alpha);
      LongShortAttention2d s({.dim = 8, .heads = 2, .window = 2, .rank = 3});
      s.to(kF64);
      s.load_state_dict([&] {
        std::map<std::string, Tensor> st;
        for (auto& [name, t] : m.state_dict()) st[name] = t.detach().clone();
        return st;
      }());
      {
        NoGradGuard no_grad;
        s.qkv->weight.narrow(0, part * 8, 8).copy_(m.qkv->weight.narrow(0, part * 8, 8) * alpha);
        s.qkv->bias.narrow(0, part * 8, 8).copy_(m.qkv->bias.narrow(0, part * 8, 8) * alpha);
      }
      Tensor ys = s.forward(x, map_args(4, 1));
      test::check_close(ys, y, 1e-3, 1e-3);
    }
  }
}

TEST_CASE("2-D long-short attention dropout is off in eval mode and active in training", "[long_short_2d]") {
  LongShortAttention2dOptions o{.dim = 8, .heads = 2, .window = 2, .rank = 3, .attn_drop = 0.5};
  LongShortAttention2d m(o);
  randomise(m, 71);
  m.to(kF64);
  Generator gen(72);
  Tensor x = randn({1, 17, 8}, TensorOptions(kF64), &gen);
  m.eval();
  std::vector<double> expected = test::ls2d::oracle_forward(config_of(o, 1, 4, 1), params_of(m), values(x));
  const double tol = 64 * 20 * 0x1p-53;  // as check_against_oracle, L = r + T² + g = 20
  test::check_close(m.forward(x, map_args(4, 1)), expected, tol, tol);
  m.train();
  Tensor yt = m.forward(x, map_args(4, 1));
  CHECK(yt.to_vector<double>() != m.forward(x, map_args(4, 1)).to_vector<double>());  // fresh masks
}

TEST_CASE("2-D long-short attention runs at the ViL-LS stage-1 size", "[long_short_2d]") {
  // 56×56 patches, C 96, 3 heads, w 7, r 8, g 1: 178 slots per query, O(N) memory.
  LongShortAttention2d m({.dim = 96, .heads = 3, .window = 7, .rank = 8});
  Generator gen(81);
  Tensor x = randn({1, 1 + 56 * 56, 96}, TensorOptions(kF32), &gen);
  Tensor y = m.forward(x, map_args(56, 1));
  REQUIRE(y.shape() == x.shape());
  std::vector<float> v = y.to_vector<float>();
  CHECK(std::all_of(v.begin(), v.end(), [](float a) { return std::isfinite(a); }));
}

// ---- PyTorch reference (tests/fixtures/gen_long_short_2d.py) ---------------------------------

TEST_CASE("2-D long-short attention matches a PyTorch implementation, forward and backward", "[long_short_2d]") {
  // The script's module follows the official code's style (pad + unfold blocks, meshgrid RPE
  // index); its relative_position_index must equal ours exactly, and with its weights loaded
  // our output and every gradient must match PyTorch's f64 autograd.
  const auto fixture = test::load_fixture("long_short_2d");
  for (const char* name : {"t7", "odd"}) {
    INFO(name);
    const auto& c = fixture.at(name);
    const auto& cf = c.at("config");
    const int64_t nx = cf.at("nx"), g = cf.at("global");
    LongShortAttention2dOptions o{.dim = cf.at("dim"), .heads = cf.at("heads"), .window = cf.at("window"),
                                  .rank = cf.at("rank")};
    LongShortAttention2d m(o);
    m.to(kF64);
    test::check_equal<int64_t>(m.relative_position_index, m.relative_position_index.shape(),
                               test::fixture_tensor(c.at("state").at("relative_position_index")).to_vector<int64_t>());
    std::map<std::string, Tensor> state;
    for (const auto& [key, t] : c.at("state").items()) state[key] = test::fixture_tensor(t);
    m.load_state_dict(state);
    Tensor x = test::fixture_tensor(c.at("x")).requires_grad_(true);
    Tensor y = m.forward(x, map_args(nx, g));
    // Forward as check_against_oracle (64·L·u); the backward runs the same chain in reverse
    // plus the transposed products, twice the stages: 128·L·u. f64: u = 2⁻⁵³.
    const int64_t T = m.span(), L = std::max({nx * nx, o.rank + T * T + g, o.dim});
    const double tol = 64 * double(L) * 0x1p-53, gtol = 2 * tol;
    test::check_close(y, test::fixture_tensor(c.at("y")), tol, tol);
    y.backward(test::fixture_tensor(c.at("gy")));
    test::check_close(x.grad(), test::fixture_tensor(c.at("dx")), gtol, gtol);
    for (auto& [pname, p] : m.named_parameters()) {
      INFO(pname);
      test::check_close(p.grad(), test::fixture_tensor(c.at("grads").at(pname)), gtol, gtol);
    }
  }
}

// ---- gradients --------------------------------------------------------------------------------

TEST_CASE("2-D long-short attention passes f64 gradcheck for input and every parameter", "[long_short_2d]") {
  struct Case {
    LongShortAttention2dOptions o;
    int64_t nx, g;
  };
  const std::vector<Case> cases = {
      {{.dim = 4, .heads = 2, .window = 2, .rank = 2}, 4, 1},                 // T7-like, RPE on
      {{.dim = 4, .heads = 2, .window = 3, .rank = 1}, 3, 0},                 // odd w, one group
      {{.dim = 4, .heads = 1, .window = 1, .rank = 0, .rpe = false}, 3, 1},  // w = 1, no projection
  };
  // Tiny shapes: one thread, since OpenMP start-up would dominate hundreds of small forwards.
  const test::ThreadCount one_thread(1);
  for (const Case& c : cases) {
    INFO("w = " << c.o.window << ", r = " << c.o.rank << ", g = " << c.g);
    LongShortAttention2d m(c.o);
    randomise(m, 91);
    m.to(kF64);
    Tensor x = test::grad_input({1, c.g + c.nx * c.nx, c.o.dim}, 92);
    TensorList inputs = {x};
    for (auto& [name, t] : m.named_parameters()) inputs.push_back(t);  // every parameter class
    auto r = testing::gradcheck(
        [&](const TensorList& in) { return m.forward(in[0], map_args(c.nx, c.g)); }, inputs);
    INFO(r.message);
    CHECK(r.ok);
  }
}

TEST_CASE("2-D long-short attention passes a projected f64 gradcheck at a larger shape", "[long_short_2d]") {
  // nx 8, w 4 (T 8, 2×2 groups), C 8, h 2, r 2, g 1, batch 2: the Jacobian has far more than
  // 2^15 entries, so gradcheck compares random projections uᵀJv (ops/gradcheck.h).
  LongShortAttention2d m({.dim = 8, .heads = 2, .window = 4, .rank = 2});
  randomise(m, 95);
  m.to(kF64);
  Tensor x = test::grad_input({2, 65, 8}, 96);
  TensorList inputs = {x};
  for (auto& [name, t] : m.named_parameters()) inputs.push_back(t);
  const test::ThreadCount one_thread(1);  // small shapes, as above
  auto r = testing::gradcheck([&](const TensorList& in) { return m.forward(in[0], map_args(8, 1)); }, inputs);
  INFO(r.message);
  CHECK(r.ok);
}

// ---- bad configurations -----------------------------------------------------------------------

TEST_CASE("2-D long-short attention rejects bad configurations with clear messages", "[long_short_2d]") {
  using Catch::Contains;
  LongShortAttention2d m({.dim = 8, .heads = 2, .window = 2, .rank = 2});
  Tensor x = zeros({1, 17, 8});
  CHECK_THROWS_WITH(m.forward(zeros({1, 33, 8}), {.height = 4, .width = 8, .num_global = 1}),
                    Contains("LongShortAttention2d") && Contains("square") && Contains("4 × width 8"));
  LongShortAttention2d m4({.dim = 8, .heads = 2, .window = 4, .rank = 2});
  CHECK_THROWS_WITH(m4.forward(zeros({1, 37, 8}), map_args(6, 1)),
                    Contains("LongShortAttention2d") && Contains("6 is not a multiple of the window w = 4") &&
                        Contains("pad the map to 8"));
  CHECK_THROWS_WITH(m.forward(zeros({1, 10, 8}), map_args(4, 1)),
                    Contains("LongShortAttention2d") && Contains("{1, 10, 8}") && Contains("[B, 17, 8]"));
  CHECK_THROWS_WITH(m.forward(x, {}), Contains("LongShortAttention2d") && Contains("args.height"));
  CHECK_THROWS_WITH(m.forward(zeros({1, 18, 8}), map_args(4, 2)),
                    Contains("LongShortAttention2d") && Contains("num_global = 2"));
  CHECK_THROWS_WITH(m.forward(x, {.mask = ones({1, 17}).to(kBool), .height = 4, .width = 4, .num_global = 1}),
                    Contains("LongShortAttention2d") && Contains("mask"));
  CHECK_THROWS_WITH(m.forward(x, {.memory = zeros({1, 4, 8}), .height = 4, .width = 4, .num_global = 1}),
                    Contains("LongShortAttention2d") && Contains("memory"));
  CHECK_THROWS_WITH(m.forward(x, {.cls = zeros({1, 1, 8}), .height = 4, .width = 4, .num_global = 1}),
                    Contains("LongShortAttention2d") && Contains("cls"));
  CHECK_THROWS_WITH(m.forward(x, {.cls_only = true, .height = 4, .width = 4, .num_global = 1}),
                    Contains("LongShortAttention2d") && Contains("cls_only"));
  CHECK_THROWS_WITH(m.forward(zeros({1, 17, 8}, TensorOptions(kI64)), map_args(4, 1)),
                    Contains("LongShortAttention2d") && Contains("f32 or f64"));
  CHECK_THROWS_WITH(m.forward(Tensor(), map_args(4, 1)), Contains("LongShortAttention2d") && Contains("undefined"));
  CHECK_THROWS_WITH(LongShortAttention2d({.dim = 10, .heads = 3}),
                    Contains("LongShortAttention2d") && Contains("divisible by heads = 3"));
  CHECK_THROWS_WITH(LongShortAttention2d({.dim = 8, .heads = 2, .window = 0}),
                    Contains("LongShortAttention2d") && Contains("w = 0"));
  CHECK_THROWS_WITH(LongShortAttention2d({.dim = 8, .heads = 2, .window = 2, .rank = -1}),
                    Contains("LongShortAttention2d") && Contains("r = -1"));
}

// ---- external projections and the projection stride (CvT*-LS extensions) -------------------------

TEST_CASE("forward_projected with the module's own projections equals forward", "[long_short_2d]") {
  // The core of a module built with external_projections, fed qkv(x) and to_dynamic_projection(x
  // patches) of an ordinary module with the same remaining parameters, gives the same output.
  LongShortAttention2d own({.dim = 8, .heads = 2, .window = 2, .rank = 3});
  randomise(own, 31);
  LongShortAttention2d ext({.dim = 8, .heads = 2, .window = 2, .rank = 3, .external_projections = true});
  CHECK(!ext.qkv);
  CHECK(!ext.to_dynamic_projection);
  std::map<std::string, Tensor> shared;
  for (const auto& [name, t] : own.state_dict()) shared[name] = t;
  ext.load_state_dict(shared, /*strict=*/false);  // qkv / to_dynamic_projection are "unexpected"
  own.to(kF64);
  ext.to(kF64);
  Tensor x = test::grad_input({2, 17, 8}, 32);
  TensorList parts = split(own.qkv->forward(x), 8, 2);
  Tensor logits = own.to_dynamic_projection->forward(x.narrow(1, 1, 16));
  // Same ops in the same order: equal to the last bit.
  test::check_close(ext.forward_projected(parts[0], parts[1], parts[2], logits, map_args(4, 1)),
                    own.forward(x, map_args(4, 1)), 0, 0);
  CHECK_THROWS_WITH(ext.forward(x, map_args(4, 1)), Catch::Contains("external_projections"));
  CHECK_THROWS_WITH(ext.forward_projected(parts[0], parts[1], parts[2], Tensor(), map_args(4, 1)),
                    Catch::Contains("projection_logits must be [B, ⌈H/s⌉·⌈W/s⌉, h·r] = [2, 16, 6]"));
  CHECK_THROWS_WITH(ext.forward_projected(parts[0], parts[1].narrow(1, 0, 9), parts[2], logits, map_args(4, 1)),
                    Catch::Contains("q, k and v must share one shape"));
}

TEST_CASE("projection_stride s compresses only every s-th row and column", "[long_short_2d]") {
  // Stride 2 on a 6×6 map keeps rows/columns 0, 2, 4 (9 tokens). Equivalent: stride 1 with the
  // other tokens' projection logits at −∞, so the softmax over tokens gives them weight 0.
  for (int64_t g : {0, 1}) {
    INFO("g = " << g);
    LongShortAttention2dOptions o{.dim = 8, .heads = 2, .window = 3, .rank = 2, .external_projections = true};
    LongShortAttention2d full(o);
    o.projection_stride = 2;
    LongShortAttention2d strided(o);
    randomise(full, 41);
    strided.load_state_dict([&] {
      std::map<std::string, Tensor> s;
      for (const auto& [name, t] : full.state_dict()) s[name] = t;
      return s;
    }());
    full.to(kF64);
    strided.to(kF64);
    const int64_t nx = 6, N = 36;
    Tensor q = test::grad_input({1, g + N, 8}, 42), k = test::grad_input({1, g + N, 8}, 43),
           v = test::grad_input({1, g + N, 8}, 44);
    Tensor kept_logits = test::grad_input({1, 9, 4}, 45);
    std::vector<double> dense(size_t(N * 4), -INFINITY);
    const std::vector<double> kv = kept_logits.to_vector<double>();
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t c = 0; c < 4; ++c) dense[size_t(((2 * i) * nx + 2 * j) * 4 + c)] = kv[size_t((i * 3 + j) * 4 + c)];
    Tensor y_strided = strided.forward_projected(q, k, v, kept_logits, map_args(nx, g));
    Tensor y_masked = full.forward_projected(q, k, v, tensor(dense, {1, N, 4}), map_args(nx, g));
    // Zero-weight terms add exact zeros; the remaining sums differ only in how BLAS blocks them:
    // 16·N·2⁻⁵³ covers a reordered sum of ≤ N = 36 terms through the ≈ 8 stages of the layer.
    test::check_close(y_strided, y_masked, 16 * N * 0x1p-53, 16 * N * 0x1p-53);
    auto r = testing::gradcheck(
        [&](const TensorList& in) { return strided.forward_projected(in[0], in[1], in[2], in[3], map_args(nx, g)); },
        {q, k, v, kept_logits});
    INFO(r.message);
    CHECK(r.ok);
  }
  // The module's own W_P also reads every s-th patch (4×4 map, s = 3: rows/columns 0 and 3).
  LongShortAttention2d own({.dim = 8, .heads = 2, .window = 2, .rank = 1, .projection_stride = 3});
  CHECK(own.forward(randn({1, 17, 8}), map_args(4, 1)).shape() == Shape{1, 17, 8});
  CHECK_THROWS_WITH(LongShortAttention2d({.dim = 8, .heads = 2, .window = 2, .projection_stride = 0}),
                    Catch::Contains("projection_stride = 0"));
}

TEST_CASE("LongShortAttention2d records the oracle's joint probabilities and P", "[long_short_2d][capture]") {
  const LongShortAttention2dOptions o{.dim = 8, .heads = 2, .window = 2, .rank = 3};
  for (int64_t g : {0, 1}) {
    INFO("g = " << g);
    LongShortAttention2d m(o);
    randomise(m, 31 + uint64_t(g));
    m.to(kF64);
    Generator gen(5);
    const Tensor x = randn({2, g + 16, o.dim}, TensorOptions(kF64), &gen);
    nn::CaptureScope cap(m);
    m.forward(x, map_args(4, g));
    std::vector<double> probs;
    test::ls2d::oracle_forward(config_of(o, 2, 4, g), params_of(m), values(x), &probs);
    const int64_t T = m.span();
    REQUIRE(cap.get("attention").shape() == Shape({2, 2, 16, o.rank + T * T + g}));
    // f64: a softmax over ≤ 20 logits that are sums of ≤ 8 products, computed in another order.
    test::check_close(cap.get("attention"), probs, 1e-13, 1e-13);
    // P: a softmax over the 16 patch positions per (head, slot).
    for (double s : values(sum(cap.get("proj"), {3}))) CHECK(std::fabs(s - 1.0) < 1e-14);
  }
}
