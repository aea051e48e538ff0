// Bidirectional long-short attention core (docs/transformer-ls.md §2, §9.1): the fused op against
// the composed op and both against the independent dense oracle (tests/long_short_oracle.h), the
// window key sets of T1, T2 and T4, q_scale, head-split layouts, float64 gradchecks, determinism
// and rejected arguments. The layer, nn::LongShortAttention, is tested in
// test_long_short_layer.cpp.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "helpers.h"
#include "long_short_oracle.h"
#include "long_short_test_helpers.h"
#include "lsformer/ops/long_short.h"

using namespace lsf;
using namespace lsf::long_short_test;
using testing::gradcheck;
using testing::GradcheckOptions;

namespace {

struct CoreCase {
  int64_t B, h, n, e, R, w;
  bool self_slot = false;
  std::vector<int64_t> real_len;  // empty: no mask
  int64_t block = 0;
  // Padded ranges [first, last) inside every example as well (real_len must be given): whole
  // padded segments between real ones, which the kernels skip.
  std::vector<std::pair<int64_t, int64_t>> holes = {};
};

// pad_mask with the case's holes padded too.
Tensor case_mask(const CoreCase& c) {
  Tensor mask = pad_mask(c.B, c.n, c.real_len);
  for (int64_t b = 0; b < c.B; ++b)
    for (auto [first, last] : c.holes) mask.select(0, b).narrow(0, first, last - first).fill_(0.0);
  return mask;
}

struct CoreInputs {
  Tensor q, k, v, kb, vb, mask;
};

CoreInputs core_inputs(const CoreCase& c, DType dtype, uint64_t seed, bool grad) {
  CoreInputs in;
  in.q = randn_t({c.B, c.h, c.n, c.e}, seed, dtype);
  in.k = randn_t({c.B, c.h, c.n, c.e}, seed + 1, dtype);
  in.v = randn_t({c.B, c.h, c.n, c.e}, seed + 2, dtype);
  if (c.R > 0) {
    in.kb = randn_t({c.B, c.h, c.R, c.e}, seed + 3, dtype);
    in.vb = randn_t({c.B, c.h, c.R, c.e}, seed + 4, dtype);
  }
  if (!c.real_len.empty()) in.mask = case_mask(c);
  if (grad)
    for (Tensor* t : {&in.q, &in.k, &in.v, &in.kb, &in.vb})
      if (t->defined()) t->requires_grad_(true);
  return in;
}

LongShortAttentionOptions core_options(const CoreCase& c) {
  LongShortAttentionOptions o;
  o.window = c.w;
  o.self_slot = c.self_slot;
  o.block_queries = c.block;
  return o;
}

Vec oracle_core(const CoreCase& c, const CoreInputs& in, std::vector<Vec>* probs = nullptr) {
  oracle::Core oc{c.B, c.h, c.n, c.e, c.R, c.w, c.self_slot};
  return oracle::core(oc, vec(in.q), vec(in.k), vec(in.v), c.R > 0 ? vec(in.kb) : Vec{},
                      c.R > 0 ? vec(in.vb) : Vec{}, bools(in.mask), probs);
}

const std::vector<CoreCase> kCoreCases = {
    {1, 2, 16, 4, 3, 4, false, {}, 0},         // T1 geometry
    {2, 2, 16, 4, 3, 4, false, {11, 16}, 0},   // T2 padding
    {1, 1, 9, 3, 2, 3, false, {}, 0},          // T4 odd window
    {2, 1, 6, 2, 0, 1, false, {6, 4}, 0},      // w = 1, r = 0
    {1, 2, 8, 4, 0, 8, false, {}, 0},          // T3 one segment
    {2, 2, 12, 3, 4, 0, false, {12, 7}, 0},    // w = 0: projection only
    {1, 2, 10, 3, 1, 0, true, {8}, 0},         // w = 0, r = 0 with a CLS slot: self slot
    {2, 2, 96, 4, 3, 4, false, {96, 50}, 8},   // many blocks: the cross-block merge of dK/dV
    {1, 1, 60, 3, 0, 1, false, {57}, 1},       // w = 1 with one-token blocks (L = 2ext)
    {1, 2, 90, 5, 2, 6, false, {}, 12},        // even w > 2, several blocks
    // Padded segments between real ones inside a block of 12 queries (skipped by the kernels,
    // the window then reloaded, not slid): whole segments 4-7 and 16-23, a partial one at 29,
    // the tail from 44.
    {2, 2, 48, 3, 2, 4, false, {48, 44}, 12, {{4, 8}, {16, 24}, {29, 30}}},
};

}  // namespace

