// Causal (char-LM) long-short attention, docs/transformer-ls.md §3 and §9.2: the fused op
// (ops/causal_long_short.h) against its composed version and the independent dense oracle
// (tests/causal_long_short_oracle.h) in f32/f64, forward and gradients; T6's slot sets, position
// values and window band; causality by perturbation (own chunk included); reach through
// compressed slots; the zero-memory case; the M ≤ w branch; the two compression paths (§3.7);
// float64 gradchecks of the op and the module; bad configurations.
#include <cmath>

#include "causal_long_short_oracle.h"
#include "helpers.h"
#include "lsformer/models/attention/causal_long_short.h"
#include "lsformer/ops/causal_long_short.h"

using namespace lsf;
using lsf::test::causal_ls::module_oracle;
using lsf::test::causal_ls::op_oracle;

namespace {

// Tolerances. Every compared value is a chain of reductions of unit-scale random data; the
// longest chain of reduction lengths is L (per test below). Each summation of n terms has
// relative error ≤ n·u (u = 2^-24 for f32, 2^-53 for f64); softmax turns an absolute logit
// error δ into a relative probability error δ, and logits here are ≤ 16 in magnitude, so
// |got − want| ≤ 16·L·u·(1 + |want|) bounds every path: atol = rtol = 16·L·u.
double tol(DType dt, int64_t L) { return 16.0 * double(L) * (dt == kF32 ? 0x1p-24 : 0x1p-53); }

struct OpSizes {
  int64_t B, h, M, e, w, l, r, Nm;
  int64_t Nc() const { return (Nm + M / l) * r; }
  CausalLongShortGeometry geometry() const { return {l, r, Nm}; }
};

CausalLongShortInputs random_inputs(const OpSizes& s, DType dt, uint64_t seed, bool grad = false) {
  Generator g(seed);
  auto rnd = [&](const Shape& shape) {
    Tensor t = randn(shape, TensorOptions(kF64), &g).to(dt);
    if (grad) t.requires_grad_(true);
    return t;
  };
  return {rnd({s.B, s.h, s.M, s.e}), rnd({s.B, s.h, s.w + s.M, s.e}), rnd({s.B, s.h, s.w + s.M, s.e}),
          rnd({s.h, s.e}),           rnd({s.h, s.e}),                 rnd({s.h, s.w, s.e}),
          rnd({s.B, s.h, s.Nc(), s.e}), rnd({s.B, s.h, s.Nc(), s.e}), rnd({s.h, s.Nc(), s.e})};
}

TensorList as_list(const CausalLongShortInputs& in) { return {in.q, in.kw, in.vw, in.u, in.v, in.rw, in.kc, in.vc, in.rc}; }
CausalLongShortInputs from_list(const TensorList& x) { return {x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8]}; }

// The geometries exercised: T6 (§9.2), several heads with r = 1, the M ≤ w branch, one with
// several query tiles of the CPU kernel (32 queries each) and a long memory, one whose last
// tile is partial (M = 48, l = 16) with an odd head width, and one whose window band
// (nk = 32 + w − 1 > 256 tile columns) and compressed slots (Nc > 256) exceed one skinny_gemm
// block, so that the kernel's products are split over columns and over the contraction.
const std::vector<OpSizes> kGeometries = {
    {1, 2, 16, 4, 4, 4, 2, 4},     // T6: M = C = 16, l = 4, r = 2, w = 4, Nc = 16
    {2, 3, 8, 2, 4, 2, 1, 3},      // r = 1, C = 6 ≥ w
    {2, 2, 4, 4, 8, 2, 2, 4},      // M = 4 ≤ w = 8, C = 8
    {1, 2, 96, 8, 32, 8, 2, 5},    // 3 query tiles, window rows over 4 key tiles
    {2, 1, 48, 5, 16, 16, 1, 2},   // tiles of 32 and 16 queries, e = 5
    {1, 1, 64, 3, 300, 4, 1, 75},  // nk = 331 > 256 band columns, C = 300 ≥ w
    {1, 1, 40, 2, 8, 4, 3, 90},    // Nc = (90 + 10)·3 = 300 > 256 compressed slots
};

nn::CausalLongShortAttentionOptions small_module(int64_t heads = 2) {
  nn::CausalLongShortAttentionOptions o;
  o.dim = 8;
  o.heads = heads;
  o.chunk_length = 4;
  o.rank = 2;
  o.window = 4;
  o.memory_length = 16;
  return o;
}

