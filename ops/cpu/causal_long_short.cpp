// CPU kernels of the causal long-short attention core (ops/causal_long_short.h).
//
// Layout. Every tensor is read through its strides with the feature axis contiguous (the op
// passes views such as split_heads(X W) = [B, L, h, e] permuted to [B, h, L, e] without copying
// them); the rows of one (batch, head) are then a matrix with a row stride, which is what the
// GEMMs below take.
//
// Tiles. Queries are cut into tiles of Lq = a multiple of the chunk length l (32 queries for
// l = 16). The queries t0 … t0+Lt−1 of a tile read, in the window, the key rows
// t0+1 … t0+Lt+w−1 of [last w memory rows ; block] (nk = Lt + w − 1 rows; query i of the
// tile reads tile columns i … i+w−1, band column j at tile column i + j), and in the
// compressed branch the slots σ < nv = nvis(last query of the tile) (earlier queries of the
// tile see fewer: their other slots get probability 0). Every product of a tile is one small
// GEMM on ops/cpu/skinny_gemm (register-tiled, each sum in a fixed order):
//   Sw [Lt × nk] = (q̂ + u)·Kwᵀ   window content logits in tile coordinates
//   Pw [Lt × w]  = (q̂ + v)·rwᵀ   window position logits in band coordinates
//   Sc [Lt × nv] = q̂·K̄ᵀ,  Pc [Lt × nv] = q̂·rcᵀ   compressed content / position logits
// (the right-hand sides read from transposed copies, [e × rows] panels with a column count
// padded to a multiple of 16, made once per (batch, head) or head, so that skinny_gemm reads
// them in place), and the row pass forms each query's logits (window: Sw[i, i+j] + Pw[i, j];
// compressed: Sc[i, σ] + Pc[i, nvis_i − 1 − σ]), one softmax, and writes the probabilities
// back (window probabilities in tile coordinates, zero outside the band). Nothing of size
// [M, Nc + w] exists: the forward keeps one log-sum-exp per query.
//
// Scale: q̂ = s·q with s the op's q_scale. q is read in place: s enters q̂ + u and q̂ + v as
// they are formed and is the alpha of the products that read q (Sc, Pc); the backward's dq, dK̄
// and drc carry the same factor. (A scaled copy of q would be one more pass over it forward and
// one over its gradient backward.)
//
// Forward: out = Pcomp·V̄ + Pwin_tile·Vw_rows (two GEMMs per tile).
//
// Backward (FlashAttention-2 style recomputation from the log-sum-exp): per tile, the four
// logit products again, dPw = dout·Vw_rowsᵀ and dPc = dout·V̄ᵀ, dS = P ⊙ (dP − δ)
// (δ_t = dout_t·out_t), then
//   dq̂  = dSw_tile·Kw_rows + dSw·rw + dSc·K̄ + dSc_rev·rc         (dSc_rev: each row reversed
//                                                                  to position-table order)
//   dKw_rows += dSw_tileᵀ·(q̂ + u),   dVw_rows += Pw_tileᵀ·dout
//   dK̄ += dScᵀ·q̂,   dV̄ += Pcᵀ·dout
// and the per-(batch, head) partials drw += dSwᵀ·(q̂ + v), drc += dSc_revᵀ·q̂,
// du += Σ_t (dSw_tile·Kw_rows)_t, dv += Σ_t (dSw·rw)_t, then summed over the batch in batch
// order.
//
// Work split and determinism: one OpenMP task per (batch, head), in forward and backward; it
// walks its query tiles in order and accumulates its key-side gradients tile after tile. Every
// output element is therefore written by exactly one task in a fixed order: results do not
// depend on the thread count, and there are no atomics. (B·h tasks: 32 for batch 8 × 4 heads.)
//
// Numerics: products and sums accumulate in the tensor dtype (f32 or f64), as the bidirectional
// kernel (ops/cpu/long_short.cpp): logits are dot products of length e; the softmax sum and the
// output run over nvis + w terms, a gradient over at most M queries (f32: about
// (e + nvis + w)·2^-24 relative error in the forward). f32 uses the vectorised exp of
// ops/cpu/unary_math.h (≤ 2 ulp), f64 libm's. lse is stored in the tensor dtype.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "lsformer/engine/region_errors.h"
#include "lsformer/engine/scratch.h"
#include "lsformer/ops/causal_long_short.h"
#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/cpu/rowwise.h"
#include "lsformer/ops/cpu/skinny_gemm.h"
#include "lsformer/ops/cpu/strided_rows.h"
#include "lsformer/ops/cpu/transpose_panel.h"
#include "lsformer/ops/kernels/causal_long_short.h"

