// The CUDA long-short attention kernels (cuda/long_short.cu) against the CPU kernels
// (ops/cpu/long_short.cpp) and the dense oracle (tests/long_short_oracle.h), forward and every
// gradient, over the docs/transformer-ls.md §9.1 geometries (T1–T4, w = 1, r = 0, w = 0 with
// and without the self slot, padding) and random shapes, f64 / f32 / bf16, with and without
// dropout; plus CPU-running tests of the index arithmetic the GPU kernels use
// (ops/kernels/long_short_geometry.h): window slots, the queries that see a key, the dropout
// numbering and the Philox words.
//
// [cuda] cases start with LSF_REQUIRE_CUDA_DEVICE() and skip without a GPU.
#include <algorithm>
#include <cmath>
#include <set>

#include "helpers.h"
#include "long_short_oracle.h"
#include "lsformer/ops/long_short.h"
#include "lsformer/ops/kernels/long_short_geometry.h"
#include "lsformer/ops/kernels/dropout.h"
#include "lsformer/ops/kernels/long_short.h"

using namespace lsf;

namespace {

using Vec = std::vector<double>;

struct Case {
  int64_t B, h, n, e, R, w;
  bool self_slot = false;
  std::vector<int64_t> real_len;  // empty: no padding
};

// The §9.1 geometries and the corner cases of ops/long_short.h, then shapes that span several
// query tiles (64 queries) and key tiles (32 keys) of the CUDA kernels, odd e (not a multiple of
// the warp), and one window too wide for shared memory (band read from global memory).
const std::vector<Case> kCases = {
    {1, 2, 16, 4, 3, 4, false, {}},          // T1
    {2, 2, 16, 4, 3, 4, false, {11, 16}},    // T2 padding
    {1, 1, 9, 3, 2, 3, false, {}},           // T4 odd window
    {2, 1, 6, 2, 0, 1, false, {6, 4}},       // T4 w = 1, r = 0
    {1, 2, 8, 4, 0, 8, false, {}},           // T3 one segment
    {2, 2, 12, 3, 4, 0, false, {12, 7}},     // w = 0: projection only
    {1, 2, 10, 3, 1, 0, true, {8}},          // w = 0, self slot (CLS layer, r = 0 path)
    {2, 2, 200, 33, 5, 8, false, {200, 77}}, // several tiles, e > 32 and odd
    {1, 3, 129, 16, 2, 1, false, {120}},     // w = 1, odd n, tiles not a multiple of 32
    {1, 1, 150, 8, 3, 6, false, {}},         // even w > 2, partial last tile
    {1, 1, 96, 5, 0, 96, false, {90}},       // one segment wider than the tile
    {1, 1, 512, 64, 4, 128, false, {500}},   // LRA-like band: staged in f32, global in f64
    {1, 1, 1024, 64, 2, 512, false, {1000}}, // band > shared memory in f32 and f64: global path
};

Tensor randn_t(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return mul(randn(shape, TensorOptions(kF64), &g), scale);
}

Tensor u8_mask(const Case& c) {
  std::vector<double> m(size_t(c.B * c.n), 1.0);
  if (!c.real_len.empty())
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t j = c.real_len[size_t(b)]; j < c.n; ++j) m[size_t(b * c.n + j)] = 0.0;
  return tensor(m, {c.B, c.n}).to(kU8);
}

struct Inputs {
  Tensor q, k, v, kb, vb, mask, dout;  // f64 on the CPU
};

// q is scaled by e^{-1/2} as the op expects, so logits are O(1) like the model's.
Inputs make_inputs(const Case& c, uint64_t seed) {
  Inputs in;
  in.q = randn_t({c.B, c.h, c.n, c.e}, seed, 1.0 / std::sqrt(double(c.e)));
  in.k = randn_t({c.B, c.h, c.n, c.e}, seed + 1);
  in.v = randn_t({c.B, c.h, c.n, c.e}, seed + 2);
  in.kb = randn_t({c.B, c.h, c.R, c.e}, seed + 3);
  in.vb = randn_t({c.B, c.h, c.R, c.e}, seed + 4);
  in.mask = u8_mask(c);
  in.dout = randn_t({c.B, c.h, c.n, c.e}, seed + 5);
  return in;
}