TEST_CASE("long_short_attention: fused and composed equal the dense oracle (f64, f32)", "[long_short]") {
  for (const CoreCase& c : kCoreCases) {
    INFO("n " << c.n << " w " << c.w << " R " << c.R << " block " << c.block);
    for (DType dtype : {kF64, kF32}) {
      INFO(dtype);
      CoreInputs in = core_inputs(c, dtype, 7, false);
      const Vec ref = oracle_core(c, in);  // from the dtype-rounded inputs, in double
      Tensor fused = long_short_attention(in.q, in.k, in.v, in.kb, in.vb, in.mask, core_options(c));
      Tensor composed = long_short_attention_composed(in.q, in.k, in.v, in.kb, in.vb, in.mask, core_options(c));
      REQUIRE(fused.shape() == in.q.shape());
      // A row is Σ_i p_i·v_i over S = R + s ≤ 24 slots after logits of length e ≤ 5 and one
      // softmax. In f64 each step costs ≤ (e + S + 4)·2^-53 relative, |v| ≤ ~5, so 1e-13 covers
      // it 10× over. In f32: logits carry ≤ e·2^-24·|q||k| ≤ 5·2^-24·25, exp amplifies absolute
      // logit error into relative p error, Σ over S slots adds S·2^-24: bound
      // (125 + 24 + 8)·2^-24·|v| ≈ 5e-5; atol = rtol = 6e-5.
      const double tol = dtype == kF64 ? 1e-13 : 6e-5;
      expect_close(vec(fused), ref, tol, tol);
      expect_close(vec(composed), ref, tol, tol);
    }
  }
}

TEST_CASE("long_short_attention: window key sets of T1, T2 and T4 are exact", "[long_short]") {
  // q = 0 gives uniform weights over the visible keys; one-hot values v_j = e_j make the output
  // row t the indicator of its visible key set divided by its size.
  auto visible = [](int64_t n, int64_t w, int64_t real, bool fused) {
    Tensor q = zeros({1, 1, n, n}, TensorOptions(kF64));
    std::vector<double> eye(size_t(n * n), 0.0);
    for (int64_t j = 0; j < n; ++j) eye[size_t(j * n + j)] = 1.0;
    Tensor v = tensor(eye, {1, 1, n, n});
    Tensor mask = pad_mask(1, n, {real});
    LongShortAttentionOptions o;
    o.window = w;
    Tensor out = fused ? long_short_attention(q, q, v, Tensor(), Tensor(), mask, o)
                       : long_short_attention_composed(q, q, v, Tensor(), Tensor(), mask, o);
    Vec y = vec(out);
    std::vector<std::vector<int64_t>> sets(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < n; ++j)
        if (y[size_t(t * n + j)] > 0) sets[size_t(t)].push_back(j);
    return sets;
  };
  auto range = [](int64_t a, int64_t b) {
    std::vector<int64_t> r(size_t(b - a + 1));
    std::iota(r.begin(), r.end(), a);
    return r;
  };
  for (bool fused : {true, false}) {
    INFO("fused " << fused);
    auto t1 = visible(16, 4, 16, fused);  // T1: g0 {0..5}, g1 {2..9}, g2 {6..13}, g3 {10..15}
    const std::vector<std::vector<int64_t>> seg1 = {range(0, 5), range(2, 9), range(6, 13), range(10, 15)};
    for (int64_t t = 0; t < 16; ++t) CHECK(t1[size_t(t)] == seg1[size_t(t / 4)]);
    auto t2 = visible(16, 4, 11, fused);  // T2: keys ≥ 11 masked; padded queries have no row
    const std::vector<std::vector<int64_t>> seg2 = {range(0, 5), range(2, 9), range(6, 10), range(10, 10)};
    for (int64_t t = 0; t < 11; ++t) CHECK(t2[size_t(t)] == seg2[size_t(t / 4)]);
    for (int64_t t = 11; t < 16; ++t) CHECK(t2[size_t(t)].empty());
    auto t4 = visible(9, 3, 9, fused);  // T4: g0 {0..3}, g1 {2..6}, g2 {5..8}
    const std::vector<std::vector<int64_t>> seg4 = {range(0, 3), range(2, 6), range(5, 8)};
    for (int64_t t = 0; t < 9; ++t) CHECK(t4[size_t(t)] == seg4[size_t(t / 3)]);
    auto w1 = visible(6, 1, 6, fused);  // w = 1: span 3, keys t − 1, t, t + 1
    for (int64_t t = 0; t < 6; ++t) CHECK(w1[size_t(t)] == range(std::max<int64_t>(t - 1, 0), std::min<int64_t>(t + 1, 5)));
  }
}

