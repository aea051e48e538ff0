// nn::LongShortAttention, the bidirectional long-short attention layer (docs/transformer-ls.md §2,
// §9.1): the §9.1 cases T1–T5 and invariants against the independent dense oracle
// (tests/long_short_oracle.h), the official parameter names, the layer against a PyTorch
// implementation with those names (tests/fixtures/gen_long_short.py), dropout fused and
// composed, a float64 gradcheck of the module, and rejected configurations. The core op is
// tested in test_long_short.cpp.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "helpers.h"
#include "long_short_oracle.h"
#include "long_short_test_helpers.h"
#include "lsformer/models/attention/long_short.h"
#include "lsformer/models/nn/capture.h"
#include "lsformer/ops/long_short.h"
#include "lsformer/ops/pack.h"

using namespace lsf;
using namespace lsf::long_short_test;
using testing::gradcheck;
using testing::GradcheckOptions;

namespace {

struct LayerCase {
  int64_t B, n, d, h, w, r;
  std::vector<int64_t> real_len;  // empty: no mask
  bool cls = false;
};

// A layer with random Linear weights (seeded) and random LayerNorm affines, in `dtype`.
std::shared_ptr<nn::LongShortAttention> make_layer(const LayerCase& c, DType dtype, bool fused, uint64_t seed,
                                                   bool random_ln = true) {
  manual_seed(seed);
  auto m = std::make_shared<nn::LongShortAttention>(
      nn::LongShortOptions{.dim = c.d, .heads = c.h, .window = c.w, .rank = c.r, .fused = fused});
  if (random_ln) {
    NoGradGuard g;
    Generator gen(seed + 1);
    for (auto* ln : {m->dual_ln_s.get(), m->dual_ln_l.get()}) {
      ln->weight.set_data(add(mul(randn(ln->weight.shape(), TensorOptions(kF64), &gen), 0.2), 1.0).to(kF32));
      ln->bias.set_data(mul(randn(ln->bias.shape(), TensorOptions(kF64), &gen), 0.2).to(kF32));
    }
  }
  m->to(dtype);
  return m;
}

oracle::Params params_of(const nn::LongShortAttention& m) {
  oracle::Params p;
  p.Wq = vec(m.W_q->weight), p.bq = vec(m.W_q->bias);
  p.Wk = vec(m.W_k->weight), p.bk = vec(m.W_k->bias);
  p.Wv = vec(m.W_v->weight), p.bv = vec(m.W_v->bias);
  p.Wo = vec(m.W_o->weight), p.bo = vec(m.W_o->bias);
  if (m.dconv_fc) p.Wp = vec(m.dconv_fc->weight), p.bp = vec(m.dconv_fc->bias);
  p.ln_l_w = vec(m.dual_ln_l->weight), p.ln_l_b = vec(m.dual_ln_l->bias);
  p.ln_s_w = vec(m.dual_ln_s->weight), p.ln_s_b = vec(m.dual_ln_s->bias);
  return p;
}

struct LayerInputs {
  Tensor x, mask, cls;
};

LayerInputs layer_inputs(const LayerCase& c, DType dtype, uint64_t seed) {
  LayerInputs in;
  in.x = randn_t({c.B, c.n, c.d}, seed, dtype);
  if (!c.real_len.empty()) in.mask = pad_mask(c.B, c.n, c.real_len);
  if (c.cls) in.cls = randn_t({c.B, 1, c.d}, seed + 1, dtype);
  return in;
}

Vec oracle_layer(const LayerCase& c, const nn::LongShortAttention& m, const LayerInputs& in) {
  return oracle::layer({c.B, c.n, c.d, c.h, c.w, c.r}, params_of(m), vec(in.x), bools(in.mask),
                       in.cls.defined() ? vec(in.cls) : Vec{});
}

const std::vector<LayerCase> kLayerCases = {
    {1, 16, 8, 2, 4, 3, {}, false},         // T1
    {2, 16, 8, 2, 4, 3, {11, 16}, false},   // T2
    {1, 8, 8, 2, 8, 0, {}, false},          // T3, r = 0
    {1, 8, 8, 2, 8, 2, {}, false},          // T3 with r > 0
    {1, 9, 8, 2, 3, 2, {}, false},          // T4 odd window
    {2, 6, 8, 2, 1, 2, {6, 3}, false},      // T4 w = 1
    {1, 8, 8, 2, 2, 2, {}, true},           // T5 CLS
    {2, 8, 8, 2, 2, 2, {8, 5}, true},       // T5 with padding
    {2, 16, 8, 2, 4, 0, {16, 9}, false},    // r = 0: window only
    {2, 12, 8, 2, 0, 3, {12, 7}, false},    // w = 0: projection only
    {2, 12, 8, 2, 0, 3, {12, 7}, true},     // w = 0 with CLS
    {2, 10, 8, 2, 0, 0, {10, 6}, true},     // w = 0 and r = 0: CLS slot + self slot
};

}  // namespace