namespace lsf::cpu {
namespace {

constexpr int64_t kTileQueries = 32;  // queries per tile, rounded up to a multiple of l
constexpr int64_t kAlign = 16;        // panel columns are padded to a multiple of this (skinny_gemm reads in place)

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// c [m × n] = alpha·op(a)·op(b) + beta·c with skinny_gemm's conventions (skinny_gemm.h), for any
// n and k: columns in blocks of ≤ kSkinnyMaxN, the contraction in blocks of ≤ kSkinnyMaxK
// added in order (deterministic). k = 0 gives beta·c (c zeroed for beta = 0).
template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  for (int64_t j0 = 0; j0 < n; j0 += kSkinnyMaxN) {
    const int64_t nb = std::min(kSkinnyMaxN, n - j0);
    for (int64_t k0 = 0; k0 < k; k0 += kSkinnyMaxK) {
      const int64_t kb = std::min(kSkinnyMaxK, k - k0);
      const T* ap = ta ? a + k0 * lda : a + k0;                  // a(i, k) = ta ? a[k·lda + i] : a[i·lda + k]
      const T* bp = tb ? b + j0 * ldb + k0 : b + k0 * ldb + j0;  // b(k, j) = tb ? b[j·ldb + k] : b[k·ldb + j]
      skinny_gemm(ta, tb, m, nb, kb, alpha, ap, lda, bp, ldb, k0 == 0 ? beta : T(1), c + j0, ldc);
    }
  }
}

// The op's sizes and inputs.
template <typename T>
struct View {
  int64_t B, H, M, e, w, Nc, l, r, Nm, Lq;
  T q_scale;  // q̂ = q_scale·q
  int64_t ldw, ldc, ldr;  // panel row lengths: Kwᵀ/Vwᵀ, K̄ᵀ/V̄ᵀ/rcᵀ, rwᵀ
  Rows<const T> q, kw, vw, u, v, rw, kc, vc, rc;

  View(const CausalLongShortInputs& in, const CausalLongShortGeometry& g)
      : B(in.q.size(0)), H(in.q.size(1)), M(in.q.size(2)), e(in.q.size(3)), w(in.rw.size(1)),
        Nc(in.kc.size(2)), l(g.chunk_length), r(g.rank), Nm(g.memory_chunks),
        Lq(std::max(g.chunk_length, round_up(kTileQueries, g.chunk_length))), q_scale(T(g.q_scale)),
        // A tile reads panel columns [t0 + 1, t0 + 1 + round_up(nk)) ⊂ [0, M + w + kAlign).
        ldw(round_up(M + w + kAlign, kAlign)), ldc(round_up(std::max<int64_t>(Nc, 1), kAlign)),
        ldr(round_up(w, kAlign)), q(in.q), kw(in.kw), vw(in.vw), u(in.u), v(in.v), rw(in.rw), kc(in.kc), vc(in.vc),
        rc(in.rc) {}