TEST_CASE("long_short_attention: probability rows sum to 1, padded rows are 0 (invariant ii)", "[long_short]") {
  // With every value row = 1 the output is Σ p over the row (before dropout).
  CoreCase c{2, 2, 16, 4, 3, 4, false, {11, 16}, 0};
  CoreInputs in = core_inputs(c, kF64, 3, false);
  Tensor ones_v = ones(in.v.shape(), TensorOptions(kF64)), ones_vb = ones(in.vb.shape(), TensorOptions(kF64));
  Vec y = vec(long_short_attention(in.q, in.k, ones_v, in.kb, ones_vb, in.mask, core_options(c)));
  std::vector<Vec> probs;
  oracle_core(c, in, &probs);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t hh = 0; hh < 2; ++hh)
      for (int64_t t = 0; t < 16; ++t) {
        const bool real = t < c.real_len[size_t(b)];
        const Vec& p = probs[size_t((b * 2 + hh) * 16 + t)];
        const double ps = std::accumulate(p.begin(), p.end(), 0.0);
        // Sums of ≤ 11 probabilities in f64: ≤ 11·2^-53 from 1.
        CHECK(std::fabs(ps - (real ? 1.0 : 0.0)) < 1e-14);
        for (int64_t f = 0; f < 4; ++f) CHECK(std::fabs(y[size_t(((b * 2 + hh) * 16 + t) * 4 + f)] - (real ? 1.0 : 0.0)) < 1e-14);
      }
}

TEST_CASE("long_short_attention: fused backward equals the composed backward, also with dropout", "[long_short]") {
  for (const CoreCase& c : kCoreCases) {
    INFO("n " << c.n << " w " << c.w << " R " << c.R << " block " << c.block);
    for (double p : {0.0, 0.3}) {
      INFO("dropout " << p);
      CoreInputs a = core_inputs(c, kF64, 11, true), b = core_inputs(c, kF64, 11, true);
      LongShortAttentionOptions o = core_options(c);
      o.dropout = p;
      o.training = true;
      Generator g1(99), g2(99);
      o.generator = &g1;
      Tensor ya = long_short_attention(a.q, a.k, a.v, a.kb, a.vb, a.mask, o);
      o.generator = &g2;
      Tensor yb = long_short_attention_composed(b.q, b.k, b.v, b.kb, b.vb, b.mask, o);
      // Same mask (same Philox elements), same math: f64 rows of ≤ 24 terms, 1e-13.
      expect_close(vec(ya), vec(yb), 1e-13, 1e-13);
      CHECK(g1.state().offset == g2.state().offset);
      Tensor dy = randn_t(ya.shape(), 5);
      sum(mul(ya, dy)).backward();
      sum(mul(yb, dy)).backward();
      // Gradients sum ≤ n·S ≤ 2000 products of O(1) terms in f64: 1e-12.
      for (auto [x, y] : {std::pair{&a.q, &b.q}, {&a.k, &b.k}, {&a.v, &b.v}, {&a.kb, &b.kb}, {&a.vb, &b.vb}}) {
        if (!x->defined()) continue;
        // Without a window branch the composed graph never reaches k, v: their gradient is 0.
        auto grad_or_zero = [](const Tensor* t) { return t->grad().defined() ? vec(t->grad()) : Vec(size_t(t->numel()), 0.0); };
        REQUIRE(x->grad().defined());
        expect_close(vec(x->grad()), grad_or_zero(y), 1e-12, 1e-12);
      }
    }
  }
}