TEST_CASE("LongShortAttention: parameter names and shapes are the official LRA module's", "[long_short]") {
  nn::LongShortAttention m({.dim = 8, .heads = 2, .window = 4, .rank = 3});
  std::vector<std::string> names;
  for (const auto& [name, t] : m.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"W_q.weight", "W_q.bias", "W_k.weight", "W_k.bias", "W_v.weight",
                                          "W_v.bias", "W_o.weight", "W_o.bias", "dual_ln_s.weight", "dual_ln_s.bias",
                                          "dual_ln_l.weight", "dual_ln_l.bias", "dconv_fc.weight", "dconv_fc.bias"});
  CHECK(m.dconv_fc->weight.shape() == Shape({6, 8}));  // h·r rows, head-major
  CHECK(m.dual_ln_l->eps() == 1e-5);
  nn::LongShortAttention window_only({.dim = 8, .heads = 2, .window = 4, .rank = 0});
  CHECK(window_only.named_parameters().size() == 12);
}

TEST_CASE("LongShortAttention: fused and composed layers equal the dense oracle (T1–T5, ablations)", "[long_short]") {
  for (const LayerCase& c : kLayerCases) {
    INFO("n " << c.n << " w " << c.w << " r " << c.r << " cls " << c.cls << " padded " << !c.real_len.empty());
    for (DType dtype : {kF64, kF32}) {
      for (bool fused : {true, false}) {
        INFO(dtype << " fused " << fused);
        auto m = make_layer(c, dtype, fused, 17);
        LayerInputs in = layer_inputs(c, dtype, 23);
        Tensor y = m->forward(in.x, {.mask = in.mask, .cls = in.cls});
        REQUIRE(y.shape() == Shape({c.B, c.n + (c.cls ? 1 : 0), c.d}));
        // f64: six stages (linear d, LN d, projection softmax n, compression n, joint softmax
        // S ≤ 24, output d), each ≤ (16 + 4)·2^-53 relative, amplified ≤ 10× by LN (1/σ) and
        // by exp of logits ≤ 10: 6·20·10·2^-53·|y| ≈ 1.4e-13·|y|; atol = rtol = 1e-12.
        // f32: the same chain with 2^-24: 6·20·10·2^-24 ≈ 7e-5; atol = rtol = 1e-4.
        const double tol = dtype == kF64 ? 1e-12 : 1e-4;
        expect_close(vec(y), oracle_layer(c, *m, in), tol, tol);
      }
    }
  }
}

