// CPU kernels of the fused bidirectional long-short attention (see ops/long_short.h).
//
// Layout. q, k, v, out, dout, dq, dk, dv are read and written through their strides (the feature
// axis contiguous, ops/cpu/strided_rows.h); K̄, V̄, their gradients, lse and the mask are contiguous.
//
// Work split. Queries are cut into blocks of L tokens (whole segments of w, L ≥ 2·ext); a task
// is one (batch·head, block), and a thread runs one block's tasks for every head (Task below).
// All queries of a block read the keys of one band [c·L − ext, c·L + L + ext) plus the R global
// slots, so the task's keys stay in cache while each query's R + s logits are formed in a small
// per-thread buffer. Nothing of size n × (R + s) is stored: forward keeps the row's
// log-sum-exp, backward recomputes the logits.
//
// Determinism without atomics (backward). A task accumulates dK/dV of its band sequentially in
// a per-thread band buffer. Band rows only this block can touch (the "interior"
// [c·L + ext, c·L + Lc − ext)) go straight to dK/dV; the ≤ 4·ext edge rows go to a per-block
// edge workspace, and a second pass sums, for every key outside all interiors, the edge rows of
// the (at most three) blocks covering it, in block order. dK̄/dV̄ partials are kept per block and
// summed in block order too. The result is independent of the thread count.
//
// Dropout. Slot i of row (bh, t) uses Philox word (bh·n + t)·S + i (S = R + s) of the reserved
// range, exactly as lsf::dropout numbers the elements of a contiguous [B, h, n, S] tensor.
//
// Prefetch: a segment's new key and value rows and the next segment's query (and dout) rows
// come from memory (the layer's K, V, Q are megabytes), so each is requested one segment ahead;
// without it the transposes and tile products waited on those loads (the LRA layer ran 3.7%
// slower on a Zen 4 EPYC; bench/RESULTS.md).
//
// Vectorisation: logit tiles are formed against transposed key tiles [e × slots] with the
// accumulators along the slots, and weighted row sums with accumulators along e, both in GCC
// vector-extension registers of the ISA's width inside functions compiled once per level, in
// register blocks of up to 8 rows × 3 vectors (each element still one sum in a fixed order);
// row maxima and sums fold their vector of lanes by halves.
//
// q_scale: each segment's query rows are scaled into scratch as they are read, and its dq rows
// scaled in registers as they are stored: the bits of mul(q, q_scale) before the kernel and
// after its backward.
//
// Numerics: everything accumulates in the tensor's dtype: logits are dot products of length e,
// the softmax sum and the context sums run over S = R + s terms (f32: ≤ (e + S)·2^-24 relative,
// plus ≤ 2 ulp from the vectorised exp). f64 uses libm's exp.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <limits>
#include <utility>
#include <optional>

#include "lsformer/engine/region_errors.h"
#include "lsformer/engine/scratch.h"
#include "lsformer/ops/cpu/rowwise.h"
#include "lsformer/ops/cpu/simd.h"
#include "lsformer/ops/cpu/strided_rows.h"
#include "lsformer/ops/cpu/transpose_panel.h"
#include "lsformer/ops/cpu/vector_kernels.h"
#include "lsformer/ops/long_short.h"
#include "lsformer/ops/kernels/long_short.h"