LongShortGeometry geometry(const Case& c) { return LongShortGeometry{c.w, c.self_slot, 0}; }

// Forward and backward kernel results on one device.
struct Result {
  Tensor out, lse, dq, dk, dv, dkb, dvb;
};

// Runs both kernels on `device` from the f64 inputs converted to `dtype`; `which` selects the
// gradients requested (bits q, k, v, kbar, vbar); results come back as f64 on the CPU.
// token_major: q, k, v, dout, out, dq, dk, dv live in [B, n, h, e] memory and are passed as
// [B, h, n, e] views (ops/long_short.h: any strides with a unit stride along e).
Result run(const Inputs& in, const Case& c, Device device, DType dtype, const LongShortDropout& drop,
           unsigned which = 0x1f, bool token_major = false) {
  auto put = [&](const Tensor& t) { return t.to(dtype).contiguous().to(device); };
  auto put_rows = [&](const Tensor& t) {
    return token_major ? t.to(dtype).permute({0, 2, 1, 3}).contiguous().to(device).permute({0, 2, 1, 3}) : put(t);
  };
  const Tensor q = put_rows(in.q), k = put_rows(in.k), v = put_rows(in.v), dout = put_rows(in.dout);
  const Tensor kb = put(in.kb), vb = put(in.vb);
  const Tensor mask = in.mask.to(device);
  const TensorOptions opts = TensorOptions(dtype).device(device);
  auto rows_like = [&](const Tensor& like) {
    return token_major ? empty({c.B, c.n, c.h, c.e}, opts).permute({0, 2, 1, 3}) : empty(like.shape(), opts);
  };
  Tensor out = rows_like(q), lse = empty({c.B, c.h, c.n}, opts);
  long_short_forward_kernel(device, out, lse, q, k, v, kb, vb, mask, geometry(c), drop);
  auto grad = [&](unsigned bit, const Tensor& like) {
    if (!(which & bit)) return Tensor();
    return bit >= 8 ? empty(like.shape(), opts) : rows_like(like);
  };
  Tensor dq = grad(1, q), dk = grad(2, k), dv = grad(4, v), dkb = grad(8, kb), dvb = grad(16, vb);
  long_short_backward_kernel(device, dq, dk, dv, dkb, dvb, dout, lse, q, k, v, kb, vb, mask, geometry(c),
                                       drop);
  auto back = [](const Tensor& t) { return t.defined() ? t.to(kCPU).to(kF64).contiguous() : Tensor(); };
  return {back(out), back(lse), back(dq), back(dk), back(dv), back(dkb), back(dvb)};
}

double unit_roundoff(DType d) { return d == kF64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24); }

double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_vector<double>())
    if (std::isfinite(x)) m = std::max(m, std::fabs(x));  // lse of padded rows is +∞ (checked exactly)
  return m;
}

// GPU and CPU results differ only in summation order. Each output element is a sum of at most
// `terms` products of O(1) factors (logits of length e are O(1) because q carries e^{-1/2};
// probabilities ≤ 1; values, keys and dout are standard normal, so |x| ≤ 6), each side rounding
// ≤ terms·u relative to the sum of magnitudes, which is ≤ 6·(largest element) here. Bound:
// 2 sides · 6 · terms · u, applied as atol to max|reference| and as rtol: 16·terms·u.
void check_pair(const Tensor& gpu, const Tensor& cpu, double terms, DType dtype, const char* what) {
  INFO(what);
  REQUIRE(gpu.defined() == cpu.defined());
  if (!gpu.defined()) return;
  const double tol = 16.0 * terms * unit_roundoff(dtype);
  test::check_close(gpu, cpu, tol * std::max(1.0, max_abs(cpu)), tol);
}

// Reduction lengths: a row has S = R + s slots after logits of length e; dK/dV sum over the ≤ 3w
// queries of a key (n for the self slot's single query), dK̄/dV̄ over all n queries.
struct Terms {
  double row, key, bar;
};
Terms terms_of(const Case& c) {
  const LongShortGeometry g = geometry(c);
  const double S = double(c.R + g.span());
  return {double(c.e) + S, double(c.e) + S + 3.0 * double(g.seg()), double(c.e) + S + double(c.n)};
}