  int64_t nvis(int64_t t) const { return (Nm + t / l) * r; }
  int64_t tiles() const { return (M + Lq - 1) / Lq; }
};

// dst [e × ld] = the first n rows (row stride sl) transposed, columns [n, ld) zero. Through
// registers, 8 × 8 floats at a time (ops/cpu/transpose_panel.h), compiled per vector level:
// element by element, these panels were ~2.5% of a char-LM training step.
template <typename T, int Bytes>
LSF_VECTOR_INLINE void transpose_rows_body(T* dst, int64_t ld, const T* src, int64_t sl, int64_t n, int64_t e) {
  transpose_panel_body<T, Bytes>(dst, ld, [src, sl](int64_t i) LSF_VECTOR_LAMBDA { return src + i * sl; }, n, e);
  for (int64_t f = 0; f < e; ++f)
    for (int64_t c = n; c < ld; ++c) dst[f * ld + c] = T(0);
}
LSF_PER_VECTOR_LEVEL(transpose_rows)

// Per-head panels of the position tables (read by every (batch, head) task): rwᵀ [H][e × ldr],
// rcᵀ [H][e × ldc]. (This and the per-head partials below are 0.1-1 MiB per call: from the CPU
// allocator's cache, engine/scratch.h, not fresh pages from the C library on every call.)
template <typename T>
struct TablePanels {
  CpuScratch<T> rw, rc;
  explicit TablePanels(const View<T>& x) : rw(size_t(x.H * x.e * x.ldr)), rc(size_t(x.H * x.e * x.ldc)) {
    for (int64_t head = 0; head < x.H; ++head) {
      transpose_rows<T>(rw.data() + head * x.e * x.ldr, x.ldr, x.rw.at(0, head), x.rw.sl, x.w, x.e);
      transpose_rows<T>(rc.data() + head * x.e * x.ldc, x.ldc, x.rc.at(0, head), x.rc.sl, x.Nc, x.e);
    }
  }
};

// One thread's scratch (sizes for the largest tile): the (batch, head) panels and the tile's
// products. Leading dimensions: nkp = round_up(nk) for sw / dpw, ldr for pw, nvp = round_up(nv)
// for sc / pc / dpc. Zero-initialised (the panels' padding columns are read as zeros), from the
// CPU allocator: made inside the parallel region, so a failure to allocate is carried out of it.
template <typename T>
struct Scratch {
  ScratchVector<T> kwT, vwT, kcT, vcT;  // [e × ldw], [e × ldc]
  ScratchVector<T> qu, qv;              // [Lq × e] q̂ + u, q̂ + v
  ScratchVector<T> sw, dpw;             // [Lq × nkp]: window logits / probabilities / dS, tile coordinates
  ScratchVector<T> pw;                  // [Lq × ldr]: window position logits, then dS in band coordinates
  ScratchVector<T> sc, pc, dpc;         // [Lq × ldc]: compressed logits / probabilities / dS (and reversed)
  ScratchVector<T> a, bm;               // [Lq × e]: the window parts of dq̂ (for du, dv)
  ScratchVector<T> row, delta;          // [Nc + w] one query's logits; [Lq] δ
  ScratchVector<int64_t> nvis;          // [Lq] visible compressed slots of each tile row
  Scratch(const View<T>& x, bool backward)
      : kwT(size_t(x.e * x.ldw)), vwT(backward ? kwT.size() : 0), kcT(size_t(x.e * x.ldc)),
        vcT(backward ? kcT.size() : 0), qu(size_t(x.Lq * x.e)), qv(qu.size()),
        sw(size_t(x.Lq * round_up(x.Lq + x.w, kAlign))), dpw(backward ? sw.size() : 0), pw(size_t(x.Lq * x.ldr)),
        sc(size_t(x.Lq * x.ldc)), pc(sc.size()), dpc(backward ? sc.size() : 0), a(backward ? qu.size() : 0),
        bm(a.size()), row(size_t(x.Nc + x.w)), delta(size_t(x.Lq)), nvis(size_t(x.Lq)) {}
};

// The tile's geometry: queries [t0, t0 + Lt), window rows [t0 + 1, t0 + 1 + nk), compressed
// slots [0, nv); nkp, nvp: nk, nv rounded up to kAlign (the products' column counts).
struct Tile {
  int64_t t0, Lt, nk, nv, nkp, nvp;
};

template <typename T>
Tile tile_of(const View<T>& x, int64_t index) {
  const int64_t t0 = index * x.Lq, Lt = std::min(x.Lq, x.M - t0), nk = Lt + x.w - 1, nv = x.nvis(t0 + Lt - 1);
  return {t0, Lt, nk, nv, round_up(nk, kAlign), round_up(nv, kAlign)};
}

// q̂ + u, q̂ + v of the tile and the four logit products, into the scratch.
template <typename T>
void tile_logits(const View<T>& x, Scratch<T>& s, const TablePanels<T>& tables, int64_t b, int64_t head,
                 const Tile& tl) {
  const int64_t e = x.e;
  const T* q = x.q.at(b, head) + tl.t0 * x.q.sl;
  const T* u = x.u.at(0, head);
  const T* v = x.v.at(0, head);
  for (int64_t i = 0; i < tl.Lt; ++i)
    for (int64_t f = 0; f < e; ++f) {
      const T qh = x.q_scale * q[i * x.q.sl + f];
      s.qu[size_t(i * e + f)] = qh + u[f];
      s.qv[size_t(i * e + f)] = qh + v[f];
    }
  gemm<T>(false, false, tl.Lt, tl.nkp, e, T(1), s.qu.data(), e, s.kwT.data() + tl.t0 + 1, x.ldw, T(0), s.sw.data(),
          tl.nkp);
  gemm<T>(false, false, tl.Lt, x.ldr, e, T(1), s.qv.data(), e, tables.rw.data() + head * e * x.ldr, x.ldr, T(0),
          s.pw.data(), x.ldr);
  if (tl.nv > 0) {
    // q̂·K̄ᵀ and q̂·rcᵀ with q read in place: the scale is the products' alpha.
    gemm<T>(false, false, tl.Lt, tl.nvp, e, x.q_scale, q, x.q.sl, s.kcT.data(), x.ldc, T(0), s.sc.data(), tl.nvp);
    gemm<T>(false, false, tl.Lt, tl.nvp, e, x.q_scale, q, x.q.sl, tables.rc.data() + head * e * x.ldc, x.ldc, T(0),
            s.pc.data(), tl.nvp);
  }
}

// Max and sum of x[0 … n) in kLanes independent lanes (fixed order: deterministic), written so
// that GCC vectorises them (an OpenMP simd reduction over a template type does not).
template <typename T>
constexpr int64_t kLanes = int64_t(64 / sizeof(T));

template <typename T>
[[gnu::always_inline]] inline T row_max(const T* x, int64_t n) {
  T m[kLanes<T>];
  for (int64_t k = 0; k < kLanes<T>; ++k) m[k] = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>)
    for (int64_t k = 0; k < kLanes<T>; ++k) m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
  for (int64_t k = 0; i + k < n; ++k) m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
  T out = m[0];
  for (int64_t k = 1; k < kLanes<T>; ++k) out = m[k] > out ? m[k] : out;
  return out;
}