TEST_CASE("LongShortAttention T2: padding gets zero projection weight, b_o rows, pad invariance", "[long_short]") {
  LayerCase c{1, 16, 8, 2, 4, 3, {11}, false};
  auto m = make_layer(c, kF64, true, 5);
  LayerInputs in = layer_inputs(c, kF64, 6);
  nn::CaptureScope trace(*m);
  Tensor y = m->forward(in.x, {.mask = in.mask});
  Vec P = vec(trace.get("proj"));  // [1, h, r, n]
  for (int64_t row = 0; row < 2 * 3; ++row) {
    double s = 0;
    for (int64_t j = 0; j < 16; ++j) {
      if (j >= 11) CHECK(P[size_t(row * 16 + j)] == 0.0);  // exactly 0
      s += P[size_t(row * 16 + j)];
    }
    CHECK(std::fabs(s - 1.0) < 1e-14);  // invariant (i): 11 terms in f64, ≤ 11·2^-53
  }
  const Vec yv = vec(y), bo = vec(m->W_o->bias);
  for (int64_t t = 11; t < 16; ++t)
    for (int64_t f = 0; f < 8; ++f) CHECK(yv[size_t(t * 8 + f)] == bo[size_t(f)]);  // exactly b_o
  // Appending 4 more padded tokens (n = 20) leaves rows 0..10 unchanged.
  Tensor x20 = cat({in.x, randn_t({1, 4, 8}, 9)}, 1);
  Tensor y20 = m->forward(x20, {.mask = pad_mask(1, 20, {11})});
  // Same sums over the same real terms, in possibly another grouping: f64, ≤ 1e-13.
  expect_close(vec(y20.narrow(1, 0, 11)), vec(y.narrow(1, 0, 11)), 1e-13, 1e-13);
}

TEST_CASE("LongShortAttention T3: one window covering the sequence is dense attention", "[long_short]") {
  for (int64_t r : {0, 2}) {
    INFO("r " << r);
    LayerCase c{1, 8, 8, 2, 8, r, {}, false};
    auto m = make_layer(c, kF64, true, 8);
    LayerInputs in = layer_inputs(c, kF64, 9);
    nn::CaptureScope tr(*m);
    Tensor y = m->forward(in.x, {});
    // Dense multi-head attention over [LN_G(P·K) ; LN_L(K)], knowing nothing about windows.
    Tensor keys = r > 0 ? cat({tr.get("kbar"), tr.get("k")}, 2) : tr.get("k");
    Tensor values = r > 0 ? cat({tr.get("vbar"), tr.get("v")}, 2) : tr.get("v");
    Tensor ctx = matmul(softmax(matmul(tr.get("q"), keys.transpose(2, 3)), 3), values);  // [1, h, n, e]
    Tensor dense = m->W_o->forward(ctx.permute({0, 2, 1, 3}).reshape({1, 8, 8}));
    // f64 softmax over ≤ 10 keys and sums of ≤ 10 terms: 1e-13.
    expect_close(vec(y), vec(dense), 1e-13, 1e-13);
  }
}

TEST_CASE("LongShortAttention T5: CLS slot first, raw k_c/v_c, context-as-keys update", "[long_short]") {
  LayerCase c{1, 8, 8, 2, 2, 2, {}, true};
  auto m = make_layer(c, kF64, true, 10);
  LayerInputs in = layer_inputs(c, kF64, 11);
  nn::CaptureScope tr(*m);
  Tensor y = m->forward(in.x, {.cls = in.cls});
  REQUIRE(tr.get("kbar").shape() == Shape({1, 2, 3, 4}));  // 1 CLS + r = 2 global slots
  // Slot 0 of K̄ is LN_G of the raw CLS key (no LN_L).
  const Vec kc = vec(m->W_k->forward(in.cls));
  const Vec kc_ln = oracle::layer_norm(kc, 1, 8, vec(m->dual_ln_s->weight), vec(m->dual_ln_s->bias));
  const Vec kb = vec(tr.get("kbar"));
  for (int64_t hh = 0; hh < 2; ++hh)
    for (int64_t f = 0; f < 4; ++f) CHECK(std::fabs(kb[size_t((hh * 3 + 0) * 4 + f)] - kc_ln[size_t(hh * 4 + f)]) < 1e-13);
  // The CLS output: softmax([q_c·k_c, q_c·C_0..7]) over [v_c, C_0..7] with raw k_c, v_c, then W_o.
  const Vec qc = vec(m->W_q->forward(in.cls)), vc = vec(m->W_v->forward(in.cls)), C = vec(tr.get("context"));
  Vec merged(8);
  for (int64_t hh = 0; hh < 2; ++hh) {
    Vec logit(9);
    for (int64_t j = -1; j < 8; ++j) {
      double l = 0;
      for (int64_t f = 0; f < 4; ++f)
        l += qc[size_t(hh * 4 + f)] / 2.0 * (j < 0 ? kc[size_t(hh * 4 + f)] : C[size_t((hh * 8 + j) * 4 + f)]);
      logit[size_t(j + 1)] = l;
    }
    const double mx = *std::max_element(logit.begin(), logit.end());
    double z = 0;
    for (double l : logit) z += std::exp(l - mx);
    for (int64_t f = 0; f < 4; ++f) {
      double o = std::exp(logit[0] - mx) / z * vc[size_t(hh * 4 + f)];
      for (int64_t j = 0; j < 8; ++j) o += std::exp(logit[size_t(j + 1)] - mx) / z * C[size_t((hh * 8 + j) * 4 + f)];
      merged[size_t(hh * 4 + f)] = o;
    }
  }
  const Vec expect = oracle::linear(merged, 1, 8, 8, vec(m->W_o->weight), vec(m->W_o->bias));
  expect_close(vec(y.narrow(1, 0, 1)), expect, 1e-13, 1e-13);  // f64 sums of ≤ 9 terms
}