namespace lsf::cpu {
namespace {

struct Dims {
  int64_t B, h, n, e, R, s, ext, seg, L, nblocks;
  int64_t S() const { return R + s; }
  int64_t rows(int64_t c) const { return std::min(L, n - c * L); }  // Lc: queries of block c
};

Dims dims_of(const Tensor& q, const Tensor& kbar, const LongShortGeometry& geo) {
  Dims d{};
  d.B = q.size(0);
  d.h = q.size(1);
  d.n = q.size(2);
  d.e = q.size(3);
  d.R = kbar.size(2);
  d.s = geo.span();
  d.ext = geo.ext();
  d.seg = geo.seg();
  // By default 4·R queries per task, within [64, 256]: enough to amortise loading the R global
  // slots and to keep backward's per-block dK̄/dV̄ partials (n/L · R · e) at ≤ n·e/4 for R ≤ 64,
  // small enough for many tasks. Independent of the thread count, so results are too.
  const int64_t automatic = std::clamp<int64_t>(4 * d.R, 64, 256);
  int64_t want = std::max<int64_t>(geo.block > 0 ? geo.block : automatic, 2 * d.ext);
  d.L = (want + d.seg - 1) / d.seg * d.seg;
  d.nblocks = d.n > 0 ? (d.n + d.L - 1) / d.L : 0;
  return d;
}

// A task: query block c of (batch b, head). One thread runs the tasks of a block (b, c) for
// every head back to back: with token-major operands the heads of a token lie side by side,
// and the prefetcher brings the other heads' rows in with a task's own (one task per thread
// over (b, head, c) made the strided kernels 15-25% slower on 1 and 2 threads). `index` =
// bh·nblocks + c numbers the per-task partials; which thread runs a task changes no result.
struct Task {
  int64_t b, c, head, bh, index;
};
inline Task task_of(int64_t block, int64_t head, const Dims& d) {
  const int64_t b = block / d.nblocks, c = block % d.nblocks, bh = b * d.h + head;
  return {b, c, head, bh, bh * d.nblocks + c};
}

template <typename T>
LSF_VECTOR_INLINE void axpy(T* y, T a, const T* x, int64_t e) {
#pragma omp simd
  for (int64_t i = 0; i < e; ++i) y[i] += a * x[i];
}

// Per-slot dropout factor (scale or 0) of one row; base = index of the row's first slot.
template <typename T>
void dropout_factors(T* f, int64_t S, uint64_t base, const LongShortDropout& drop) {
  const T scale = T(drop.scale);
  if (drop.threshold == 0) {
    std::fill(f, f + S, scale);
    return;
  }
  PhiloxCounter words{};
  for (int64_t i = 0; i < S; ++i) {
    const uint64_t idx = base + uint64_t(i);
    if (i == 0 || idx % 4 == 0) words = philox_block(drop.state.seed, drop.state.offset + idx / 4);
    f[i] = (words[idx % 4] >> 8) >= drop.threshold ? scale : T(0);
  }
}

// One thread's scratch: transposed key/value tiles kt, vt [e × ld] whose columns are the slots
// [global R | window s | zero padding up to ld, a multiple of the vector width]; the window
// slots' validity; [seg × ld] tiles of logits, value products, dropped probabilities and
// dropout factors; each slot's key and value row (a zero row when masked); a segment's query
// rows times q_scale [seg × e].
template <typename T>
struct Scratch {
  int64_t ld;
  ScratchVector<T> kt, vt, lg, dp, pd, f, zero, qs;
  ScratchVector<uint8_t> valid;
  ScratchVector<const T*> krow, vrow;
  explicit Scratch(const Dims& d)
      : ld((d.S() + Simd<T>::W - 1) / Simd<T>::W * Simd<T>::W), kt(size_t(d.e * ld), T(0)), vt(kt.size(), T(0)),
        lg(size_t(d.seg * ld)), dp(lg.size()), pd(lg.size()), f(lg.size()), zero(size_t(d.e), T(0)),
        qs(size_t(d.seg * d.e)), valid(size_t(d.s)), krow(size_t(d.S())), vrow(krow.size()) {}
};

// Backward's per-thread scratch: the tiles above and the band's dK/dV rows [band × e], summed
// over a task's segments before they go to dk/dv or the edge workspace.
template <typename T>
struct BackwardScratch {
  Scratch<T> tiles;
  ScratchVector<T> band_k, band_v;
  BackwardScratch(const Dims& d, int64_t band_elements)
      : tiles(d), band_k(size_t(band_elements), T(0)), band_v(band_k.size(), T(0)) {}
};

// The seg query rows from q (row stride lq) times scale into the scratch, as mul(q, scale)
// rounds them; returns where the kernel reads the segment's queries from, and sets lq to their
// row stride. scale = 1: q itself.
template <typename T>
const T* scaled_queries(Scratch<T>& sc, const T* q, int64_t& lq, T scale, int64_t seg, int64_t e) {
  if (scale == T(1)) return q;
  for (int64_t r = 0; r < seg; ++r)
#pragma omp simd
    for (int64_t f = 0; f < e; ++f) sc.qs[size_t(r * e + f)] = q[r * lq + f] * scale;
  lq = e;
  return sc.qs.data();
}

// Columns [c0, c0 + m) of dst [e × ld] = rows [m × e] transposed (ops/cpu/transpose_panel.h),
// compiled per vector level.
template <typename T, int Bytes>
LSF_VECTOR_INLINE void transpose_into_body(T* dst, int64_t ld, int64_t c0, const T* const* rows, int64_t m, int64_t e) {
  transpose_panel_body<T, Bytes>(dst + c0, ld, [rows](int64_t i) LSF_VECTOR_LAMBDA { return rows[i]; }, m, e);
}
LSF_PER_VECTOR_LEVEL(transpose_into)

// Register blocks of the three products below: RB rows × CV vectors of accumulators, each
// element one FMA chain over its terms in their natural order (so the blocking does not change
// a single bit, and results stay independent of the ISA level's blocking within a level). The
// sizes fill the register file: AVX-512 (32 registers) 8 × 3 accumulators + 3 loaded vectors;
// AVX2 and SSE2 (16 registers) 4 × 3 + 3 and 4 × 2 + 2. Eight independent chains per loaded
// vector keep both FMA ports busy; the earlier four-row blocks were latency-bound.
template <int Bytes>
inline constexpr int kBlockRows = Bytes == 64 ? 8 : 4;
template <int Bytes>
inline constexpr int kBlockVectors = Bytes == 16 ? 2 : 3;

// acc[r][j] += Σ_k scalar(r, k) · vectors(k)[j·W …] for k = 0 … steps − 1 in order: the one
// micro-kernel of the three products (each passes how it finds row r's scalar and the vectors
// of step k).
template <typename T, int Bytes, int RB, int CV, typename Scalar, typename Vectors>
LSF_VECTOR_INLINE void fma_block(typename Simd<T, Bytes>::V (&acc)[RB][CV], int64_t steps, Scalar scalar,
                                 Vectors vectors) {
  using S = Simd<T, Bytes>;
  for (int64_t k = 0; k < steps; ++k) {
    typename S::V x[CV];
    const T* row = vectors(k);
#pragma GCC unroll 4
    for (int j = 0; j < CV; ++j) x[j] = S::load(row + j * S::W);
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r) {
      const T p = scalar(r, k);
#pragma GCC unroll 4
      for (int j = 0; j < CV; ++j) acc[r][j] += p * x[j];
    }
  }
}

// Calls block.template operator()<CV>(offset) over [0, n) in blocks of 3 (or 2), then 2, then 1
// vectors; returns where the whole vectors end (the caller finishes the scalar tail).
template <typename T, int Bytes, typename Block>
LSF_VECTOR_INLINE int64_t vector_blocks(int64_t n, Block&& block) {
  constexpr int CV = kBlockVectors<Bytes>;
  constexpr int64_t W = Simd<T, Bytes>::W;
  int64_t c = 0;
  for (; c + CV * W <= n; c += CV * W) block.template operator()<CV>(c);
  if (CV > 2 && c + 2 * W <= n) block.template operator()<2>(c), c += 2 * W;
  for (; c + W <= n; c += W) block.template operator()<1>(c);
  return c;
}

template <typename T, int Bytes, int RB, int CV>
LSF_VECTOR_INLINE void store_block(T* out, int64_t ld, const typename Simd<T, Bytes>::V (&acc)[RB][CV]) {
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < CV; ++j) Simd<T, Bytes>::store(out + r * ld + j * Simd<T, Bytes>::W, acc[r][j]);
}