template <typename T>
[[gnu::always_inline]] inline T row_sum(const T* x, int64_t n) {
  T m[kLanes<T>] = {};
  int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>)
    for (int64_t k = 0; k < kLanes<T>; ++k) m[k] += x[i + k];
  for (int64_t k = 0; i + k < n; ++k) m[k] += x[i + k];
  for (int64_t half = kLanes<T> / 2; half >= 1; half /= 2)
    for (int64_t k = 0; k < half; ++k) m[k] += m[k + half];
  return m[0];
}

// Forward row pass: each query's logits, softmax and log-sum-exp; the probabilities go back
// into sc (compressed, zero from nvis_i to nv) and sw (window, tile coordinates, zero off the
// band up to nk). ld: sc/pc nvp, sw nkp, pw ldr.
template <typename T>
LSF_SIMD_CLONES void forward_rows(T* sc, const T* pc, T* sw, const T* pw, T* row, T* lse, int64_t Lt, int64_t nk,
                                  int64_t nkp, int64_t nv, int64_t nvp, int64_t w, int64_t ldr, const int64_t* nvis) {
  for (int64_t i = 0; i < Lt; ++i) {
    const int64_t n = nvis[i];
    T* sci = sc + i * nvp;
    const T* pci = pc + i * nvp;
    T* swi = sw + i * nkp;
    const T* pwi = pw + i * ldr;
    for (int64_t s = 0; s < n; ++s) row[s] = sci[s] + pci[n - 1 - s];
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) row[n + j] = swi[i + j] + pwi[j];
    const T mx = row_max(row, n + w);
#pragma omp simd
    for (int64_t s = 0; s < n + w; ++s) row[s] = vexp(T(row[s] - mx));
    const T total = row_sum(row, n + w);
    const T inv = T(1) / total;
#pragma omp simd
    for (int64_t s = 0; s < n; ++s) sci[s] = row[s] * inv;
    for (int64_t s = n; s < nv; ++s) sci[s] = T(0);
    for (int64_t c = 0; c < i; ++c) swi[c] = T(0);
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) swi[i + j] = row[n + j] * inv;
    for (int64_t c = i + w; c < nk; ++c) swi[c] = T(0);
    lse[i] = mx + std::log(total);
  }
}