void compare(const Result& gpu, const Result& cpu, const Case& c, DType dtype) {
  const Terms t = terms_of(c);
  check_pair(gpu.out, cpu.out, t.row, dtype, "out");
  check_pair(gpu.lse, cpu.lse, t.row, dtype, "lse");
  check_pair(gpu.dq, cpu.dq, 2 * t.row, dtype, "dq");
  check_pair(gpu.dk, cpu.dk, 2 * t.key, dtype, "dk");
  check_pair(gpu.dv, cpu.dv, 2 * t.key, dtype, "dv");
  check_pair(gpu.dkb, cpu.dkb, 2 * t.bar, dtype, "dkbar");
  check_pair(gpu.dvb, cpu.dvb, 2 * t.bar, dtype, "dvbar");
}

std::string describe(const Case& c) {
  std::ostringstream s;
  s << "B " << c.B << " h " << c.h << " n " << c.n << " e " << c.e << " R " << c.R << " w " << c.w
    << (c.self_slot ? " self" : "") << (c.real_len.empty() ? "" : " padded");
  return s.str();
}

}  // namespace

// ---- CPU-running: the shared index arithmetic ------------------------------------------------

TEST_CASE("long_short geometry: window slots are the oracle's and the §9.1 key sets", "[cuda_long_short]") {
  // The oracle enumerates slot u of query t as key ⌊t/w⌋·w − ext + u (self slot: key t).
  for (int64_t w : {0, 1, 2, 3, 4, 5, 6, 8, 9})
    for (bool self : {false, true}) {
      if (self && w > 0) continue;
      for (int64_t n : {w > 0 ? w : 1, 2 * std::max<int64_t>(w, 1), 9 * std::max<int64_t>(w, 1)}) {
        const ls_geometry::Band bd = ls_geometry::make_band(w, self, n, 3);
        const LongShortGeometry geo{w, self, 0};
        REQUIRE(bd.span == geo.span());
        REQUIRE(bd.ext == geo.ext());
        REQUIRE(bd.ext == oracle::oracle_ext(w));
        REQUIRE(bd.slots() == 3 + geo.span());
        for (int64_t t = 0; t < n; ++t)
          for (int64_t u = 0; u < bd.span; ++u) {
            const int64_t expected = w > 0 ? t / w * w - oracle::oracle_ext(w) + u : t;
            CHECK(bd.window_start(t) + u == expected);
            CHECK(bd.in_sequence(t, u) == (expected >= 0 && expected < n));
          }
      }
    }
  // T1: n 16, w 4 → g0 {0..5}, g1 {2..9}, g2 {6..13}, g3 {10..15}; T4: n 9, w 3 → {0..3}, {2..6}, {5..8}.
  auto keys = [](int64_t w, int64_t n, int64_t t) {
    const ls_geometry::Band bd = ls_geometry::make_band(w, false, n, 0);
    std::vector<int64_t> ks;
    for (int64_t u = 0; u < bd.span; ++u)
      if (bd.in_sequence(t, u)) ks.push_back(bd.window_start(t) + u);
    return std::make_pair(ks.front(), ks.back());
  };
  CHECK(keys(4, 16, 0) == std::make_pair<int64_t, int64_t>(0, 5));
  CHECK(keys(4, 16, 5) == std::make_pair<int64_t, int64_t>(2, 9));
  CHECK(keys(4, 16, 11) == std::make_pair<int64_t, int64_t>(6, 13));
  CHECK(keys(4, 16, 15) == std::make_pair<int64_t, int64_t>(10, 15));
  CHECK(keys(3, 9, 1) == std::make_pair<int64_t, int64_t>(0, 3));
  CHECK(keys(3, 9, 4) == std::make_pair<int64_t, int64_t>(2, 6));
  CHECK(keys(3, 9, 8) == std::make_pair<int64_t, int64_t>(5, 8));
  CHECK(keys(1, 6, 3) == std::make_pair<int64_t, int64_t>(2, 4));
}