Tensor randn_f64(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, TensorOptions(kF64), &g);
}

}  // namespace

TEST_CASE("causal LS op: fused and composed match the dense oracle in f32 and f64", "[causal_long_short]") {
  for (const OpSizes& s : kGeometries) {
    for (DType dt : {kF64, kF32}) {
      INFO("M " << s.M << " w " << s.w << " l " << s.l << " r " << s.r << " Nm " << s.Nm << " dtype " << dt);
      CausalLongShortInputs in = random_inputs(s, dt, 7 + uint64_t(s.M));
      const auto want = op_oracle(in, s.geometry());
      // Longest chain: two e-long dots per logit, then a softmax and a value sum over Nc + w slots.
      const double t = tol(dt, s.Nc() + s.w + 2 * s.e);
      test::check_close(causal_long_short_attention(in, s.geometry()), want, t, t);
      test::check_close(causal_long_short_attention_composed(in, s.geometry()), want, t, t);
    }
  }
}

TEST_CASE("causal LS op: fused gradients equal the composed op's", "[causal_long_short]") {
  for (const OpSizes& s : kGeometries) {
    INFO("M " << s.M << " w " << s.w << " l " << s.l << " r " << s.r << " Nm " << s.Nm);
    CausalLongShortInputs a = random_inputs(s, kF64, 11, true), b = random_inputs(s, kF64, 11, true);
    Tensor dout = randn_f64({s.B, s.h, s.M, s.e}, 12);
    causal_long_short_attention(a, s.geometry()).backward(dout);
    causal_long_short_attention_composed(b, s.geometry()).backward(dout);
    // Gradient sums run over up to M queries of Nc + w slots, each a product of O(1) factors.
    const double t = tol(kF64, s.M * (s.Nc() + s.w) + 2 * s.e);
    const TensorList la = as_list(a), lb = as_list(b);
    for (size_t i = 0; i < la.size(); ++i) {
      INFO("input " << i);
      test::check_close(la[i].grad(), lb[i].grad(), t, t);
    }
  }
}

TEST_CASE("causal LS op: q_scale scales the queries inside the op, forward and gradients", "[causal_long_short]") {
  // q_scale = s computes with q̂ = s·q: equal to the op on s·q with scale 1, the oracle's
  // function of s·q; gradients: dq is s times the gradient for s·q, the other inputs' equal.
  const double s = 0.37;
  for (const OpSizes& z : {kGeometries[0], kGeometries[3], kGeometries[4]}) {
    INFO("M " << z.M << " w " << z.w << " l " << z.l << " r " << z.r << " Nm " << z.Nm);
    CausalLongShortGeometry scaled = z.geometry();
    scaled.q_scale = s;
    for (DType dt : {kF64, kF32}) {
      const CausalLongShortInputs in = random_inputs(z, dt, 31 + uint64_t(z.M));
      CausalLongShortInputs pre = in;
      pre.q = mul(in.q, s);
      const auto want = op_oracle(pre, z.geometry());
      const double t = tol(dt, z.Nc() + z.w + 2 * z.e + 1);  // as above, and the scaling's rounding
      test::check_close(causal_long_short_attention(in, scaled), want, t, t);
      test::check_close(causal_long_short_attention_composed(in, scaled), want, t, t);
    }
    CausalLongShortInputs a = random_inputs(z, kF64, 33, true), b = random_inputs(z, kF64, 33);
    const Tensor bq = mul(b.q, s).detach().requires_grad_(true);
    TensorList lb = as_list(b);
    lb[0] = bq;
    for (size_t i = 1; i < lb.size(); ++i) lb[i].requires_grad_(true);
    const Tensor dout = randn_f64({z.B, z.h, z.M, z.e}, 34);
    causal_long_short_attention(a, scaled).backward(dout);
    causal_long_short_attention(from_list(lb), z.geometry()).backward(dout);
    const double t = tol(kF64, z.M * (z.Nc() + z.w) + 2 * z.e + 1);
    const TensorList la = as_list(a);
    test::check_close(la[0].grad(), mul(bq.grad(), s), t, t);
    for (size_t i = 1; i < la.size(); ++i) {
      INFO("input " << i);
      test::check_close(la[i].grad(), lb[i].grad(), t, t);
    }
  }
  // The f64 gradcheck with a scale (the scale enters dq, dK̄ and drc).
  const OpSizes small{1, 2, 4, 2, 2, 2, 2, 2};
  CausalLongShortGeometry g = small.geometry();
  g.q_scale = s;
  CausalLongShortInputs in = random_inputs(small, kF64, 35, true);
  auto result = testing::gradcheck([g](const TensorList& x) { return causal_long_short_attention(from_list(x), g); },
                                   as_list(in));
  INFO(result.message);
  CHECK(result.ok);
  // A scale that is not a finite positive number is refused.
  for (double bad : {0.0, -1.0, std::nan("")}) {
    g.q_scale = bad;
    CHECK_THROWS_WITH(causal_long_short_attention(in, g), Catch::Contains("q_scale must be finite and > 0"));
  }
}