template <typename T>
void forward_typed(const Tensor& out_t, const Tensor& lse_t, const CausalLongShortInputs& in,
                   const CausalLongShortGeometry& g) {
  const View<T> x(in, g);
  const Rows<T> out(out_t);
  T* lse = lse_t.data_ptr<T>();
  const int64_t e = x.e, tiles = x.tiles(), BH = x.B * x.H;
  const TablePanels<T> tables(x);
  const bool parallel = BH > 1 && BH * x.M * (x.Nc + x.w) * e >= 4 * kParallelGrain;
  RegionErrors errors;
#pragma omp parallel if (parallel)
  {
    std::optional<Scratch<T>> scratch;
    errors.run([&] { scratch.emplace(x, false); });
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; ++bh) errors.run([&] {
      Scratch<T>& s = *scratch;
      int64_t* const nvis = s.nvis.data();
      const int64_t b = bh / x.H, head = bh % x.H;
      transpose_rows<T>(s.kwT.data(), x.ldw, x.kw.at(b, head), x.kw.sl, x.w + x.M, e);
      transpose_rows<T>(s.kcT.data(), x.ldc, x.kc.at(b, head), x.kc.sl, x.Nc, e);
      const T* vw = x.vw.at(b, head);
      const T* vc = x.vc.at(b, head);
      for (int64_t index = 0; index < tiles; ++index) {
        const Tile tl = tile_of(x, index);
        for (int64_t i = 0; i < tl.Lt; ++i) nvis[i] = x.nvis(tl.t0 + i);
        tile_logits(x, s, tables, b, head, tl);
        forward_rows<T>(s.sc.data(), s.pc.data(), s.sw.data(), s.pw.data(), s.row.data(), lse + bh * x.M + tl.t0,
                        tl.Lt, tl.nk, tl.nkp, tl.nv, tl.nvp, x.w, x.ldr, nvis);
        T* o = out.at(b, head) + tl.t0 * out.sl;
        gemm<T>(false, false, tl.Lt, e, tl.nv, T(1), s.sc.data(), tl.nvp, vc, x.vc.sl, T(0), o, out.sl);
        gemm<T>(false, false, tl.Lt, e, tl.nk, T(1), s.sw.data(), tl.nkp, vw + (tl.t0 + 1) * x.vw.sl, x.vw.sl, T(1), o,
                out.sl);
      }
    });
  }
  errors.rethrow();
}