// out [nq × ld] = a [nq × e] (row stride lda) · bt [e × ld]: the logits (a = queries, bt =
// keysᵀ) or the value products (a = dout, bt = valuesᵀ) of one segment; ld is a multiple of the
// vector width.
template <typename T, int Bytes, int RB>
LSF_VECTOR_INLINE void products_rows(T* out, const T* a, int64_t lda, const T* bt, int64_t e, int64_t ld) {
  vector_blocks<T, Bytes>(ld, [&]<int CV>(int64_t c0) LSF_VECTOR_LAMBDA {
    typename Simd<T, Bytes>::V acc[RB][CV] = {};
    fma_block<T, Bytes, RB, CV>(
        acc, e, [&](int r, int64_t f) LSF_VECTOR_LAMBDA { return a[r * lda + f]; }, [&](int64_t f) LSF_VECTOR_LAMBDA { return bt + f * ld + c0; });
    store_block<T, Bytes, RB, CV>(out + c0, ld, acc);
  });
}

template <typename T, int Bytes>
LSF_VECTOR_INLINE void tile_products(T* out, const T* a, int64_t lda, const T* bt, int64_t nq, int64_t e, int64_t ld) {
  constexpr int RB = kBlockRows<Bytes>;
  int64_t qi = 0;
  for (; qi + RB <= nq; qi += RB) products_rows<T, Bytes, RB>(out + qi * ld, a + qi * lda, lda, bt, e, ld);
  for (; qi < nq; ++qi) products_rows<T, Bytes, 1>(out + qi * ld, a + qi * lda, lda, bt, e, ld);
}

// out [nq × e] (row stride ldo) = scale · (w [nq × ld] · rows) (m rows of e; overwrites): the
// probability-weighted row sums of a segment's queries. Block: RB queries × CV feature vectors,
// the sum over i in order, then one multiplication by scale (skipped for 1): the bits of scaling
// the stored rows afterwards (the backward's dq by q_scale) without a second pass over them.
template <typename T, int Bytes, int RB>
LSF_VECTOR_INLINE void combine_query_rows(T* out, int64_t ldo, const T* w, int64_t ld, const T* const* rows, int64_t m,
                                          int64_t e, T scale) {
  const int64_t f = vector_blocks<T, Bytes>(e, [&]<int CV>(int64_t f0) LSF_VECTOR_LAMBDA {
    typename Simd<T, Bytes>::V acc[RB][CV] = {};
    fma_block<T, Bytes, RB, CV>(
        acc, m, [&](int r, int64_t i) LSF_VECTOR_LAMBDA { return w[r * ld + i]; }, [&](int64_t i) LSF_VECTOR_LAMBDA { return rows[i] + f0; });
    if (scale != T(1))
#pragma GCC unroll 8
      for (int r = 0; r < RB; ++r)
#pragma GCC unroll 4
        for (int j = 0; j < CV; ++j) acc[r][j] *= scale;
    store_block<T, Bytes, RB, CV>(out + f0, ldo, acc);
  });
  for (int64_t g = f; g < e; ++g)  // features past the last whole vector
    for (int64_t r = 0; r < RB; ++r) {
      T acc = 0;
      for (int64_t i = 0; i < m; ++i) acc += w[r * ld + i] * rows[i][g];
      out[r * ldo + g] = scale != T(1) ? acc * scale : acc;
    }
}

template <typename T, int Bytes>
LSF_VECTOR_INLINE void combine_rows(T* out, int64_t ldo, int64_t nq, const T* w, int64_t ld, const T* const* rows,
                                    int64_t m, int64_t e, T scale = T(1)) {
  constexpr int RB = kBlockRows<Bytes>;
  int64_t qi = 0;
  for (; qi + RB <= nq; qi += RB)
    combine_query_rows<T, Bytes, RB>(out + qi * ldo, ldo, w + qi * ld, ld, rows, m, e, scale);
  for (; qi < nq; ++qi) combine_query_rows<T, Bytes, 1>(out + qi * ldo, ldo, w + qi * ld, ld, rows, m, e, scale);
}