TEST_CASE("causal LS op: gradients of a subset of inputs, and results independent of the thread count",
          "[causal_long_short]") {
  // Several query tiles and B·h = 6 (batch, head) tasks: large enough that the kernels run
  // their OpenMP loops in parallel.
  const OpSizes s{2, 3, 96, 8, 32, 8, 2, 5};
  Tensor dout = randn_f64({s.B, s.h, s.M, s.e}, 13).to(kF32);
  // Only some inputs require grad: the others get none, the asked ones match the composed op.
  for (size_t only : {size_t(0), size_t(3), size_t(8)}) {
    INFO("only input " << only);
    CausalLongShortInputs a = random_inputs(s, kF64, 14), b = random_inputs(s, kF64, 14);
    TensorList la = as_list(a), lb = as_list(b);
    la[only].requires_grad_(true);
    lb[only].requires_grad_(true);
    causal_long_short_attention(a, s.geometry()).backward(dout.to(kF64));
    causal_long_short_attention_composed(b, s.geometry()).backward(dout.to(kF64));
    const double t = tol(kF64, s.M * (s.Nc() + s.w) + 2 * s.e);  // as in the test above
    test::check_close(la[only].grad(), lb[only].grad(), t, t);
  }
  // Every output element is written by one task in a fixed order: 1 thread and 3 threads give
  // bit-identical values and gradients.
  std::vector<std::vector<float>> runs[2];
  for (int run = 0; run < 2; ++run) {
    const test::ThreadCount threads(run == 0 ? 1 : 3);
    CausalLongShortInputs in = random_inputs(s, kF32, 15, true);
    Tensor out = causal_long_short_attention(in, s.geometry());
    out.backward(dout);
    runs[run].push_back(out.to_vector<float>());
    for (const Tensor& x : as_list(in)) runs[run].push_back(x.grad().to_vector<float>());
  }
  CHECK(runs[0] == runs[1]);
}

TEST_CASE("causal LS op: strided inputs (split_heads views) give the contiguous results, the output keeps q's layout",
          "[causal_long_short]") {
  const OpSizes s = kGeometries[3];
  const CausalLongShortGeometry g = s.geometry();
  // Leaves in [B, L, h, e] memory (tables [L, h, e]) entering the op as [B, h, L, e] views, as
  // the module's split_heads makes them; kc additionally with a feature stride of 2, which the
  // op must copy. The values equal `base`'s, so results must be bit-identical.
  const CausalLongShortInputs base = random_inputs(s, kF32, 61);
  TensorList leaves, views;
  for (const Tensor& t : as_list(base)) {
    Tensor leaf = t.dim() == 4 ? t.permute({0, 2, 1, 3}).contiguous() : t.dim() == 3 ? t.permute({1, 0, 2}).contiguous() : t.clone();
    leaves.push_back(leaf.requires_grad_(true));
    views.push_back(t.dim() == 4 ? leaf.permute({0, 2, 1, 3}) : t.dim() == 3 ? leaf.permute({1, 0, 2}) : leaf);
  }
  leaves[6] = cat({base.kc.unsqueeze(-1), zeros_like(base.kc).unsqueeze(-1)}, -1).requires_grad_(true);
  views[6] = leaves[6].select(-1, 0);
  REQUIRE(views[6].strides().back() == 2);
  REQUIRE(!views[1].is_contiguous());
  TensorList plain;
  for (const Tensor& t : as_list(base)) plain.push_back(t.clone().requires_grad_(true));
  const Tensor dout = randn_f64({s.B, s.h, s.M, s.e}, 62).to(kF32);
  const Tensor a = causal_long_short_attention(from_list(views), g);
  const Tensor b = causal_long_short_attention(from_list(plain), g);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  // The output of a [B, M, h, e]-laid-out q is laid out the same way: merging heads is a view.
  CHECK(a.permute({0, 2, 1, 3}).is_contiguous());
  a.backward(dout);
  b.backward(dout);
  for (size_t i = 0; i < plain.size(); ++i) {
    INFO("input " << i);
    const Tensor& leaf = leaves[i];
    const Tensor got = i == 6 ? leaf.grad().select(-1, 0)
                       : leaf.dim() == 4 ? leaf.grad().permute({0, 2, 1, 3})
                       : leaf.dim() == 3 ? leaf.grad().permute({1, 0, 2}) : leaf.grad();
    CHECK(got.to_vector<float>() == plain[i].grad().to_vector<float>());
  }
  CHECK(leaves[6].grad().select(-1, 1).to_vector<float>() == std::vector<float>(size_t(s.B * s.h * s.Nc() * s.e), 0.0f));
}