TEST_CASE("long_short geometry: the queries that see a key are exactly from first_query up to end_query",
          "[cuda_long_short]") {
  // The backward's key-centric kernel visits these ranges; brute force over every query.
  for (int64_t w : {0, 1, 2, 3, 4, 7, 8, 16})
    for (bool self : {false, true}) {
      if (self && w > 0) continue;
      const int64_t seg = std::max<int64_t>(w, 1);
      for (int64_t n : {seg, 3 * seg, 10 * seg}) {
        const ls_geometry::Band bd = ls_geometry::make_band(w, self, n, 2);
        for (int64_t j = 0; j < n; ++j) {
          std::set<int64_t> seen;
          for (int64_t t = 0; t < n; ++t)
            for (int64_t u = 0; u < bd.span; ++u)
              if (bd.window_start(t) + u == j) seen.insert(t);
          std::set<int64_t> range;
          for (int64_t t = bd.first_query(j); t < bd.end_query(j); ++t) range.insert(t);
          INFO("w " << w << " self " << self << " n " << n << " key " << j);
          CHECK(seen == range);
          if (w > 0) CHECK(int64_t(range.size()) <= 3 * w);
        }
      }
    }
}

TEST_CASE("long_short geometry: a query tile's windows lie in the band the CUDA kernels stage",
          "[cuda_long_short]") {
  // ls_forward / ls_backward_rows stage keys [window_start(t0), window_start(t0) + band_rows(Lc))
  // for the tile [t0, t0 + Lc) of tile_queries(64) queries; every window slot of every query of
  // the tile must be a row of that band, and the band must not exceed what the largest tile has.
  for (int64_t w : {0, 1, 2, 3, 4, 8, 9, 64, 96, 128})
    for (bool self : {false, true}) {
      if (self && w > 0) continue;
      const int64_t seg = std::max<int64_t>(w, 1);
      for (int64_t n : {seg, 5 * seg, 70 * seg}) {
        const ls_geometry::Band bd = ls_geometry::make_band(w, self, n, 1);
        const int64_t tile = bd.tile_queries(64);
        INFO("w " << w << " self " << self << " n " << n << " tile " << tile);
        REQUIRE(tile % seg == 0);
        REQUIRE(tile >= std::min<int64_t>(64, n));
        REQUIRE(tile <= std::max<int64_t>(n, 1));
        int64_t outside = 0;  // window slots outside their tile's band
        for (int64_t t0 = 0; t0 < n; t0 += tile) {
          const int64_t Lc = std::min(tile, n - t0), band0 = bd.window_start(t0);
          CHECK(bd.band_rows(Lc) <= bd.band_rows(tile));
          for (int64_t t = t0; t < t0 + Lc; ++t)
            for (int64_t u = 0; u < bd.span; ++u) {
              const int64_t r = bd.window_start(t) + u - band0;
              outside += (r < 0 || r >= bd.band_rows(Lc)) ? 1 : 0;
            }
        }
        CHECK(outside == 0);
      }
    }
}

TEST_CASE("long_short geometry: dropout numbering and Philox words are lsf::dropout's", "[cuda_long_short]") {
  const ls_geometry::Band bd = ls_geometry::make_band(4, false, 16, 3);  // S = 3 + 8
  CHECK(bd.dropout_index(0, 0, 0) == 0u);
  CHECK(bd.dropout_index(1, 2, 5) == uint64_t((1 * 16 + 2) * 11 + 5));
  for (uint64_t seed : {0ull, 1ull, 0x123456789abcdefull})
    for (uint64_t offset : {0ull, 7ull, (1ull << 32) + 3})
      for (uint64_t idx = 0; idx < 64; ++idx) {
        const PhiloxCounter words = philox_block(seed, offset + idx / 4);
        CHECK(ls_geometry::philox_word(seed, offset, idx) == words[idx % 4]);
      }
}

TEST_CASE("long_short CUDA test harness: its tolerances hold between the CPU kernels in f32 and f64",
          "[cuda_long_short]") {
  // What the [cuda] cases check GPU against CPU, checked here CPU f32 against CPU f64 (a larger
  // difference: one side's rounding is 2^-24, as on the GPU), with dropout: the harness, the
  // bounds and the reduction lengths are exercised on every machine.
  for (const Case& c : kCases) {
    INFO(describe(c));
    const Inputs in = make_inputs(c, 21);
    compare(run(in, c, kCPU, kF32, {}), run(in, c, kCPU, kF64, {}), c, kF32);
    LongShortDropout drop;
    drop.threshold = dropout_keep_threshold(0.25);
    drop.scale = 1.0 / 0.75;
    drop.state = GeneratorState{5, 9};
    compare(run(in, c, kCPU, kF32, drop), run(in, c, kCPU, kF64, drop), c, kF32);
  }
}