// dst [m × e] += Σ_qi w[qi·ld + i]·a_qi over the nq rows (row stride lda) of a segment
// (accumulates). Block: RB destination rows × CV feature vectors, each element adding its terms
// in qi order onto dst.
template <typename T, int Bytes, int RB>
LSF_VECTOR_INLINE void outer_rows(T* dst, const T* w, int64_t ld, const T* a, int64_t lda, int64_t nq, int64_t e) {
  using S = Simd<T, Bytes>;
  const int64_t f = vector_blocks<T, Bytes>(e, [&]<int CV>(int64_t f0) LSF_VECTOR_LAMBDA {
    typename S::V acc[RB][CV];
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < CV; ++j) acc[r][j] = S::load(dst + r * e + f0 + j * S::W);
    fma_block<T, Bytes, RB, CV>(
        acc, nq, [&](int r, int64_t qi) LSF_VECTOR_LAMBDA { return w[qi * ld + r]; }, [&](int64_t qi) LSF_VECTOR_LAMBDA { return a + qi * lda + f0; });
    store_block<T, Bytes, RB, CV>(dst + f0, e, acc);
  });
  for (int64_t g = f; g < e; ++g)  // features past the last whole vector
    for (int64_t r = 0; r < RB; ++r) {
      T acc = dst[r * e + g];
      for (int64_t qi = 0; qi < nq; ++qi) acc += w[qi * ld + r] * a[qi * lda + g];
      dst[r * e + g] = acc;
    }
}

template <typename T, int Bytes>
LSF_VECTOR_INLINE void accumulate_outer(T* dst, const T* w, int64_t ld, const T* a, int64_t lda, int64_t nq, int64_t m,
                                        int64_t e) {
  constexpr int RB = kBlockRows<Bytes>;
  int64_t i = 0;
  for (; i + RB <= m; i += RB) outer_rows<T, Bytes, RB>(dst + i * e, w + i, ld, a, lda, nq, e);
  for (; i < m; ++i) outer_rows<T, Bytes, 1>(dst + i * e, w + i, ld, a, lda, nq, e);
}

// Asks for m rows of e features (row stride sl) to be brought into the cache: rows a later
// segment reads, requested one segment ahead, so their loads overlap this segment's products.
template <typename T>
inline void prefetch_rows(const T* rows, int64_t sl, int64_t m, int64_t e) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t f = 0; f < e; f += 64 / int64_t(sizeof(T))) __builtin_prefetch(rows + i * sl + f);
}

// The window slots of the segment starting at query t0: validity, rows, transposed columns.
// slide: the scratch holds the previous segment's window (t0 − seg): its last s − seg slots are
// this window's first ones, so they are shifted down instead of transposed again (half of the
// transposing for w = 8, whose span is 2·w).
template <typename T>
void load_window(Scratch<T>& sc, const T* kh, int64_t ksn, const T* vh, int64_t vsn, const uint8_t* mb, int64_t t0,
                 const Dims& d, bool values, bool slide) {
  const int64_t start = t0 / d.seg * d.seg - d.ext;
  int64_t u0 = 0;  // first slot to load
  if (slide && d.s > d.seg) {
    const int64_t keep = d.s - d.seg;
    for (int64_t u = 0; u < keep; ++u) {
      sc.valid[size_t(u)] = sc.valid[size_t(u + d.seg)];
      sc.krow[size_t(d.R + u)] = sc.krow[size_t(d.R + u + d.seg)];
      sc.vrow[size_t(d.R + u)] = sc.vrow[size_t(d.R + u + d.seg)];
    }
    for (int64_t f = 0; f < d.e; ++f) {
      T* kr = sc.kt.data() + f * sc.ld + d.R;
      std::copy(kr + d.seg, kr + d.seg + keep, kr);  // overlapping when keep > seg: copying down is safe
      if (values) {
        T* vr = sc.vt.data() + f * sc.ld + d.R;
        std::copy(vr + d.seg, vr + d.seg + keep, vr);
      }
    }
    u0 = keep;
  }
  for (int64_t u = u0; u < d.s; ++u) {
    const int64_t j = start + u;
    const bool ok = j >= 0 && j < d.n && mb[j] != 0;
    sc.valid[size_t(u)] = ok;
    sc.krow[size_t(d.R + u)] = ok ? kh + j * ksn : sc.zero.data();
    sc.vrow[size_t(d.R + u)] = ok ? vh + j * vsn : sc.zero.data();
  }
  // The next segment's new key (and value) rows are requested now, so that they arrive while this
  // segment's tiles are computed: the rows come from memory, and their loads were most of the
  // transposing time.
  const int64_t j0 = std::max<int64_t>(start + d.s, 0), j1 = std::min(start + d.s + d.seg, d.n);
  if (j1 > j0) {
    prefetch_rows(kh + j0 * ksn, ksn, j1 - j0, d.e);
    if (values) prefetch_rows(vh + j0 * vsn, vsn, j1 - j0, d.e);
  }
  transpose_into<T>(sc.kt.data(), sc.ld, d.R + u0, sc.krow.data() + d.R + u0, d.s - u0, d.e);
  if (values) transpose_into<T>(sc.vt.data(), sc.ld, d.R + u0, sc.vrow.data() + d.R + u0, d.s - u0, d.e);
}