TEST_CASE("long_short_attention: model-sized heads reach every register block of the CPU kernel", "[long_short]") {
  // The cases above have e ≤ 5 and R + s ≤ 24, so the CPU kernel's products run only their
  // one-row / one-vector remainders and scalar feature tails. Here e = 36 and 52 and R + s = 29
  // and 72 (with f32's 16 and f64's 8 lanes: blocks of 8 rows, 3, 2 and 1 vectors, and a tail of
  // 4 features), R = 13 and 40 (8-row blocks plus single rows of dK̄, dV̄), w = 8 and 16 (one
  // and two 8-query blocks per segment) and a padded hole. q is scaled by 1/√e as in a layer,
  // so the logits are O(1).
  const std::vector<CoreCase> cases = {
      {2, 2, 64, 36, 13, 8, false, {64, 41}, 0},
      {1, 2, 48, 52, 40, 16, false, {45}, 0, {{16, 32}}},
  };
  for (const CoreCase& c : cases) {
    INFO("e " << c.e << " R " << c.R << " w " << c.w);
    const CoreInputs raw = core_inputs(c, kF64, 31, false);
    const Tensor dy = randn_t({c.B, c.h, c.n, c.e}, 37);
    struct Run {
      Vec y;
      std::vector<Vec> grads;
    };
    auto run = [&](DType dtype, bool fused) {
      TensorList in{mul(raw.q, 1.0 / std::sqrt(double(c.e))), raw.k, raw.v, raw.kb, raw.vb};
      for (Tensor& t : in) t = t.to(dtype).detach().requires_grad_(true);
      const LongShortAttentionOptions o = core_options(c);
      Tensor y = fused ? long_short_attention(in[0], in[1], in[2], in[3], in[4], raw.mask, o)
                       : long_short_attention_composed(in[0], in[1], in[2], in[3], in[4], raw.mask, o);
      sum(mul(y, dy.to(dtype))).backward();
      Run r{vec(y), {}};
      for (const Tensor& t : in) r.grads.push_back(vec(t.grad()));
      return r;
    };
    const Run ref = run(kF64, false), f64 = run(kF64, true), f32 = run(kF32, true);
    // f64, same math in another order: a logit is a dot of e ≤ 52 terms of O(1), a row a sum of
    // S ≤ 72 terms, a gradient a sum over ≤ n·S ≤ 3500 products of O(10): ≤ ~1e-12 apart.
    expect_close(f64.y, ref.y, 1e-12, 1e-12);
    for (size_t i = 0; i < ref.grads.size(); ++i) expect_close(f64.grads[i], ref.grads[i], 1e-11, 1e-11);
    // f32 against f64: inputs rounded (2^-24 relative), logits of e ≤ 52 terms of |q_i k_i| / √e
    // carry ≤ e·2^-24·Σ|q_i k_i|/√e ≈ 52·6e-8·33/7.2 ≈ 1.4e-5 absolute, which exp turns into the
    // same relative error of p; with S·2^-24 from the sums and |v| ≤ 5, outputs are ≤ ~1e-4
    // apart: atol = rtol = 5e-4. Gradients chain two more such products (dP = dy·v, dS·k) of the
    // same relative accuracy over sums of ≤ n·S terms: atol = rtol = 2e-3, still far below the
    // O(1) errors of a wrong slot, row or feature.
    expect_close(f32.y, ref.y, 5e-4, 5e-4);
    for (size_t i = 0; i < ref.grads.size(); ++i) expect_close(f32.grads[i], ref.grads[i], 2e-3, 2e-3);
  }
}

