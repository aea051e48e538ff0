// Bidirectional long-short attention (docs/transformer-ls.md §2, §9.1): the fused op against the
// composed op and both against the independent dense oracle (tests/long_short_oracle.h), the
// §9.1 cases T1–T5 and invariants through nn::LongShortAttention, the layer against a PyTorch
// implementation with the official parameter names (tests/fixtures/gen_long_short.py), float64
// gradchecks of the fused op and of the module, determinism, and rejected configurations.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "helpers.h"
#include "long_short_oracle.h"
#include "lsformer/models/attention/long_short.h"
#include "lsformer/models/nn/capture.h"
#include "lsformer/ops/long_short.h"

using namespace lsf;
using testing::gradcheck;
using testing::GradcheckOptions;

namespace {

using Vec = std::vector<double>;

Vec vec(const Tensor& t) { return t.to_vector<double>(); }

Tensor randn_t(const Shape& shape, uint64_t seed, DType dtype = kF64) {
  Generator g(seed);
  return randn(shape, TensorOptions(kF64), &g).to(dtype);
}

// [B, n] bool with tokens ≥ real_len[b] padded.
Tensor pad_mask(int64_t B, int64_t n, const std::vector<int64_t>& real_len) {
  std::vector<uint8_t> m(size_t(B * n));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < n; ++j) m[size_t(b * n + j)] = j < real_len[size_t(b)];
  return tensor(std::vector<double>(m.begin(), m.end()), {B, n}).to(kBool);
}

std::vector<bool> bools(const Tensor& mask) {
  std::vector<bool> out;
  if (!mask.defined()) return out;
  for (double v : vec(mask)) out.push_back(v != 0.0);
  return out;
}

void expect_close(const Vec& a, const Vec& b, double atol, double rtol) {
  REQUIRE(a.size() == b.size());
  int bad = 0;
  std::ostringstream msg;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) <= atol + rtol * std::fabs(b[i])) && bad++ < 5)
      msg << "  [" << i << "] " << a[i] << " vs " << b[i] << "\n";
  INFO("mismatches " << bad << " of " << a.size() << " (atol " << atol << ", rtol " << rtol << ")\n" << msg.str());
  CHECK(bad == 0);
}

// ---- the core op -----------------------------------------------------------------------------

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
    set_num_threads(threads);
    CoreInputs in = core_inputs(c, kF32, 41, true);
    Tensor y = long_short_attention(in.q, in.k, in.v, in.kb, in.vb, in.mask, core_options(c));
    sum(mul(y, randn_t(y.shape(), 3, kF32))).backward();
    std::vector<Vec> out;
    for (Tensor* t : {&in.q, &in.k, &in.v, &in.kb, &in.vb}) out.push_back(vec(t->grad()));
    return out;
  };
  const int before = get_num_threads();
  auto one = grads(1), two = grads(2), three = grads(3);
  CHECK(one == two);
  CHECK(one == three);
  // The parallel path (this size passes the parallel threshold) also equals the composed op
  // in f64: gradients sum ≤ n·S ≈ 5000 O(1) products, 1e-11.
  set_num_threads(2);
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
  set_num_threads(before);
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

// ---- nn::LongShortAttention ----------------------------------------------------------------------

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