TEST_CASE("causal LS op: f64 gradcheck, full Jacobian on small shapes and projections on a larger one",
          "[causal_long_short]") {
  const std::vector<OpSizes> shapes = {
      {1, 2, 4, 2, 2, 2, 1, 2},   // several chunks, r = 1
      {1, 1, 4, 2, 2, 2, 2, 1},   // r = 2: position rows D·r − 1 − m
      {1, 1, 2, 2, 4, 2, 2, 2},   // M ≤ w
      {2, 2, 16, 4, 8, 4, 2, 2},  // larger: random projections uᵀJv
  };
  for (const OpSizes& s : shapes) {
    INFO("B " << s.B << " h " << s.h << " M " << s.M << " w " << s.w << " r " << s.r);
    CausalLongShortInputs in = random_inputs(s, kF64, 21, true);
    const auto g = s.geometry();
    auto result = testing::gradcheck(
        [g](const TensorList& x) { return causal_long_short_attention(from_list(x), g); }, as_list(in));
    INFO(result.message);
    CHECK(result.ok);
  }
}

TEST_CASE("causal LS op: T6 slot sets, chunk position values and window band (§9.2)", "[causal_long_short]") {
  // T6 geometry with h = e = 1 so each logit is one chosen number: M = 16, C = 16, l = 4, r = 2,
  // w = 4 → Nm = 4, Nc = 16.
  const OpSizes s{1, 1, 16, 1, 4, 4, 2, 4};
  const auto g = s.geometry();
  auto zeros_in = [&] {
    return CausalLongShortInputs{zeros({1, 1, 16, 1}, kF64), zeros({1, 1, 20, 1}, kF64), zeros({1, 1, 20, 1}, kF64),
                                 zeros({1, 1}, kF64),        zeros({1, 1}, kF64),        zeros({1, 4, 1}, kF64),
                                 zeros({1, 1, 16, 1}, kF64), zeros({1, 1, 16, 1}, kF64), zeros({1, 16, 1}, kF64)};
  };
  auto nvis_expected = [](int64_t t) { return t < 4 ? 8 : t < 8 ? 10 : t < 12 ? 12 : 14; };
  const double E = std::exp(30.0);
  // f64 softmax of ≤ 18 terms and one weighted sum: tol(f64, 40) ≈ 7e-14 relative.
  const double t_abs = tol(kF64, 40);

  SECTION("visible compressed slots: all logits 0, vc = 1, vw = 0 → out_t = nvis/(nvis + w)") {
    CausalLongShortInputs in = zeros_in();
    in.vc.fill_(1.0);
    for (auto* fn : {&causal_long_short_attention, &causal_long_short_attention_composed}) {
      std::vector<double> out = (*fn)(in, g).to_vector<double>();
      for (int64_t t = 0; t < 16; ++t) {
        INFO("t " << t);
        CHECK(std::fabs(out[size_t(t)] - double(nvis_expected(t)) / double(nvis_expected(t) + 4)) <= t_abs);
      }
    }
  }
  SECTION("chunk position value of slot (k, m) is (4 + ⌊t/4⌋ − k)·2 − 1 − m") {
    // Only rc row p* is large (q = 1): the slot reading row p* takes almost all the mass, and
    // vc[σ] = σ + 1 identifies it.
    CHECK((4 + 15 / 4 - 0) * 2 - 1 - 0 == 13);  // t = 15: the oldest slot has value 13
    for (int64_t pstar = 0; pstar < 16; ++pstar) {
      CausalLongShortInputs in = zeros_in();
      in.q.fill_(1.0);
      std::vector<double> vc(16), rc(16, 0.0);
      for (int64_t i = 0; i < 16; ++i) vc[size_t(i)] = double(i + 1);
      rc[size_t(pstar)] = 30.0;
      in.vc = tensor(vc, {1, 1, 16, 1});
      in.rc = tensor(rc, {1, 16, 1});
      std::vector<double> out = causal_long_short_attention(in, g).to_vector<double>();
      for (int64_t t = 0; t < 16; ++t) {
        const int64_t nvis = nvis_expected(t);
        if (pstar >= nvis) continue;  // no visible slot of t reads this row
        int64_t sigma = -1;
        for (int64_t k = 0; k < 4 + t / 4; ++k)
          for (int64_t m = 0; m < 2; ++m)
            if ((4 + t / 4 - k) * 2 - 1 - m == pstar) sigma = k * 2 + m;
        REQUIRE(sigma >= 0);
        const double total = double(nvis * (nvis + 1) / 2);  // Σ vc over the visible slots
        const double want = (E * double(sigma + 1) + total - double(sigma + 1)) / (E + double(nvis + 4 - 1));
        INFO("t " << t << " p* " << pstar << " σ " << sigma);
        CHECK(std::fabs(out[size_t(t)] - want) <= t_abs * want);
      }
    }
  }
  SECTION("window of t: memory-relative positions 16+t−3 … 16+t, distances 3 … 0") {
    for (int64_t jstar = 0; jstar < 4; ++jstar) {
      CausalLongShortInputs in = zeros_in();
      in.q.fill_(1.0);
      std::vector<double> vw(20), rw(4, 0.0);
      for (int64_t row = 0; row < 20; ++row) vw[size_t(row)] = double(16 - 4 + row);  // position of window row
      rw[size_t(jstar)] = 30.0;
      in.vw = tensor(vw, {1, 1, 20, 1});
      in.rw = tensor(rw, {1, 4, 1});
      std::vector<double> out = causal_long_short_attention(in, g).to_vector<double>();
      for (int64_t t = 0; t < 16; ++t) {
        const int64_t nvis = nvis_expected(t), distance = 3 - jstar, pos = 16 + t - distance;
        const double band_sum = double(4 * (16 + t) - 6);  // Σ of 16+t−3 … 16+t
        const double want = (E * double(pos) + band_sum - double(pos)) / (E + double(nvis + 4 - 1));
        INFO("t " << t << " j " << jstar);
        CHECK(std::fabs(out[size_t(t)] - want) <= t_abs * want);
      }
    }
    CHECK(16 + 0 - 3 == 13);  // t = 0 reaches memory positions 13, 14, 15
  }
}