TEST_CASE("long_short_attention: q_scale is mul(q, q_scale) before the op, bit for bit, forward and gradients",
          "[long_short]") {
  // The CPU kernel scales each segment's queries as it reads them and their gradient as it
  // writes it; the composed op scales with mul. Either must give the bits of the unscaled op on
  // mul(q, q_scale): f32 and f64, with dropout, padding holes, model-sized heads (every register
  // block), and q as a token-major head view (dq written through its row stride).
  const std::vector<CoreCase> cases = {
      {2, 2, 64, 36, 13, 8, false, {64, 41}, 0},
      {1, 2, 48, 52, 40, 16, false, {45}, 0, {{16, 32}}},
      {2, 3, 40, 5, 4, 4, false, {40, 23}, 8},
  };
  for (const CoreCase& c : cases)
    for (DType dtype : {kF32, kF64})
      for (bool fused : {true, false})
        for (bool token_major : {false, true}) {
          INFO("e " << c.e << " R " << c.R << " w " << c.w << " " << dtype << (fused ? " fused" : " composed")
                    << (token_major ? " token-major q" : ""));
          const CoreInputs raw = core_inputs(c, dtype, 41, false);
          const double scale = 1.0 / std::sqrt(double(c.e));
          const Tensor dy = randn_t({c.B, c.h, c.n, c.e}, 43, dtype);
          auto run = [&](bool in_op, Tensor* q_grad) {
            Tensor q = token_major ? raw.q.permute({0, 2, 1, 3}).contiguous().detach().requires_grad_(true)
                                   : raw.q.detach().requires_grad_(true);
            TensorList kv{raw.k, raw.v, raw.kb, raw.vb};
            for (Tensor& t : kv) t = t.detach().requires_grad_(true);
            Tensor qh = token_major ? q.permute({0, 2, 1, 3}) : q;  // [B, h, n, e]
            LongShortAttentionOptions o = core_options(c);
            o.dropout = 0.2;
            o.training = true;
            Generator g(7);
            o.generator = &g;
            o.q_scale = in_op ? scale : 1.0;
            Tensor qin = in_op ? qh : mul(qh, scale);
            Tensor y = fused ? long_short_attention(qin, kv[0], kv[1], kv[2], kv[3], raw.mask, o)
                             : long_short_attention_composed(qin, kv[0], kv[1], kv[2], kv[3], raw.mask, o);
            sum(mul(y, dy)).backward();
            *q_grad = q.grad();
            TensorList out{y.detach()};
            for (const Tensor& t : kv) out.push_back(t.grad());
            return out;
          };
          Tensor dq_in, dq_mul;
          const TensorList a = run(true, &dq_in), b = run(false, &dq_mul);
          CHECK(vec(a[0]) == vec(b[0]));
          CHECK(vec(dq_in) == vec(dq_mul));
          for (size_t i = 1; i < a.size(); ++i) CHECK(vec(a[i]) == vec(b[i]));
        }
  LongShortAttentionOptions o;
  o.window = 4;
  o.q_scale = std::numeric_limits<double>::infinity();
  Tensor q = zeros({1, 1, 8, 2});
  REQUIRE_THROWS_WITH(long_short_attention(q, q, q, Tensor(), Tensor(), Tensor(), o), Catch::Contains("q_scale"));
}