// Backward row pass. In: sc, pc, sw, pw (logits), dpc, dpw (dout·values). Out: sc = compressed
// probabilities, dpc = dSc, pc = dSc_rev (row i reversed: column p ↔ slot nvis_i − 1 − p), all
// zero from nvis_i to nv; sw = window probabilities and dpw = dSw in tile coordinates (zero off
// the band up to nk); pw = dSw in band coordinates.
template <typename T>
LSF_SIMD_CLONES void backward_rows(T* sc, T* pc, T* dpc, T* sw, T* pw, T* dpw, T* row, const T* lse, const T* delta,
                                   int64_t Lt, int64_t nk, int64_t nkp, int64_t nv, int64_t nvp, int64_t w,
                                   int64_t ldr, const int64_t* nvis) {
  for (int64_t i = 0; i < Lt; ++i) {
    const int64_t n = nvis[i];
    const T l = lse[i], dl = delta[i];
    T* sci = sc + i * nvp;
    T* pci = pc + i * nvp;
    T* dpci = dpc + i * nvp;
    T* swi = sw + i * nkp;
    T* pwi = pw + i * ldr;
    T* dpwi = dpw + i * nkp;
    // Compressed: p, dS; row holds the logits first (pc is overwritten by dSc_rev below).
    for (int64_t s = 0; s < n; ++s) row[s] = sci[s] + pci[n - 1 - s];
#pragma omp simd
    for (int64_t s = 0; s < n; ++s) {
      const T p = vexp(T(row[s] - l));
      sci[s] = p;
      dpci[s] = p * (dpci[s] - dl);
    }
    for (int64_t s = 0; s < n; ++s) pci[n - 1 - s] = dpci[s];
    for (int64_t s = n; s < nv; ++s) sci[s] = dpci[s] = pci[s] = T(0);
    // Window: band values first (reads of sw, dpw at i + j), then the rows rewritten.
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) {
      const T p = vexp(T(swi[i + j] + pwi[j] - l));
      row[j] = p;
      pwi[j] = p * (dpwi[i + j] - dl);
    }
    for (int64_t c = 0; c < i; ++c) swi[c] = dpwi[c] = T(0);
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) {
      swi[i + j] = row[j];
      dpwi[i + j] = pwi[j];
    }
    for (int64_t c = i + w; c < nk; ++c) swi[c] = dpwi[c] = T(0);
  }
}