TEST_CASE("causal LS module: fused and composed match the dense module oracle", "[causal_long_short]") {
  struct Case {
    int64_t heads, l, r, w, M, C;
    bool bias;
  };
  // T6 (§9.2), the M ≤ w branch (M = 4, w = 8, C = 8), h = 1, and projection biases.
  for (const Case& c : {Case{2, 4, 2, 4, 16, 16, false}, Case{2, 2, 1, 8, 4, 8, false}, Case{1, 4, 1, 4, 8, 8, false},
                        Case{2, 2, 2, 4, 8, 4, true}}) {
    nn::CausalLongShortAttentionOptions o = small_module(c.heads);
    o.chunk_length = c.l;
    o.rank = c.r;
    o.window = c.w;
    o.memory_length = c.C;
    o.bias = c.bias;
    Generator gen(3);
    o.generator = &gen;
    nn::CausalLongShortAttention attn(o);
    if (c.bias) {  // the default bias init is zero; make it count
      NoGradGuard ng;
      for (auto* lin : {attn.proj_query.get(), attn.proj_key.get(), attn.proj_val.get(), attn.proj_out.get()})
        lin->bias.copy_(randn_f64({8}, 5).to(kF32));
    }
    for (DType dt : {kF64, kF32}) {
      attn.to(dt);
      Tensor x = randn_f64({2, c.M, 8}, 1).to(dt), xm = randn_f64({2, c.C, 8}, 2).to(dt);
      const auto want = module_oracle(attn, x, xm);
      const int64_t Nc = (c.C + c.M) / c.l * c.r;
      // Chain: LN-sized reductions over d (projections ×3, LN_G, LN_L, out), the chunk softmax
      // and compression over l, the attention over Nc + w slots and e-wide dots.
      const double t = tol(dt, 6 * 8 + 2 * c.l + Nc + c.w + 2 * 8);
      INFO("heads " << c.heads << " l " << c.l << " r " << c.r << " w " << c.w << " M " << c.M << " dtype " << dt);
      for (bool fused : {true, false}) {
        attn.set_fused(fused);
        test::check_close(attn.forward(x, {.memory = xm}), want, t, t);
      }
    }
  }
}