TEST_CASE("LongShortAttention cls_only: the CLS row alone, the full output's row, the same gradients", "[long_short]") {
  // A last layer pooled at its CLS reads row 0 only; cls_only returns that row without forming
  // the token rows' W_o. Each output row is its own W_o product, a dot of length d = 8 plus the
  // bias, but a product of 2 rows and one of 2·(1 + n) rows may run different GEMM kernels or
  // register tiles (contracting a different step into a fused multiply-add): ≤ (d + 1)·u of the
  // terms, u = 2^-53 ≈ 1.1e-16, ~1e-15 on these O(1) values. The gradients flow from that row
  // alone in both runs (the discarded rows give zero), so they agree, except for the same
  // rounding in W_o's products and in its weight gradient, which sums the B CLS rows' products
  // with or without zero terms in between. 1e-14 for all: ~10× the bound.
  for (const LayerCase& c : {LayerCase{2, 16, 8, 2, 4, 3, {16, 9}, true}, LayerCase{2, 12, 8, 2, 0, 3, {12, 7}, true},
                             LayerCase{2, 8, 8, 2, 2, 0, {8, 5}, true}}) {
    for (bool fused : {true, false}) {
      for (bool packed : {false, true}) {
        INFO("w " << c.w << " r " << c.r << " fused " << fused << " packed " << packed);
        auto m = make_layer(c, kF64, fused, 31);
        LayerInputs in = layer_inputs(c, kF64, 32);
        const PackedSequences layout = packed_sequences(in.mask);
        struct Run {
          Tensor cls_row;
          std::vector<Tensor> grads;
        };
        auto run = [&](bool cls_only) {
          m->zero_grad();
          Tensor x = in.x.detach().requires_grad_(true), cls = in.cls.detach().requires_grad_(true);
          Tensor row;
          if (packed) {
            Tensor y = m->forward_packed(pack_sequences(x, layout), layout, {.cls = cls, .cls_only = cls_only});
            if (cls_only) REQUIRE(y.shape() == Shape({c.B, c.d}));
            else REQUIRE(y.shape() == Shape({c.B + layout.total, c.d}));
            row = y.narrow(0, 0, c.B);
          } else {
            Tensor y = m->forward(x, {.mask = in.mask, .cls = cls, .cls_only = cls_only});
            if (cls_only) REQUIRE(y.shape() == Shape({c.B, 1, c.d}));
            else REQUIRE(y.shape() == Shape({c.B, 1 + c.n, c.d}));
            row = y.narrow(1, 0, 1).reshape({c.B, c.d});
          }
          sum(mul(row, randn_t({c.B, c.d}, 33))).backward();
          Run r{row.detach(), {x.grad(), cls.grad()}};
          for (const auto& [name, t] : m->named_parameters()) r.grads.push_back(t.grad());
          return r;
        };
        const Run full = run(false), alone = run(true);
        expect_close(vec(alone.cls_row), vec(full.cls_row), 1e-14, 1e-14);
        REQUIRE(alone.grads.size() == full.grads.size());
        for (size_t i = 0; i < full.grads.size(); ++i) {
          INFO("gradient " << i << " (x, cls, then the parameters in order)");
          REQUIRE(full.grads[i].defined());
          REQUIRE(alone.grads[i].defined());
          expect_close(vec(alone.grads[i]), vec(full.grads[i]), 1e-14, 1e-14);
        }
      }
    }
  }
}