// Whether the seg queries from t0 are all padding (mask 0): such a segment's rows are zero and
// it contributes to no gradient, so the kernels skip it (LRA batches are often 40% padding).
inline bool all_padded(const uint8_t* mb, int64_t t0, int64_t seg) {
  for (int64_t i = 0; i < seg; ++i)
    if (mb[t0 + i] != 0) return false;
  return true;
}

// The global slots of one (batch, head): rows and transposed columns (once per task).
template <typename T>
void load_global(Scratch<T>& sc, const T* kb, const T* vb, const Dims& d, bool values) {
  for (int64_t i = 0; i < d.R; ++i) {
    sc.krow[size_t(i)] = kb + i * d.e;
    sc.vrow[size_t(i)] = vb + i * d.e;
  }
  transpose_into<T>(sc.kt.data(), sc.ld, 0, sc.krow.data(), d.R, d.e);
  if (values) transpose_into<T>(sc.vt.data(), sc.ld, 0, sc.vrow.data(), d.R, d.e);
}

// Softmax of one logit row in place (invalid window slots → 0); returns the log-sum-exp.
template <typename T, int Bytes>
LSF_VECTOR_INLINE T softmax_row(T* lg, const uint8_t* valid, int64_t R, int64_t s) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  for (int64_t u = 0; u < s; ++u)
    if (valid[u] == 0) lg[R + u] = kNegInf;
  const int64_t S = R + s;
  const T mx = vector_max<T, Bytes>(lg, S);
  if (mx == kNegInf) {  // no visible key: a zero row
    std::fill(lg, lg + S, T(0));
    return std::numeric_limits<T>::infinity();
  }
#pragma omp simd
  for (int64_t i = 0; i < S; ++i) lg[i] = vexp(T(lg[i] - mx));  // exp(−∞) = 0
  const T sum = vector_sum<T, Bytes>(lg, S);
  const T inv = T(1) / sum;
#pragma omp simd
  for (int64_t i = 0; i < S; ++i) lg[i] *= inv;
  return mx + std::log(sum);
}

// Softmax and context of the d.seg queries starting at t0 (one segment: one window tile).
// qs, os [seg × e] query and output rows (row strides lq, lo); lses [seg]; drop_base: dropout
// index of slot 0 of the first row. Compiled per ISA (the helpers inline into each clone).
template <typename T, int Bytes>
LSF_VECTOR_INLINE void forward_segment_body(const Dims& d, Scratch<T>& sc, const T* qs, int64_t lq, const uint8_t* mb,
                                            T* os, int64_t lo, T* lses, int64_t t0, uint64_t drop_base,
                                            const LongShortDropout& drop) {
  const int64_t S = d.S(), e = d.e;
  tile_products<T, Bytes>(sc.lg.data(), qs, lq, sc.kt.data(), d.seg, e, sc.ld);
  for (int64_t qi = 0; qi < d.seg; ++qi) {
    T* p = sc.lg.data() + qi * sc.ld;
    lses[qi] = std::numeric_limits<T>::infinity();  // padded query: every p is 0
    if (mb[t0 + qi] == 0) {
      std::fill(p, p + S, T(0));
      continue;
    }
    const T l = softmax_row<T, Bytes>(p, sc.valid.data(), d.R, d.s);  // a row without visible key stays 0
    lses[qi] = l;
    if (l != std::numeric_limits<T>::infinity() && (drop.threshold != 0 || drop.scale != 1.0)) {
      dropout_factors(sc.f.data(), S, drop_base + uint64_t(qi * S), drop);
      for (int64_t i = 0; i < S; ++i) p[i] *= sc.f[size_t(i)];
    }
  }
  combine_rows<T, Bytes>(os, lo, d.seg, sc.lg.data(), sc.ld, sc.vrow.data(), S, e);
}