TEST_CASE("causal LS module: strict causality by perturbation, reach through compressed slots", "[causal_long_short]") {
  // M = 16, C = 16, l = 4, r = 2, w = 4, f32 (bit-exact comparisons).
  nn::CausalLongShortAttention attn(small_module());
  Tensor x = randn_f64({1, 16, 8}, 1).to(kF32), xm = randn_f64({1, 16, 8}, 2).to(kF32);
  for (bool fused : {true, false}) {
    attn.set_fused(fused);
    NoGradGuard ng;
    const std::vector<float> base = attn.forward(x, {.memory = xm}).to_vector<float>();
    // t' = 1, 2, 3 share chunk 0 with the queries before them; 5, 6 chunk 1; 15 the last.
    for (int64_t tp : {1, 2, 3, 5, 6, 9, 15}) {
      Tensor x2 = x.clone();
      x2.narrow(1, tp, 1).copy_(randn_f64({1, 1, 8}, 100 + uint64_t(tp)).to(kF32));
      const std::vector<float> out = attn.forward(x2, {.memory = xm}).to_vector<float>();
      INFO("fused " << fused << " perturbed t' = " << tp);
      for (int64_t i = 0; i < tp * 8; ++i) REQUIRE(out[size_t(i)] == base[size_t(i)]);  // bit-identical
      bool changed = false;
      for (int64_t i = tp * 8; i < (tp + 1) * 8; ++i) changed |= out[size_t(i)] != base[size_t(i)];
      CHECK(changed);
    }
    // Token 2 (chunk 0) is outside t = 12's window {9..12} but chunk 0 is visible: t = 12 changes.
    {
      Tensor x2 = x.clone();
      x2.narrow(1, 2, 1).copy_(randn_f64({1, 1, 8}, 200).to(kF32));
      const std::vector<float> out = attn.forward(x2, {.memory = xm}).to_vector<float>();
      bool changed = false;
      for (int64_t i = 12 * 8; i < 13 * 8; ++i) changed |= out[size_t(i)] != base[size_t(i)];
      CHECK(changed);
    }
    // Memory token 1 (memory chunk 0) is outside t = 0's window {13, 14, 15, 16}: t = 0 changes.
    {
      Tensor xm2 = xm.clone();
      xm2.narrow(1, 1, 1).copy_(randn_f64({1, 1, 8}, 201).to(kF32));
      const std::vector<float> out = attn.forward(x, {.memory = xm2}).to_vector<float>();
      bool changed = false;
      for (int64_t i = 0; i < 8; ++i) changed |= out[size_t(i)] != base[size_t(i)];
      CHECK(changed);
    }
  }
}

TEST_CASE("causal LS module: no memory means an attended all-zero memory", "[causal_long_short]") {
  nn::CausalLongShortAttention attn(small_module());
  Tensor x = randn_f64({2, 16, 8}, 4).to(kF32);
  NoGradGuard ng;
  Tensor implicit = attn.forward(x);
  Tensor explicit_zero = attn.forward(x, {.memory = zeros({2, 16, 8})});
  CHECK(implicit.to_vector<float>() == explicit_zero.to_vector<float>());
  // The zero memory is attended, not masked: a non-zero memory gives different outputs.
  Tensor other = attn.forward(x, {.memory = randn_f64({2, 16, 8}, 5).to(kF32)});
  CHECK(other.to_vector<float>() != implicit.to_vector<float>());
}

TEST_CASE("causal LS module: the two compression paths coincide for h = 1 and differ for h = 2 (§3.7)",
          "[causal_long_short]") {
  Tensor x = randn_f64({2, 8, 8}, 6);
  for (int64_t heads : {1, 2}) {
    nn::CausalLongShortAttention attn(small_module(heads));
    attn.to(kF64);
    NoGradGuard ng;
    auto mem = attn.compress_memory(x);
    auto blk = attn.compress_block(x);
    REQUIRE(mem.k.shape() == Shape{2, heads, 4, 8 / heads});
    // f64: a projection (d), a compression (l) and LN_G (d): L = 2·8 + 4.
    const double t = tol(kF64, 20);
    double max_diff = 0;
    const auto a = mem.k.contiguous().to_vector<double>(), b = blk.k.contiguous().to_vector<double>();
    const auto av = mem.v.contiguous().to_vector<double>(), bv = blk.v.contiguous().to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) max_diff = std::max({max_diff, std::fabs(a[i] - b[i]), std::fabs(av[i] - bv[i])});
    INFO("heads " << heads << " max |memory path − block path| " << max_diff);
    if (heads == 1) CHECK(max_diff <= t * 10);  // LN_G outputs are O(√d·γ) ≤ 10
    else CHECK(max_diff > 1e-3);
  }
}