TEST_CASE("long_short_attention: head-split views pass in place, out and gradients keep their layouts", "[long_short]") {
  // q, k, v as the module makes them: [B, n, h, e] leaves seen as [B, h, n, e] (split_heads
  // views), which the CPU kernel reads through their strides; v with a feature stride of 2 as
  // well, which the op must copy. The values equal `base`'s, so every result must be
  // bit-identical to the contiguous inputs' (the kernels sum in the same order).
  const CoreCase c{2, 2, 48, 20, 5, 8, false, {48, 37}, 16};
  const CoreInputs base = core_inputs(c, kF32, 41, false);
  auto token_major = [](const Tensor& t) { return t.permute({0, 2, 1, 3}).contiguous().requires_grad_(true); };
  Tensor lq = token_major(base.q), lk = token_major(base.k);
  Tensor lv = stack({base.v.permute({0, 2, 1, 3}), zeros_like(base.v).permute({0, 2, 1, 3})}, -1).requires_grad_(true);
  Tensor vq = lq.permute({0, 2, 1, 3}), vk = lk.permute({0, 2, 1, 3}), vv = lv.select(-1, 0).permute({0, 2, 1, 3});
  REQUIRE_FALSE(vq.is_contiguous());
  REQUIRE(vv.strides().back() == 2);
  CoreInputs plain = base;
  for (Tensor* t : {&plain.q, &plain.k, &plain.v, &plain.kb, &plain.vb}) *t = t->clone().requires_grad_(true);
  Tensor kb = base.kb.clone().requires_grad_(true), vb = base.vb.clone().requires_grad_(true);
  const Tensor dy = randn_t({c.B, c.h, c.n, c.e}, 43, kF32);
  const LongShortAttentionOptions o = core_options(c);
  const Tensor a = long_short_attention(vq, vk, vv, kb, vb, base.mask, o);
  const Tensor b = long_short_attention(plain.q, plain.k, plain.v, plain.kb, plain.vb, plain.mask, o);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  CHECK(a.permute({0, 2, 1, 3}).is_contiguous());  // out in q's layout: merging the heads is a view
  CHECK(b.is_contiguous());
  // dout as a head-split view too (the W_o Linear's input gradient seen through merge_heads).
  a.backward(dy.permute({0, 2, 1, 3}).contiguous().permute({0, 2, 1, 3}));
  b.backward(dy);
  CHECK(lq.grad().permute({0, 2, 1, 3}).to_vector<float>() == plain.q.grad().to_vector<float>());
  CHECK(lk.grad().permute({0, 2, 1, 3}).to_vector<float>() == plain.k.grad().to_vector<float>());
  CHECK(lv.grad().select(-1, 0).permute({0, 2, 1, 3}).to_vector<float>() == plain.v.grad().to_vector<float>());
  CHECK(lv.grad().select(-1, 1).abs().max().item<float>() == 0.0f);
  CHECK(kb.grad().to_vector<float>() == plain.kb.grad().to_vector<float>());
  CHECK(vb.grad().to_vector<float>() == plain.vb.grad().to_vector<float>());
}