// ---- GPU: kernels against the CPU kernels and the dense oracle -------------------------------

TEST_CASE("long_short_attention CUDA kernels equal the CPU kernels and the oracle (f64, f32)", "[cuda][cuda_long_short]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (const Case& c : kCases) {
    INFO(describe(c));
    const Inputs in = make_inputs(c, 21);
    // The dense oracle (f64, no dropout) for the forward.
    oracle::Core oc{c.B, c.h, c.n, c.e, c.R, c.w, c.self_slot};
    std::vector<bool> real;
    for (double m : in.mask.to(kF64).to_vector<double>()) real.push_back(m != 0.0);
    const Vec ref = oracle::core(oc, in.q.to_vector<double>(), in.k.to_vector<double>(), in.v.to_vector<double>(),
                                 in.kb.to_vector<double>(), in.vb.to_vector<double>(), real);
    for (DType dtype : {kF64, kF32}) {
      INFO(dtype);
      const Result gpu = run(in, c, kCUDA, dtype, {});
      const Result cpu = run(in, c, kCPU, dtype, {});
      compare(gpu, cpu, c, dtype);
      // Against the oracle (from f64 inputs): f64 as above; f32 adds the inputs' rounding
      // (2^-24 relative each, amplified by the O(1) logits' exp): the same 16·terms·u bound.
      const double tol = 16.0 * terms_of(c).row * unit_roundoff(dtype) * 6.0;
      test::check_close(gpu.out, ref, tol, tol);
    }
  }
}

TEST_CASE("long_short_attention CUDA backward: each gradient alone equals the full run", "[cuda][cuda_long_short]") {
  LSF_REQUIRE_CUDA_DEVICE();
  const Case c{2, 2, 64, 8, 3, 4, false, {64, 30}};
  const Inputs in = make_inputs(c, 5);
  const Result all = run(in, c, kCUDA, kF64, {});
  for (unsigned bit : {1u, 2u, 4u, 8u, 16u}) {
    INFO("gradient bit " << bit);
    const Result one = run(in, c, kCUDA, kF64, {}, bit);
    const Tensor* got[5] = {&one.dq, &one.dk, &one.dv, &one.dkb, &one.dvb};
    const Tensor* want[5] = {&all.dq, &all.dk, &all.dv, &all.dkb, &all.dvb};
    for (int i = 0; i < 5; ++i) {
      CHECK(got[i]->defined() == ((bit >> i) & 1u));
      // The same kernels in the same order: identical bits.
      if (got[i]->defined()) test::check_close(*got[i], *want[i], 0.0, 0.0);
    }
  }
}

TEST_CASE("long_short_attention CUDA kernels: token-major (B, n, h, e) operands read and write in place",
          "[cuda][cuda_long_short]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (const Case& c : {kCases[1], kCases[6], kCases[7], kCases[12]}) {
    INFO(describe(c));
    const Inputs in = make_inputs(c, 4);
    const Result dense = run(in, c, kCUDA, kF32, {});
    const Result strided = run(in, c, kCUDA, kF32, {}, 0x1f, true);
    // The same kernels on the same values in the same order: identical bits.
    for (auto [x, y] : {std::pair{&strided.out, &dense.out}, {&strided.lse, &dense.lse}, {&strided.dq, &dense.dq},
                        {&strided.dk, &dense.dk}, {&strided.dv, &dense.dv}, {&strided.dkb, &dense.dkb},
                        {&strided.dvb, &dense.dvb}})
      test::check_close(*x, *y, 0.0, 0.0);
  }
}