TEST_CASE("causal LS module: f64 gradcheck through inputs, memory and position parameters", "[causal_long_short]") {
  nn::CausalLongShortAttentionOptions o = small_module();
  o.memory_length = 8;
  o.window = 4;
  nn::CausalLongShortAttention attn(o);
  attn.to(kF64);
  Tensor x = test::grad_input({1, 8, 8}, 31), xm = test::grad_input({1, 8, 8}, 32);
  auto result = testing::gradcheck(
      [&](const TensorList& in) { return attn.forward(in[0], {.memory = in[1]}); },
      {x, xm, attn.r_w_bias, attn.r_r_bias, attn.r_net_chunk->bias, attn.dconv_1->bias});
  INFO(result.message);
  CHECK(result.ok);
}

TEST_CASE("causal LS module: every parameter gradient of the fused path equals the composed path's",
          "[causal_long_short]") {
  nn::CausalLongShortAttention attn(small_module());
  attn.to(kF64);
  Tensor x = randn_f64({2, 16, 8}, 41), xm = randn_f64({2, 16, 8}, 42), dy = randn_f64({2, 16, 8}, 43);
  std::vector<std::vector<double>> grads[2];
  for (int fused = 0; fused < 2; ++fused) {
    attn.zero_grad();
    attn.set_fused(fused == 1);
    attn.forward(x, {.memory = xm}).backward(dy);
    for (const auto& [name, p] : attn.named_parameters()) {
      INFO(name);
      REQUIRE(p.grad().defined());
      grads[fused].push_back(p.grad().to_vector<double>());
    }
  }
  // Each parameter gradient sums B·M = 32 rows, each a chain like the module test's with
  // L = 6·d + 2·l + Nc + w + 2·d = 48 + 8 + 16 + 4 + 16 = 92 ≤ 100: L = 32·100.
  const double t = tol(kF64, 3200);
  for (size_t i = 0; i < grads[0].size(); ++i) {
    INFO("parameter " << attn.named_parameters()[i].first);
    test::check_close(tensor(grads[1][i]), grads[0][i], t, t);
  }
}