TEST_CASE("long_short_attention: f64 gradcheck (full Jacobian and random projections)", "[long_short]") {
  const std::vector<CoreCase> small = {
      {1, 2, 8, 3, 2, 2, false, {6}, 0},    // window + projection + padding
      {1, 1, 6, 2, 0, 1, false, {5}, 2},    // w = 1, r = 0, blocks of 2
      {1, 1, 9, 2, 1, 3, false, {}, 3},     // odd window, several blocks
      {2, 1, 6, 2, 2, 0, false, {6, 4}, 0}, // w = 0
      {1, 2, 5, 2, 1, 0, true, {4}, 0},     // self slot
      {1, 1, 12, 2, 1, 2, false, {11}, 2},  // many blocks with edge merging
  };
  for (const CoreCase& c : small) {
    for (double p : {0.0, 0.25}) {
      INFO("n " << c.n << " w " << c.w << " R " << c.R << " dropout " << p);
      CoreInputs in = core_inputs(c, kF64, 21, true);
      TensorList inputs{in.q, in.k, in.v};
      if (c.R > 0) inputs.insert(inputs.end(), {in.kb, in.vb});
      auto fn = [&](const TensorList& x) {
        LongShortAttentionOptions o = core_options(c);
        Generator g(5);  // the same dropout mask at every evaluation
        o.dropout = p;
        o.training = true;
        o.generator = &g;
        return long_short_attention(x[0], x[1], x[2], c.R > 0 ? x[3] : Tensor(), c.R > 0 ? x[4] : Tensor(), in.mask, o);
      };
      auto r = gradcheck(testing::SingleFn(fn), inputs);
      INFO(r.message);
      CHECK(r.ok);
    }
  }
  // Larger: random projections uᵀJv.
  CoreCase big{2, 2, 64, 8, 4, 4, false, {64, 41}, 8};
  CoreInputs in = core_inputs(big, kF64, 31, true);
  GradcheckOptions go;
  go.max_jacobian_entries = 1 << 12;
  go.projections = 6;
  auto r = gradcheck(
      testing::SingleFn([&](const TensorList& x) {
        return long_short_attention(x[0], x[1], x[2], x[3], x[4], in.mask, core_options(big));
      }),
      {in.q, in.k, in.v, in.kb, in.vb}, go);
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("long_short_attention: parallel backward is deterministic and equals the composed op", "[long_short]") {
  CoreCase c{2, 2, 256, 8, 4, 4, false, {256, 130}, 16};
  auto grads = [&](int threads) {
    const test::ThreadCount scoped(threads);
    CoreInputs in = core_inputs(c, kF32, 41, true);
    Tensor y = long_short_attention(in.q, in.k, in.v, in.kb, in.vb, in.mask, core_options(c));
    sum(mul(y, randn_t(y.shape(), 3, kF32))).backward();
    std::vector<Vec> out;
    for (Tensor* t : {&in.q, &in.k, &in.v, &in.kb, &in.vb}) out.push_back(vec(t->grad()));
    return out;
  };
  auto one = grads(1), two = grads(2), three = grads(3);
  CHECK(one == two);
  CHECK(one == three);
  // The parallel path (this size passes the parallel threshold) also equals the composed op
  // in f64: gradients sum ≤ n·S ≈ 5000 O(1) products, 1e-11.
  const test::ThreadCount two_threads(2);
  for (double p : {0.0, 0.3}) {
    INFO("dropout " << p);
    CoreInputs a = core_inputs(c, kF64, 41, true), b = core_inputs(c, kF64, 41, true);
    Tensor dy = randn_t({2, 2, 256, 8}, 3);
    LongShortAttentionOptions o = core_options(c);
    o.dropout = p;
    o.training = true;
    Generator g1(8), g2(8);
    o.generator = &g1;
    Tensor ya = long_short_attention(a.q, a.k, a.v, a.kb, a.vb, a.mask, o);
    o.generator = &g2;
    Tensor yb = long_short_attention_composed(b.q, b.k, b.v, b.kb, b.vb, b.mask, o);
    expect_close(vec(ya), vec(yb), 1e-12, 1e-12);
    sum(mul(ya, dy)).backward();
    sum(mul(yb, dy)).backward();
    for (auto [x, y] : {std::pair{&a.q, &b.q}, {&a.k, &b.k}, {&a.v, &b.v}, {&a.kb, &b.kb}, {&a.vb, &b.vb}})
      expect_close(vec(x->grad()), vec(y->grad()), 1e-11, 1e-11);
  }
}

TEST_CASE("long_short_attention: bad arguments are rejected with what to change", "[long_short]") {
  CoreInputs in = core_inputs({1, 2, 10, 4, 3, 0, false, {}, 0}, kF64, 1, false);
  LongShortAttentionOptions o;
  o.window = 4;
  CHECK_THROWS_WITH(long_short_attention(in.q, in.k, in.v, in.kb, in.vb, Tensor(), o),
                    Catch::Contains("long_short_attention") && Catch::Contains("multiple of the window w = 4") &&
                        Catch::Contains("n = 10"));
  o.window = 2;
  CHECK_THROWS_WITH(long_short_attention(in.q, in.k.narrow(2, 0, 8), in.v, in.kb, in.vb, Tensor(), o),
                    Catch::Contains("long_short_attention") && Catch::Contains("{1, 2, 8, 4}"));
  CHECK_THROWS_WITH(long_short_attention(in.q, in.k, in.v, in.kb.narrow(3, 0, 2), in.vb, Tensor(), o),
                    Catch::Contains("kbar and vbar must be [B, h, R, e]") && Catch::Contains("{1, 2, 3, 2}"));
  CHECK_THROWS_WITH(long_short_attention(in.q, in.k, in.v, in.kb, Tensor(), Tensor(), o),
                    Catch::Contains("both kbar and vbar"));
  CHECK_THROWS_WITH(long_short_attention(in.q, in.k, in.v, in.kb, in.vb, ones({1, 9}, TensorOptions(kBool)), o),
                    Catch::Contains("mask must be a bool tensor of shape [B, n]") && Catch::Contains("{1, 9}"));
  CHECK_THROWS_WITH(long_short_attention(in.q, in.k.to(kF32), in.v, in.kb, in.vb, Tensor(), o),
                    Catch::Contains("long_short_attention"));
  o.window = 0;
  CHECK_THROWS_WITH(long_short_attention(in.q, in.k, in.v, Tensor(), Tensor(), Tensor(), o),
                    Catch::Contains("no key slots"));
  o.dropout = 1.5;
  CHECK_THROWS_WITH(long_short_attention(in.q, in.k, in.v, in.kb, in.vb, Tensor(), o),
                    Catch::Contains("between 0 and 1"));
}