TEST_CASE("LongShortAttention invariants: convex hull, permutation equivariance, DualLN scale and norms",
          "[long_short]") {
  LayerCase c{2, 16, 8, 2, 4, 3, {16, 10}, false};
  SECTION("(iii) compressed vectors lie in the convex hull of the LN_L(K) rows") {
    auto m = make_layer(c, kF64, true, 12);
    LayerInputs in = layer_inputs(c, kF64, 13);
    nn::CaptureScope tr(*m);
    m->forward(in.x, {.mask = in.mask});
    const Vec k = vec(tr.get("k")), kb = vec(tr.get("kbar_raw"));  // [2, 2, 16, 4], [2, 2, 3, 4]
    for (int64_t bh = 0; bh < 4; ++bh)
      for (int64_t f = 0; f < 4; ++f) {
        double lo = INFINITY, hi = -INFINITY;
        for (int64_t j = 0; j < c.real_len[size_t(bh / 2)]; ++j) {
          lo = std::min(lo, k[size_t((bh * 16 + j) * 4 + f)]);
          hi = std::max(hi, k[size_t((bh * 16 + j) * 4 + f)]);
        }
        for (int64_t i = 0; i < 3; ++i) {
          const double x = kb[size_t((bh * 3 + i) * 4 + f)];
          CHECK(x >= lo - 1e-14);  // a convex combination, rounded: ≤ n·2^-53·max|k|
          CHECK(x <= hi + 1e-14);
        }
      }
  }
  SECTION("(iv) with w = 0, permuting tokens permutes the outputs") {
    LayerCase g{1, 12, 8, 2, 0, 3, {}, false};
    auto m = make_layer(g, kF64, true, 14);
    LayerInputs in = layer_inputs(g, kF64, 15);
    std::vector<int64_t> perm = {5, 2, 11, 0, 7, 1, 9, 3, 10, 4, 8, 6};
    Tensor idx = tensor(perm, {12});
    Tensor y = m->forward(in.x);
    Tensor yp = m->forward(index_select(in.x, 1, idx));
    // Same terms summed in another order over n = 12: f64 ≤ 1e-13.
    expect_close(vec(yp), vec(index_select(y, 1, idx)), 1e-13, 1e-13);
  }
  SECTION("(v) scaling W_k, b_k or W_v, b_v by α > 0 leaves the output unchanged") {
    auto m = make_layer(c, kF64, true, 16);
    LayerInputs in = layer_inputs(c, kF64, 17);
    Tensor y = m->forward(in.x, {.mask = in.mask});
    for (auto* lin : {m->W_k.get(), m->W_v.get()}) {
      NoGradGuard g;
      lin->weight.set_data(mul(lin->weight, 3.5).detach());
      lin->bias.set_data(mul(lin->bias, 3.5).detach());
    }
    Tensor y2 = m->forward(in.x, {.mask = in.mask});
    // LN output changes only through eps: factor √((σ² + ε)/(σ² + ε/α²)) − 1 ≤ ε/(2σ²) with
    // σ² ≳ 0.05 for these rows: ≤ 1e-4 relative, propagated through O(1) weights.
    expect_close(vec(y2), vec(y), 3e-4, 3e-4);
  }
  SECTION("(vi) with unit gamma and zero beta, LN_L and LN_G rows have squared norm ≈ d") {
    auto m = make_layer(c, kF64, true, 18, /*random_ln=*/false);
    LayerInputs in = layer_inputs(c, kF64, 19);
    nn::CaptureScope tr(*m);
    m->forward(in.x, {.mask = in.mask});
    for (const Tensor& t : {tr.get("k"), tr.get("v"), tr.get("kbar"), tr.get("vbar")}) {
      Tensor rows = t.permute({0, 2, 1, 3}).reshape({-1, 8});  // merged heads, one row per token/slot
      // Σ y² = d·σ²/(σ² + ε): within d·ε/σ² ≤ 8·1e-5/1e-3 of d for σ² ≥ 1e-3.
      for (double s : vec(sum(mul(rows, rows), {1}))) CHECK(std::fabs(s - 8.0) < 0.08);
    }
  }
}