// Gradients of the d.seg queries starting at t0: dq rows times dq_scale (overwritten, when
// dqs), dK̄/dV̄ partials pk, pv [R × e] and the window band rows bk, bv [s × e] starting at key
// t0 − ext (accumulated). qs, gs, dqs [seg × e] query, dout and dq rows (row strides lq, lg, ldq);
// lses [seg].
template <typename T, int Bytes>
LSF_VECTOR_INLINE void backward_segment_body(const Dims& d, Scratch<T>& sc, const T* qs, int64_t lq, const T* gs,
                                             int64_t lg, const uint8_t* mb, const T* lses, int64_t t0,
                                             uint64_t drop_base, const LongShortDropout& drop, T* dqs, int64_t ldq,
                                             T dq_scale, T* pk, T* pv, T* bk, T* bv) {
  const int64_t S = d.S(), e = d.e;
  const bool dropout = drop.threshold != 0 || drop.scale != 1.0;
  tile_products<T, Bytes>(sc.lg.data(), qs, lq, sc.kt.data(), d.seg, e, sc.ld);  // logits
  tile_products<T, Bytes>(sc.dp.data(), gs, lg, sc.vt.data(), d.seg, e, sc.ld);  // dout·v
  // Per row: p_i = exp(l_i − lse), f_i the dropout factor, dp_i = f_i·(dout·v_i),
  // D = Σ p_i·dp_i; then dlogit_i = p_i·(dp_i − D) (into lg) and pd_i = p_i·f_i (into pd).
  for (int64_t qi = 0; qi < d.seg; ++qi) {
    T* g = sc.lg.data() + qi * sc.ld;
    T* dpr = sc.dp.data() + qi * sc.ld;
    T* pdr = sc.pd.data() + qi * sc.ld;
    const T l = lses[qi];
    if (mb[t0 + qi] == 0 || l == std::numeric_limits<T>::infinity()) {  // zero row, zero gradients
      std::fill(g, g + S, T(0));
      std::fill(pdr, pdr + S, T(0));
      continue;
    }
    for (int64_t u = 0; u < d.s; ++u)
      if (sc.valid[size_t(u)] == 0) g[d.R + u] = -std::numeric_limits<T>::infinity();
    if (dropout) {
      T* fr = sc.f.data() + qi * sc.ld;
      dropout_factors(fr, S, drop_base + uint64_t(qi * S), drop);
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) {
        dpr[i] *= fr[i];
        g[i] = vexp(T(g[i] - l));
        pdr[i] = g[i] * fr[i];
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) g[i] = pdr[i] = vexp(T(g[i] - l));
    }
    const T D = vector_dot<T, Bytes>(g, dpr, S);
#pragma omp simd
    for (int64_t i = 0; i < S; ++i) g[i] *= dpr[i] - D;
  }
  if (dqs != nullptr)
    combine_rows<T, Bytes>(dqs, ldq, d.seg, sc.lg.data(), sc.ld, sc.krow.data(), S, e, dq_scale);
  if (pk != nullptr) {
    accumulate_outer<T, Bytes>(pk, sc.lg.data(), sc.ld, qs, lq, d.seg, d.R, e);
    accumulate_outer<T, Bytes>(pv, sc.pd.data(), sc.ld, gs, lg, d.seg, d.R, e);
  }
  if (bk != nullptr) {
    accumulate_outer<T, Bytes>(bk, sc.lg.data() + d.R, sc.ld, qs, lq, d.seg, d.s, e);
    accumulate_outer<T, Bytes>(bv, sc.pd.data() + d.R, sc.ld, gs, lg, d.seg, d.s, e);
  }
}

// The segment bodies above compiled once per x86-64 level (ops/cpu/vector_kernels.h).
LSF_PER_VECTOR_LEVEL(forward_segment)
LSF_PER_VECTOR_LEVEL(backward_segment)

template <typename T>
void forward_impl(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& kbar, const Tensor& vbar, const Tensor& mask, const LongShortGeometry& geo,
                  const LongShortDropout& drop) {
  const Dims d = dims_of(q, kbar, geo);
  const int64_t S = d.S(), e = d.e, blocks = d.B * d.nblocks;
  const Rows<const T> Q(q), K(k), V(v);
  const Rows<T> O(out);
  const T* KB = kbar.data_ptr<T>();
  const T* VB = vbar.data_ptr<T>();
  const uint8_t* M = mask.data_ptr<uint8_t>();
  T* LSE = lse.data_ptr<T>();
  const T q_scale = T(geo.q_scale);
  const bool parallel = d.B * d.h * d.n * S * std::max<int64_t>(e, 1) >= kParallelGrain;
  RegionErrors errors;  // the scratch is made inside the region (one per thread)
#pragma omp parallel if (parallel)
  {
    std::optional<Scratch<T>> scratch;
    errors.run([&] { scratch.emplace(d); });
    // Dynamic: blocks of padding cost nothing, so equal counts of blocks are unequal work. Each
    // task writes its own rows, so the result does not depend on which thread ran it.
#pragma omp for schedule(dynamic)
    for (int64_t block = 0; block < blocks; ++block)
    for (int64_t h_ = 0; h_ < d.h; ++h_) errors.run([&] {
      Scratch<T>& sc = *scratch;
      const Task t = task_of(block, h_, d);
      const int64_t bh = t.bh, c = t.c, b = t.b, head = t.head;
      const T* kb = KB + bh * d.R * e;
      const T* vb = VB + bh * d.R * e;
      const T* qh = Q.at(b, head);
      T* oh = O.at(b, head);
      const uint8_t* mb = M + b * d.n;
      load_global(sc, kb, vb, d, false);
      bool slide = false;  // the window scratch holds the previous segment's keys
      for (int64_t t0 = c * d.L; t0 < c * d.L + d.rows(c); t0 += d.seg) {
        if (all_padded(mb, t0, d.seg)) {  // only padded queries: zero rows, nothing to compute
          for (int64_t t = t0; t < t0 + d.seg; ++t) std::fill(oh + t * O.sl, oh + t * O.sl + e, T(0));
          std::fill(LSE + bh * d.n + t0, LSE + bh * d.n + t0 + d.seg, std::numeric_limits<T>::infinity());
          slide = false;
          continue;
        }
        load_window(sc, K.at(b, head), K.sl, V.at(b, head), V.sl, mb, t0, d, false, slide);
        slide = true;
        if (t0 + d.seg < d.n) prefetch_rows(qh + (t0 + d.seg) * Q.sl, Q.sl, d.seg, e);
        int64_t lq = Q.sl;
        const T* qs = scaled_queries(sc, qh + t0 * Q.sl, lq, q_scale, d.seg, e);
        forward_segment<T>(d, sc, qs, lq, mb, oh + t0 * O.sl, O.sl, LSE + bh * d.n + t0, t0,
                           uint64_t((bh * d.n + t0) * S), drop);
      }
    });
  }
  errors.rethrow();
}