TEST_CASE("long_short_attention CUDA kernels: dropout masks are the CPU's", "[cuda][cuda_long_short]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (const Case& c : {kCases[1], kCases[3], kCases[6], kCases[7]}) {
    INFO(describe(c));
    const Inputs in = make_inputs(c, 3);
    for (double p : {0.3, 1.0}) {
      LongShortDropout drop;
      const int64_t slots = c.B * c.h * c.n * (c.R + geometry(c).span());
      Generator gen(1234);
      if (p < 1.0) {
        drop.state = gen.reserve(uint64_t(slots + 3) / 4 + 5);  // a non-zero offset too
        drop.state = gen.reserve(uint64_t(slots + 3) / 4);
        drop.threshold = dropout_keep_threshold(p);
        drop.scale = 1.0 / (1.0 - p);
      } else {
        drop.threshold = 1u << 24;
        drop.scale = 0.0;
      }
      INFO("p " << p);
      for (DType dtype : {kF64, kF32}) compare(run(in, c, kCUDA, dtype, drop), run(in, c, kCPU, dtype, drop), c, dtype);
    }
  }
}

TEST_CASE("long_short_attention CUDA kernels in bf16 and f16 (fp32 compute) match f32 on the CPU",
          "[cuda][cuda_long_short]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (const Case& c : {kCases[1], kCases[7], kCases[8]}) {
    INFO(describe(c));
    for (DType low : {kBF16, kF16}) {
      INFO(low);
      Inputs in = make_inputs(c, 8);
      // Both sides start from the same low-precision values.
      for (Tensor* t : {&in.q, &in.k, &in.v, &in.kb, &in.vb, &in.dout}) *t = t->to(low).to(kF64);
      const Result gpu = run(in, c, kCUDA, low, {});
      const Result cpu = run(in, c, kCPU, kF32, {});
      // The GPU computes in f32 and rounds each result once to `low` (unit roundoff 2^-8 for
      // bf16, 2^-11 for f16), on top of the f32 bound: tol = 2·u_low + the f32 check's.
      const double u = low == kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
      const Terms t = terms_of(c);
      auto check = [&](const Tensor& g, const Tensor& r, double terms, const char* what) {
        INFO(what);
        if (!r.defined()) return;
        const double tol = 2.0 * u + 16.0 * terms * std::ldexp(1.0, -24);
        test::check_close(g, r, tol * std::max(1.0, max_abs(r)), tol);
      };
      check(gpu.out, cpu.out, t.row, "out");
      check(gpu.dq, cpu.dq, 2 * t.row, "dq");
      check(gpu.dk, cpu.dk, 2 * t.key, "dk");
      check(gpu.dv, cpu.dv, 2 * t.key, "dv");
      check(gpu.dkb, cpu.dkb, 2 * t.bar, "dkbar");
      check(gpu.dvb, cpu.dvb, 2 * t.bar, "dvbar");
    }
  }
}

TEST_CASE("long_short_attention CUDA kernels: random shapes, deterministic backward", "[cuda][cuda_long_short]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Generator pick(77);
  auto draw = [&](int64_t lo, int64_t hi) {  // uniform integer in [lo, hi]
    const double u = rand({1}, TensorOptions(kF64), &pick).item<double>();
    return lo + std::min<int64_t>(int64_t(u * double(hi - lo + 1)), hi - lo);
  };
  for (int trial = 0; trial < 12; ++trial) {
    Case c;
    c.B = draw(1, 2);
    c.h = draw(1, 3);
    c.w = draw(0, 12);
    c.self_slot = c.w == 0 && draw(0, 1) == 1;
    c.R = draw(c.w == 0 && !c.self_slot ? 1 : 0, 9);
    c.n = std::max<int64_t>(c.w, 1) * draw(1, 40);
    c.e = draw(1, 70);
    for (int64_t b = 0; b < c.B; ++b) c.real_len.push_back(draw(0, c.n));
    INFO("trial " << trial << ": " << describe(c));
    const Inputs in = make_inputs(c, 100 + uint64_t(trial));
    const Result gpu = run(in, c, kCUDA, kF32, {});
    compare(gpu, run(in, c, kCPU, kF32, {}), c, kF32);
    // No atomics: a second run gives the same bits.
    const Result again = run(in, c, kCUDA, kF32, {});
    for (auto [x, y] : {std::pair{&gpu.out, &again.out}, {&gpu.dq, &again.dq}, {&gpu.dk, &again.dk},
                        {&gpu.dv, &again.dv}, {&gpu.dkb, &again.dkb}, {&gpu.dvb, &again.dvb}})
      test::check_close(*x, *y, 0.0, 0.0);
  }
}