TEST_CASE("LongShortAttention: dropout draws the same mask fused and composed", "[long_short]") {
  LayerCase c{2, 16, 8, 2, 4, 3, {16, 11}, true};
  Generator g1(77), g2(77);
  auto a = make_layer(c, kF64, true, 20), b = make_layer(c, kF64, false, 20);
  nn::LongShortAttention* both[2] = {a.get(), b.get()};
  Generator* gens[2] = {&g1, &g2};
  LayerInputs in = layer_inputs(c, kF64, 21);
  Tensor ys[2];
  for (int i = 0; i < 2; ++i) {
    auto m = std::make_shared<nn::LongShortAttention>(nn::LongShortOptions{
        .dim = 8, .heads = 2, .window = 4, .rank = 3, .dropout = 0.4, .fused = i == 0, .generator = gens[i]});
    m->to(kF64);
    m->load_state_dict([&] {
      std::map<std::string, Tensor> s;
      for (auto& [k, v] : both[0]->state_dict()) s[k] = v;
      return s;
    }());
    m->train();
    ys[i] = m->forward(in.x, {.mask = in.mask, .cls = in.cls});
  }
  expect_close(vec(ys[0]), vec(ys[1]), 1e-13, 1e-13);  // f64, rows of ≤ 12 terms
  // Dropout changed something (p = 0.4 over hundreds of slots) compared with eval mode.
  Tensor y_eval = a->forward(in.x, {.mask = in.mask, .cls = in.cls});
  CHECK(vec(y_eval) != vec(ys[0]));
}

TEST_CASE("LongShortAttention: f64 gradcheck of the layer (input, CLS and every parameter)", "[long_short]") {
  const std::vector<LayerCase> cases = {
      {1, 8, 8, 2, 2, 2, {6}, true},     // window + projection + CLS + padding
      {1, 6, 4, 2, 0, 0, {5}, true},     // w = 0, r = 0 with CLS
      {2, 8, 4, 1, 4, 0, {8, 5}, false}, // window only
      {1, 6, 4, 2, 0, 2, {4}, false},    // projection only
  };
  for (const LayerCase& c : cases) {
    // The fused core in every case; the composed one (already matched to it above) in the first.
    for (bool fused : {true, false}) {
      if (!fused && &c != &cases[0]) continue;
      INFO("n " << c.n << " w " << c.w << " r " << c.r << " fused " << fused);
      auto m = make_layer(c, kF64, fused, 30);
      LayerInputs in = layer_inputs(c, kF64, 31);
      in.x.requires_grad_(true);
      TensorList inputs{in.x};
      if (c.cls) inputs.push_back(in.cls.requires_grad_(true));
      for (const Tensor& p : m->parameters()) inputs.push_back(p);
      auto r = gradcheck(testing::SingleFn([&](const TensorList& x) {
                           return m->forward(x[0], {.mask = in.mask, .cls = c.cls ? x[1] : Tensor()});
                         }),
                         inputs);
      INFO(r.message);
      CHECK(r.ok);
    }
  }
}