TEST_CASE("causal LS: bad configurations are rejected with what to change", "[causal_long_short]") {
  using Catch::Contains;
  auto make = [](auto edit) {
    nn::CausalLongShortAttentionOptions o = small_module();
    edit(o);
    return nn::CausalLongShortAttention(o);
  };
  CHECK_THROWS_WITH(make([](auto& o) { o.heads = 3; }), Contains("CausalLongShortAttention") && Contains("multiple of heads"));
  CHECK_THROWS_WITH(make([](auto& o) { o.memory_length = 2; }), Contains("memory_length 2") && Contains("≥ window 4"));
  CHECK_THROWS_WITH(make([](auto& o) { o.memory_length = 6; }), Contains("multiple of chunk_length 4"));

  nn::CausalLongShortAttention attn(small_module());
  NoGradGuard ng;
  CHECK_THROWS_WITH(attn.forward(zeros({1, 6, 8})), Contains("M = 6") && Contains("multiple of chunk_length 4"));
  CHECK_THROWS_WITH(make([](auto& o) { o.window = 8; }).forward(zeros({1, 12, 8})),
                    Contains("M = 12") && Contains("multiple of the window"));
  CHECK_THROWS_WITH(attn.forward(zeros({1, 8, 8}), {.memory = zeros({1, 2, 8})}),
                    Contains("C = 2") && Contains("{1, 2, 8}") && Contains("multiple of chunk_length"));
  CHECK_THROWS_WITH(attn.forward(zeros({1, 8, 8}), {.memory = zeros({1, 6, 8})}), Contains("C = 6"));
  CHECK_THROWS_WITH(nn::CausalLongShortAttention({.dim = 8, .heads = 2, .chunk_length = 2, .rank = 1, .window = 4,
                                                  .memory_length = 4})
                        .forward(zeros({1, 8, 8}), {.memory = zeros({1, 2, 8})}),
                    Contains("C = 2") && Contains("≥ window 4"));
  CHECK_THROWS_WITH(attn.forward(zeros({1, 8, 6})), Contains("{1, 8, 6}") && Contains("d = 8"));
  CHECK_THROWS_WITH(attn.forward(zeros({1, 8, 8}), {.memory = zeros({2, 8, 8})}), Contains("{2, 8, 8}"));
  CHECK_THROWS_WITH(attn.forward(zeros({1, 8, 8}), {.mask = ones({1, 8}, kBool)}), Contains("padding mask"));
  CHECK_THROWS_WITH(attn.forward(zeros({1, 8, 8}), {.cls_only = true}), Contains("cls_only") && Contains("bidirectional"));
  CHECK_THROWS_WITH(attn.forward(zeros({1, 8, 8}), {.memory = zeros({1, 8, 8}, kF64)}), Contains("CausalLongShortAttention"));

  // The op: shapes named.
  const OpSizes s{1, 2, 8, 2, 4, 4, 1, 2};
  CausalLongShortInputs in = random_inputs(s, kF32, 1);
  CausalLongShortInputs bad = in;
  bad.kw = zeros({1, 2, 8, 2});
  CHECK_THROWS_WITH(causal_long_short_attention(bad, s.geometry()),
                    Contains("causal_long_short_attention") && Contains("{1, 2, 12, 2}") && Contains("{1, 2, 8, 2}"));
  bad = in;
  bad.rc = zeros({2, 5, 2});
  CHECK_THROWS_WITH(causal_long_short_attention_composed(bad, s.geometry()), Contains("rc") && Contains("{2, 5, 2}"));
  CHECK_THROWS_WITH(causal_long_short_attention(in, {3, 1, 2}), Contains("M = 8") && Contains("chunk length 3"));
  bad = in;
  bad.u = zeros({2, 2}, kF64);
  CHECK_THROWS_WITH(causal_long_short_attention(bad, s.geometry()), Contains("causal_long_short_attention"));
}

TEST_CASE("causal LS module: both paths take the model's position tables (relative_positions, chunk_positions)",
          "[causal_long_short]") {
  nn::CausalLongShortAttention attn(small_module());
  attn.to(kF64);
  NoGradGuard ng;
  Tensor x = randn_f64({2, 16, 8}, 51), xm = randn_f64({2, 16, 8}, 52);
  const int64_t Nc = (16 / 4 + 16 / 4) * 2;
  const Tensor window = nn::ar_window_table(4, 8, TensorOptions(kF64)), chunk = nn::ar_chunk_table(Nc, 8, TensorOptions(kF64));
  // A dropped-out window table, as the model passes it in training mode (the chunk table never is).
  const Tensor dropped = mul(window, gt(randn_f64({4, 8}, 53), 0.0).to(kF64));
  for (bool fused : {true, false}) {
    INFO("fused " << fused);
    attn.set_fused(fused);
    const auto implicit = attn.forward(x, {.memory = xm}).to_vector<double>();
    CHECK(attn.forward(x, {.memory = xm, .relative_positions = window, .chunk_positions = chunk}).to_vector<double>() ==
          implicit);
    CHECK(attn.forward(x, {.memory = xm, .relative_positions = dropped}).to_vector<double>() != implicit);
  }
  // The two paths agree on the dropped-out table (as the module test above: L = 6d + 2l + Nc + w + 2d).
  const double t = tol(kF64, 6 * 8 + 8 + Nc + 4 + 16);
  attn.set_fused(true);
  const Tensor fused = attn.forward(x, {.memory = xm, .relative_positions = dropped});
  attn.set_fused(false);
  test::check_close(fused, attn.forward(x, {.memory = xm, .relative_positions = dropped}), t, t);
  CHECK_THROWS_WITH(attn.forward(x, {.memory = xm, .relative_positions = zeros({5, 8}, kF64)}),
                    Catch::Contains("relative_positions") && Catch::Contains("[4, 8]"));
  CHECK_THROWS_WITH(attn.forward(x, {.memory = xm, .chunk_positions = zeros({Nc, 8})}), Catch::Contains("CausalLongShortAttention"));
  CHECK_THROWS_WITH(attn.forward(x, {.memory = xm, .chunk_positions = zeros({Nc + 1, 8}, kF64)}),
                    Catch::Contains("chunk_positions") && Catch::Contains("[16, 8]"));
}