TEST_CASE("long_short_attention CUDA kernels at the LRA's sizes: n 4096, e 32, R 256 and 254", "[cuda][cuda_long_short]") {
  LSF_REQUIRE_CUDA_DEVICE();
  // The LRA Retrieval "best" geometry (B 2, h 2, e 32): the projected slots alone (w 0, one
  // sequence padded) and beside a one-token window. R·e this large is what bounds the row
  // kernels' shared memory (the staged K̄/V̄ and the dK̄/dV̄ partial sums).
  const Case cases[] = {{2, 2, 4096, 32, 256, 0, false, {4096, 3001}}, {2, 2, 4096, 32, 254, 1, false, {}}};
  for (const Case& c : cases) {
    INFO(describe(c));
    const Inputs in = make_inputs(c, 31);
    compare(run(in, c, kCUDA, kF32, {}), run(in, c, kCPU, kF32, {}), c, kF32);
  }
}

TEST_CASE("long_short_attention CUDA kernels past shared memory: e 64 with R 300 and 700", "[cuda][cuda_long_short]") {
  LSF_REQUIRE_CUDA_DEVICE();
  // Issue #19 item 3. In f32 at e 64 the rows kernel's staged K̄/V̄ and dK̄/dV̄ partial sums take
  // ~1040 bytes per projected slot: R 300 (≈ 320 KB) keeps the partial sums in global memory;
  // R 700 also reads K̄/V̄ from there, in the forward too (≈ 364 KB staged). Both past the
  // 227 KB an H100/H200 block may use; before, both threw. f64 doubles every figure.
  const Case cases[] = {{1, 2, 1024, 64, 300, 2, false, {1024, 777}}, {1, 1, 1024, 64, 700, 1, true, {}}};
  for (const Case& c : cases) {
    INFO(describe(c));
    const Inputs in = make_inputs(c, 37);
    for (DType t : {kF32, kF64}) {
      INFO(dtype_name(t));
      compare(run(in, c, kCUDA, t, {}), run(in, c, kCPU, t, {}), c, t);
    }
  }
}

TEST_CASE("long_short_attention on CUDA tensors: the op and its gradients equal the CPU op", "[cuda][cuda_long_short]") {
  LSF_REQUIRE_CUDA_DEVICE();
  // Through the public op and autograd (needs the rest of the CUDA backend: copies, fills,
  // mask conversion, gradient accumulation).
  const Case c{2, 2, 48, 6, 3, 6, false, {48, 20}};
  const Inputs in = make_inputs(c, 9);
  LongShortAttentionOptions o;
  o.window = c.w;
  Tensor grads[2][5];
  Tensor outs[2];
  const Device devices[2] = {kCPU, kCUDA};
  for (int d = 0; d < 2; ++d) {
    // Fresh leaves on both devices (detached: on the CPU, to() returns the input itself, whose
    // requires_grad would make the GPU copies graph nodes instead of leaves).
    Tensor x[5] = {in.q.detach().to(devices[d]), in.k.detach().to(devices[d]), in.v.detach().to(devices[d]),
                   in.kb.detach().to(devices[d]), in.vb.detach().to(devices[d])};
    for (Tensor& t : x) t.requires_grad_(true);
    const Tensor mask = in.mask.to(kBool).to(devices[d]);
    outs[d] = long_short_attention(x[0], x[1], x[2], x[3], x[4], mask, o);
    outs[d].backward(in.dout.to(devices[d]));
    for (int i = 0; i < 5; ++i) grads[d][i] = x[i].grad().to(kCPU);
  }
  const Terms t = terms_of(c);
  check_pair(outs[1].to(kCPU), outs[0], t.row, kF64, "out");
  const double terms[5] = {2 * t.row, 2 * t.key, 2 * t.key, 2 * t.bar, 2 * t.bar};
  for (int i = 0; i < 5; ++i) check_pair(grads[1][i], grads[0][i], terms[i], kF64, "gradient");
}