template <typename T>
void backward_impl(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dkbar, const Tensor& dvbar,
                   const Tensor& dout, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& kbar, const Tensor& vbar, const Tensor& mask, const LongShortGeometry& geo,
                   const LongShortDropout& drop) {
  const Dims d = dims_of(q, kbar, geo);
  const int64_t S = d.S(), e = d.e, BH = d.B * d.h, nb = d.nblocks, tasks = BH * nb, blocks = d.B * nb;
  const int64_t ext2 = 2 * d.ext, band = d.L + ext2;
  const bool want_q = dq.defined(), want_kv = dk.defined() || dv.defined();
  const bool want_bar = dkbar.defined() || dvbar.defined();
  const Rows<const T> Q(q), K(k), V(v), DO(dout);
  const T* KB = kbar.data_ptr<T>();
  const T* VB = vbar.data_ptr<T>();
  const T* LSE = lse.data_ptr<T>();
  const uint8_t* M = mask.data_ptr<uint8_t>();
  const Rows<T> DQ(dq);
  // Window gradients go to dk/dv when asked for, else to scratch that is dropped.
  ScratchVector<T> scratch_k, scratch_v;
  Rows<T> DK(dk), DV(dv);
  if (want_kv && DK.p == nullptr) scratch_k.assign(size_t(BH * d.n * e), T(0)), DK = Rows<T>::contiguous(scratch_k.data(), d.h, d.n, e);
  if (want_kv && DV.p == nullptr) scratch_v.assign(size_t(BH * d.n * e), T(0)), DV = Rows<T>::contiguous(scratch_v.data(), d.h, d.n, e);
  // Edge rows of each block's band ([0, 2ext) left, then [Lc, Lc + 2ext) right), and the
  // per-block partial sums of dK̄/dV̄. Megabytes at LRA sizes: from the CPU allocator
  // (engine/scratch.h), so they count in memory_stats() and reuse cached pages call after call.
  ScratchVector<T> edge_k(want_kv ? size_t(tasks * 2 * ext2 * e) : 0), edge_v(edge_k.size());
  ScratchVector<T> bar_k(want_bar ? size_t(tasks * d.R * e) : 0), bar_v(bar_k.size());
  const bool parallel = BH * d.n * S * std::max<int64_t>(e, 1) >= kParallelGrain;
  const T q_scale = T(geo.q_scale);

  RegionErrors errors;  // as in the forward
#pragma omp parallel if (parallel)
  {
    std::optional<BackwardScratch<T>> scratch;
    errors.run([&] { scratch.emplace(d, want_kv ? band * e : 0); });
#pragma omp for schedule(dynamic)  // as in the forward: each task writes its own partials
    for (int64_t block = 0; block < blocks; ++block)
    for (int64_t h_ = 0; h_ < d.h; ++h_) errors.run([&] {
      Scratch<T>& sc = scratch->tiles;
      ScratchVector<T>& band_k = scratch->band_k;
      ScratchVector<T>& band_v = scratch->band_v;
      const Task t = task_of(block, h_, d);
      const int64_t bh = t.bh, c = t.c, b = t.b, head = t.head, task = t.index, Lc = d.rows(c);
      const int64_t band0 = c * d.L - d.ext;  // key index of band row 0
      const T* kb = KB + bh * d.R * e;
      const T* vb = VB + bh * d.R * e;
      const T* qh = Q.at(b, head);
      const T* gh = DO.at(b, head);
      T* dqh = want_q ? DQ.at(b, head) : nullptr;
      const uint8_t* mb = M + b * d.n;
      T* pk = want_bar ? bar_k.data() + task * d.R * e : nullptr;
      T* pv = want_bar ? bar_v.data() + task * d.R * e : nullptr;
      if (want_bar) {
        std::fill(pk, pk + d.R * e, T(0));
        std::fill(pv, pv + d.R * e, T(0));
      }
      if (want_kv) {
        std::fill(band_k.begin(), band_k.begin() + (Lc + ext2) * e, T(0));
        std::fill(band_v.begin(), band_v.begin() + (Lc + ext2) * e, T(0));
      }
      load_global(sc, kb, vb, d, true);
      bool slide = false;
      for (int64_t t0 = c * d.L; t0 < c * d.L + Lc; t0 += d.seg) {
        if (all_padded(mb, t0, d.seg)) {  // padded queries (p = 0) send no gradient anywhere
          if (want_q)
            for (int64_t t = t0; t < t0 + d.seg; ++t) std::fill(dqh + t * DQ.sl, dqh + t * DQ.sl + e, T(0));
          slide = false;
          continue;
        }
        load_window(sc, K.at(b, head), K.sl, V.at(b, head), V.sl, mb, t0, d, true, slide);
        slide = true;
        if (t0 + d.seg < d.n) {
          prefetch_rows(qh + (t0 + d.seg) * Q.sl, Q.sl, d.seg, e);
          prefetch_rows(gh + (t0 + d.seg) * DO.sl, DO.sl, d.seg, e);
        }
        int64_t lq = Q.sl;
        const T* qs = scaled_queries(sc, qh + t0 * Q.sl, lq, q_scale, d.seg, e);
        backward_segment<T>(d, sc, qs, lq, gh + t0 * DO.sl, DO.sl, mb, LSE + bh * d.n + t0, t0,
                            uint64_t((bh * d.n + t0) * S), drop, want_q ? dqh + t0 * DQ.sl : nullptr, DQ.sl,
                            q_scale,  // dq of the unscaled q, as mul's backward rounds it
                            pk, pv,
                            want_kv ? band_k.data() + (t0 - d.ext - band0) * e : nullptr,
                            want_kv ? band_v.data() + (t0 - d.ext - band0) * e : nullptr);
      }
      if (want_kv) {
        // Interior rows belong to this block alone; edge rows are merged in the second pass.
        T* ek = edge_k.data() + task * 2 * ext2 * e;
        T* ev = edge_v.data() + task * 2 * ext2 * e;
        for (int64_t r = 0; r < Lc + ext2; ++r) {
          const int64_t j = band0 + r;
          T *dst_k, *dst_v;
          if (r < ext2) {
            dst_k = ek + r * e, dst_v = ev + r * e;
          } else if (r >= Lc) {
            dst_k = ek + (ext2 + r - Lc) * e, dst_v = ev + (ext2 + r - Lc) * e;
          } else {
            dst_k = DK.at(b, head) + j * DK.sl, dst_v = DV.at(b, head) + j * DV.sl;
          }
          std::copy(band_k.data() + r * e, band_k.data() + (r + 1) * e, dst_k);
          std::copy(band_v.data() + r * e, band_v.data() + (r + 1) * e, dst_v);
        }
      }
    });

    // Second pass: keys outside every interior sum the edge rows of the blocks covering them.
    if (want_kv) {
#pragma omp for schedule(static)
      for (int64_t row = 0; row < BH * d.n; ++row) {
        const int64_t bh = row / d.n, j = row % d.n, home = j / d.L;
        if (j >= home * d.L + ext2 - d.ext && j < home * d.L + d.rows(home) - d.ext) continue;  // interior
        T* dkj = DK.at(bh / d.h, bh % d.h) + j * DK.sl;
        T* dvj = DV.at(bh / d.h, bh % d.h) + j * DV.sl;
        std::fill(dkj, dkj + e, T(0));
        std::fill(dvj, dvj + e, T(0));
        for (int64_t c = std::max<int64_t>(home - 1, 0); c <= std::min(home + 1, nb - 1); ++c) {
          const int64_t r = j - (c * d.L - d.ext), Lc = d.rows(c);
          if (r < 0 || r >= Lc + ext2) continue;
          int64_t slot;
          if (r < ext2) slot = r;
          else if (r >= Lc) slot = ext2 + r - Lc;
          else continue;  // interior of c (only possible for c = home, excluded above)
          const int64_t task = bh * nb + c;
          axpy(dkj, T(1), edge_k.data() + (task * 2 * ext2 + slot) * e, e);
          axpy(dvj, T(1), edge_v.data() + (task * 2 * ext2 + slot) * e, e);
        }
      }
    }
    // dK̄/dV̄: the per-block partials summed in block order.
    if (want_bar) {
#pragma omp for schedule(static)
      for (int64_t row = 0; row < BH * d.R; ++row) {
        const int64_t bh = row / d.R, i = row % d.R;
        const ScratchVector<T>* parts[2] = {&bar_k, &bar_v};
        const Tensor* outs[2] = {&dkbar, &dvbar};
        for (int which = 0; which < 2; ++which) {
          if (!outs[which]->defined()) continue;
          T* dst = outs[which]->data_ptr<T>() + row * e;
          std::fill(dst, dst + e, T(0));
          for (int64_t c = 0; c < nb; ++c) axpy(dst, T(1), parts[which]->data() + ((bh * nb + c) * d.R + i) * e, e);
        }
      }
    }
  }
  errors.rethrow();
}

void long_short_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& kbar, const Tensor& vbar, const Tensor& mask, LongShortGeometry geo,
                        LongShortDropout drop) {
  dispatch_float(q.dtype(), "long_short_attention", [&]<typename T>() {
    forward_impl<T>(out, lse, q, k, v, kbar, vbar, mask, geo, drop);
  });
}

void long_short_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dkbar,
                         const Tensor& dvbar, const Tensor& dout, const Tensor& lse, const Tensor& q,
                         const Tensor& k, const Tensor& v, const Tensor& kbar, const Tensor& vbar,
                         const Tensor& mask, LongShortGeometry geo, LongShortDropout drop) {
  dispatch_float(q.dtype(), "long_short_attention_backward", [&]<typename T>() {
    backward_impl<T>(dq, dk, dv, dkbar, dvbar, dout, lse, q, k, v, kbar, vbar, mask, geo, drop);
  });
}

}  // namespace

LSF_REGISTER_KERNEL(long_short_forward_kernel, DeviceType::CPU, long_short_forward);
LSF_REGISTER_KERNEL(long_short_backward_kernel, DeviceType::CPU, long_short_backward);

}  // namespace lsf::cpu