TEST_CASE("LongShortAttention: bad configurations are rejected with what to change", "[long_short]") {
  CHECK_THROWS_WITH(nn::LongShortAttention({.dim = 10, .heads = 4}),
                    Catch::Contains("LongShortAttention") && Catch::Contains("dim = 10") &&
                        Catch::Contains("multiple of heads = 4"));
  CHECK_THROWS_WITH(nn::LongShortAttention({.dim = 8, .heads = 2, .window = -1}), Catch::Contains("window must be"));
  CHECK_THROWS_WITH(nn::LongShortAttention({.dim = 8, .heads = 2, .rank = -2}), Catch::Contains("rank must be"));
  CHECK_THROWS_WITH(nn::LongShortAttention({.dim = 8, .heads = 2, .dropout = 2.0}), Catch::Contains("dropout"));
  nn::LongShortAttention m({.dim = 8, .heads = 2, .window = 4, .rank = 3});
  Tensor x = randn({2, 10, 8});
  CHECK_THROWS_WITH(m.forward(x), Catch::Contains("n = 10") && Catch::Contains("multiple of the window w = 4") &&
                                      Catch::Contains("pad the input"));
  Tensor x12 = randn({2, 12, 8});
  CHECK_THROWS_WITH(m.forward(randn({2, 12, 6})), Catch::Contains("x must be [B, n, d]") && Catch::Contains("{2, 12, 6}"));
  CHECK_THROWS_WITH(m.forward(x12, {.mask = ones({2, 8}, TensorOptions(kBool))}),
                    Catch::Contains("mask must be a bool tensor [B, n]") && Catch::Contains("{2, 8}"));
  CHECK_THROWS_WITH(m.forward(x12, {.mask = ones({2, 12})}), Catch::Contains("mask must be a bool tensor"));
  CHECK_THROWS_WITH(m.forward(x12, {.memory = randn({2, 4, 8})}),
                    Catch::Contains("memory was passed") && Catch::Contains("causal"));
  CHECK_THROWS_WITH(m.forward(x12, {.cls = randn({2, 8})}), Catch::Contains("cls must be [B, 1, d]"));
  CHECK_THROWS_WITH(m.forward(x12, {.cls_only = true}),
                    Catch::Contains("cls_only") && Catch::Contains("no CLS was passed"));
  CHECK_THROWS_WITH(m.forward(x12, {.height = 3, .width = 4}), Catch::Contains("2-D attention"));
  nn::LongShortAttention none({.dim = 8, .heads = 2, .window = 0, .rank = 0});
  CHECK_THROWS_WITH(none.forward(x12), Catch::Contains("pass args.cls or set window or rank > 0"));
}

TEST_CASE("LongShortAttention: loads the PyTorch reference's state_dict and matches its output and dx",
          "[long_short]") {
  const nlohmann::json fx = test::load_fixture("long_short");
  for (const auto& [name, c] : fx.items()) {
    INFO(name);
    const auto& cfg = c["config"];
    for (bool fused : {true, false}) {
      INFO("fused " << fused);
      nn::LongShortAttention m({.dim = cfg["dim"].get<int64_t>(),
                                .heads = cfg["heads"].get<int64_t>(),
                                .window = cfg["window"].get<int64_t>(),
                                .rank = cfg["rank"].get<int64_t>(),
                                .fused = fused});
      m.to(kF64);
      std::map<std::string, Tensor> state;
      for (const auto& [k, t] : c["state"].items()) state[k] = test::fixture_tensor(t);
      const nn::LoadReport report = m.load_state_dict(state);  // strict: the official names, all of them
      INFO(report.str());
      REQUIRE(report.ok());
      Tensor x = test::fixture_tensor(c["x"]).requires_grad_(true);
      Tensor cls = c.contains("cls") ? test::fixture_tensor(c["cls"]) : Tensor();
      Tensor y = m.forward(x, {.mask = test::fixture_tensor(c["mask"]), .cls = cls});
      // f64 both sides, different summation orders over ≤ 24 slots / d = 8 features, values
      // O(1): 1e-12 (≈ 5000 ulp) absolute and relative.
      test::check_close(y, test::fixture_tensor(c["y"]), 1e-12, 1e-12);
      sum(mul(y, test::fixture_tensor(c["dy"]))).backward();
      test::check_close(x.grad(), test::fixture_tensor(c["dx"]), 1e-12, 1e-12);
    }
  }
}