template <typename T>
void backward_typed(const CausalLongShortInputs& d, const Tensor& dout_t, const Tensor& out_t, const Tensor& lse_t,
                    const CausalLongShortInputs& in, const CausalLongShortGeometry& g) {
  const View<T> x(in, g);
  const int64_t B = x.B, H = x.H, M = x.M, e = x.e, w = x.w, Nc = x.Nc, BH = B * H, tiles = x.tiles();
  const Rows<const T> dout(dout_t), out(out_t);
  const T* lse = lse_t.data_ptr<T>();
  const Rows<T> dq(d.q), dkw(d.kw), dvw(d.vw), dkc(d.kc), dvc(d.vc);
  const bool need_u = d.u.defined(), need_v = d.v.defined(), need_rw = d.rw.defined(), need_rc = d.rc.defined();
  const bool window_dq = dq.p || need_u || need_v;
  const TablePanels<T> tables(x);
  // Per-(batch, head) partial sums of the per-head gradients, summed over the batch below (each
  // task zeroes its own before summing into it).
  const CpuScratch<T> du_part(need_u ? size_t(BH * e) : 0), dv_part(need_v ? size_t(BH * e) : 0);
  const CpuScratch<T> drw_part(need_rw ? size_t(BH * w * e) : 0), drc_part(need_rc ? size_t(BH * Nc * e) : 0);
  const bool parallel = BH > 1 && BH * M * (Nc + w) * e >= 4 * kParallelGrain;

  RegionErrors errors;
#pragma omp parallel if (parallel)
  {
    std::optional<Scratch<T>> scratch;
    errors.run([&] { scratch.emplace(x, true); });
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; ++bh) errors.run([&] {
      Scratch<T>& s = *scratch;
      int64_t* const nvis = s.nvis.data();
      const int64_t b = bh / H, head = bh % H;
      // This task owns every row of (b, head) in the key-side outputs and the partials.
      auto zero_rows = [&](const Rows<T>& t, int64_t rows) {
        if (t.p)
          for (int64_t k = 0; k < rows; ++k) std::fill(t.at(b, head) + k * t.sl, t.at(b, head) + k * t.sl + e, T(0));
      };
      zero_rows(dkw, w + M);
      zero_rows(dvw, w + M);
      zero_rows(dkc, Nc);
      zero_rows(dvc, Nc);
      T* du_b = need_u ? du_part.data() + bh * e : nullptr;
      T* dv_b = need_v ? dv_part.data() + bh * e : nullptr;
      T* drw_b = need_rw ? drw_part.data() + bh * w * e : nullptr;
      T* drc_b = need_rc ? drc_part.data() + bh * Nc * e : nullptr;
      if (du_b) std::fill(du_b, du_b + e, T(0));
      if (dv_b) std::fill(dv_b, dv_b + e, T(0));
      if (drw_b) std::fill(drw_b, drw_b + w * e, T(0));
      if (drc_b) std::fill(drc_b, drc_b + Nc * e, T(0));
      const T* kw = x.kw.at(b, head);
      const T* kc = x.kc.at(b, head);
      const T* rw = x.rw.at(0, head);
      const T* rc = x.rc.at(0, head);
      transpose_rows<T>(s.kwT.data(), x.ldw, kw, x.kw.sl, w + M, e);
      transpose_rows<T>(s.vwT.data(), x.ldw, x.vw.at(b, head), x.vw.sl, w + M, e);
      transpose_rows<T>(s.kcT.data(), x.ldc, kc, x.kc.sl, Nc, e);
      transpose_rows<T>(s.vcT.data(), x.ldc, x.vc.at(b, head), x.vc.sl, Nc, e);
      for (int64_t index = 0; index < tiles; ++index) {
        const Tile tl = tile_of(x, index);
        const int64_t Lt = tl.Lt, nk = tl.nk, nv = tl.nv, row0 = tl.t0 + 1;
        const T* q = x.q.at(b, head) + tl.t0 * x.q.sl;
        const T* go = dout.at(b, head) + tl.t0 * dout.sl;
        const T* o = out.at(b, head) + tl.t0 * out.sl;
        for (int64_t i = 0; i < Lt; ++i) {
          nvis[i] = x.nvis(tl.t0 + i);
          T acc = 0;
          for (int64_t f = 0; f < e; ++f) acc += go[i * dout.sl + f] * o[i * out.sl + f];
          s.delta[size_t(i)] = acc;
        }
        tile_logits(x, s, tables, b, head, tl);
        gemm<T>(false, false, Lt, tl.nkp, e, T(1), go, dout.sl, s.vwT.data() + row0, x.ldw, T(0), s.dpw.data(), tl.nkp);
        if (nv > 0) gemm<T>(false, false, Lt, tl.nvp, e, T(1), go, dout.sl, s.vcT.data(), x.ldc, T(0), s.dpc.data(), tl.nvp);
        backward_rows<T>(s.sc.data(), s.pc.data(), s.dpc.data(), s.sw.data(), s.pw.data(), s.dpw.data(), s.row.data(),
                         lse + bh * M + tl.t0, s.delta.data(), Lt, nk, tl.nkp, nv, tl.nvp, w, x.ldr, nvis);
        // Query side: dq̂ = A + Bm + dSc·K̄ + dSc_rev·rc, with A = dSw_tile·Kw_rows (→ du) and
        // Bm = dSw·rw (→ dv).
        if (window_dq) {
          gemm<T>(false, false, Lt, e, nk, T(1), s.dpw.data(), tl.nkp, kw + row0 * x.kw.sl, x.kw.sl, T(0), s.a.data(), e);
          gemm<T>(false, false, Lt, e, w, T(1), s.pw.data(), x.ldr, rw, x.rw.sl, T(0), s.bm.data(), e);
          for (int64_t i = 0; i < Lt; ++i)
            for (int64_t f = 0; f < e; ++f) {
              if (du_b) du_b[f] += s.a[size_t(i * e + f)];
              if (dv_b) dv_b[f] += s.bm[size_t(i * e + f)];
            }
        }
        if (dq.p) {  // dq = q_scale·dq̂
          T* dqt = dq.at(b, head) + tl.t0 * dq.sl;
          for (int64_t i = 0; i < Lt; ++i)
            for (int64_t f = 0; f < e; ++f)
              dqt[i * dq.sl + f] = x.q_scale * (s.a[size_t(i * e + f)] + s.bm[size_t(i * e + f)]);
          if (nv > 0) {
            gemm<T>(false, false, Lt, e, nv, x.q_scale, s.dpc.data(), tl.nvp, kc, x.kc.sl, T(1), dqt, dq.sl);
            gemm<T>(false, false, Lt, e, nv, x.q_scale, s.pc.data(), tl.nvp, rc, x.rc.sl, T(1), dqt, dq.sl);
          }
        }
        // Key side, accumulated tile after tile (this task owns the rows).
        if (dkw.p)
          gemm<T>(true, false, nk, e, Lt, T(1), s.dpw.data(), tl.nkp, s.qu.data(), e, T(1),
                  dkw.at(b, head) + row0 * dkw.sl, dkw.sl);
        if (dvw.p)
          gemm<T>(true, false, nk, e, Lt, T(1), s.sw.data(), tl.nkp, go, dout.sl, T(1), dvw.at(b, head) + row0 * dvw.sl,
                  dvw.sl);
        if (drw_b) gemm<T>(true, false, w, e, Lt, T(1), s.pw.data(), x.ldr, s.qv.data(), e, T(1), drw_b, e);
        if (nv > 0) {
          if (dkc.p) gemm<T>(true, false, nv, e, Lt, x.q_scale, s.dpc.data(), tl.nvp, q, x.q.sl, T(1), dkc.at(b, head), dkc.sl);
          if (dvc.p) gemm<T>(true, false, nv, e, Lt, T(1), s.sc.data(), tl.nvp, go, dout.sl, T(1), dvc.at(b, head), dvc.sl);
          if (drc_b) gemm<T>(true, false, nv, e, Lt, x.q_scale, s.pc.data(), tl.nvp, q, x.q.sl, T(1), drc_b, e);
        }
      }
    });
  }
  errors.rethrow();
  // Per-head gradients: the batch's partials in batch order.
  auto reduce = [&](const Tensor& target, const CpuScratch<T>& part, int64_t rows) {
    if (!target.defined()) return;
    const Rows<T> dst(target);
    for (int64_t head = 0; head < H; ++head)
      for (int64_t k = 0; k < rows; ++k)
        for (int64_t f = 0; f < e; ++f) {
          T acc = 0;
          for (int64_t b = 0; b < B; ++b) acc += part.data()[((b * H + head) * rows + k) * e + f];
          dst.at(0, head)[k * dst.sl + f] = acc;
        }
  };
  reduce(d.u, du_part, 1);
  reduce(d.v, dv_part, 1);
  reduce(d.rw, drw_part, w);
  reduce(d.rc, drc_part, Nc);
}

void forward(const Tensor& out, const Tensor& lse, const CausalLongShortInputs& in, const CausalLongShortGeometry& g) {
  dispatch_float(in.q.dtype(), "causal_long_short_attention", [&]<typename T>() { forward_typed<T>(out, lse, in, g); });
}

void backward(const CausalLongShortInputs& grads, const Tensor& dout, const Tensor& out, const Tensor& lse,
              const CausalLongShortInputs& in, const CausalLongShortGeometry& g) {
  dispatch_float(in.q.dtype(), "causal_long_short_attention backward",
                 [&]<typename T>() { backward_typed<T>(grads, dout, out, lse, in, g); });
}

}  // namespace

LSF_REGISTER_KERNEL(causal_long_short_forward_kernel, DeviceType::CPU, forward);
LSF_REGISTER_KERNEL(causal_long_short_backward_kernel, DeviceType::CPU, backward);

}  // namespace lsf::cpu
