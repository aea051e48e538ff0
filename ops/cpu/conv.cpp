// CPU conv2d: im2col + GEMM on OpenBLAS (cblas_sgemm / cblas_dgemm), forward and backward.
//
// Per image n and group g, with K = C/G·kH·kW and L = Ho·Wo:
//   col  [K, L]   = im2col(x[n, channels of g])       (zero where a tap falls into padding)
//   y    [O/G, L] = w_g [O/G, K] · col (+ bias)        (bias written first, GEMM with beta = 1)
//   dw_g [O/G, K] += dy[n, g] · colᵀ                   (summed over the batch)
//   dx[n, g]: stride 1 — the transposed convolution is itself a convolution: dx = conv(dy, w̃)
//             with w̃[c, o, kh, kw] = w[o, c, kH−1−kh, kW−1−kw] and padding d·(k−1) − p, so it
//             runs on the forward's im2col + GEMM ([C/G, L'] = w̃_g · im2col(dy), the same
//             well-shaped product as the forward, written straight into dx);
//             other strides — dcol [K, L] = w_gᵀ · dy[n, g]; dx[n, g] = col2im(dcol) (overlapping
//             taps add up).
// Column tiles: col (and dcol) is built for a band of output rows at a time, at most
// kColTileBytes, and consumed by the GEMM right after, while it is still in the core's cache:
// a whole image's col matrix is kH·kW times larger than the image (a 32-channel 28×28 map
// gives 0.9 MB per image) and writing it to memory and reading it back cost as much as a
// quarter of the GEMM itself.
// A 1×1 kernel with stride 1 and no padding has col = x, so x (and dx) are used in place.
// Depthwise convolutions (C/G = 1: one input channel per group, fewer than kGemmMultiplier
// outputs each) skip im2col and GEMM: each output plane is accumulated directly from kH·kW
// shifted input planes, and dx / dweight by the same loops (a GEMM with one row would cost more
// in call overhead than in arithmetic). With stride 1 the plane is zero-padded first and every
// tap becomes one contiguous multiply-add over the padded width ("wide rows", see
// wide_depthwise_forward); other strides loop per output row. Both are compiled once per x86-64
// level (LSF_SIMD_CLONES: AVX2 / AVX-512 where the CPU has them).
//
// Two schedules, chosen per call:
//  - items: the N·G (image, group) pairs are spread over OpenMP threads, each with its own col
//    tile buffer and its own dweight partial sum (added up in thread order at the end, so
//    results are deterministic for a given thread count); OpenBLAS, built on OpenMP, runs
//    single-threaded inside the parallel region. Used when there are at least as many pairs as
//    threads or the GEMMs are too small for OpenBLAS to thread (depthwise convs, small maps).
//  - sequential: one image at a time, im2col / col2im parallel over channels, each GEMM on
//    OpenBLAS's threads (with larger column tiles, kSequentialTileBytes, so the threaded GEMMs
//    stay large). Used for few large images, and on one thread for calls with little work.
// dbias is a separate reduction over (n, l) per output channel, in double.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "lsformer/engine/region_errors.h"
#include "lsformer/ops/conv.h"
#include "lsformer/ops/kernels/conv.h"
#include "lsformer/ops/cpu/gemm_bf16.h"
#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/cpu/simd.h"
#include "lsformer/ops/factory.h"

namespace lsf::cpu {
namespace {

// Multiply-adds per GEMM below which OpenBLAS 0.3 runs one thread (see ops/cpu/matmul.cpp).
constexpr double kSmallGemmPerThread = 65536.0 * 4.0;
// Upper bound on the per-thread scratch (col buffers and dweight partials) of the items schedule.
constexpr int64_t kMaxScratchBytes = int64_t(256) << 20;
// Multiply-adds of a whole call below which it runs on one thread: opening a parallel region
// costs microseconds (far more on a loaded machine), as much as such a convolution itself.
constexpr double kMinParallelWork = 131072.0;
// Output channels per input channel from which a convolution with one input channel per group
// runs on the GEMM path instead of the depthwise loops.
constexpr int64_t kGemmMultiplier = 8;
// Largest column tile (bytes of col / dcol) per GEMM when each GEMM runs on one thread: half a
// typical L2 cache (512 KB on Zen 2/3; more on recent Intel cores), so the tile im2col writes
// is still cached when the GEMM packs it.
constexpr int64_t kColTileBytes = int64_t(256) << 10;
// Column tiles of the sequential schedule on several threads: the GEMM is threaded by
// OpenBLAS and needs enough columns per thread; L3-sized.
constexpr int64_t kSequentialTileBytes = int64_t(4) << 20;

struct Geometry {
  int64_t N, C, H, W;       // input
  int64_t O, G, Cg, Og;     // channels, groups, per-group channels
  int64_t kH, kW;           // kernel
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t Ho, Wo;           // output
  int64_t tile_rows = 0;    // output rows per column tile (set by plan_tiles)
  bool bf16 = false;        // the operands came from bf16: the GEMMs may run on ops/cpu/gemm_bf16
  int64_t kk() const { return kH * kW; }
  int64_t K() const { return Cg * kk(); }  // rows of one group's col matrix
  int64_t L() const { return Ho * Wo; }    // columns: output positions
  // x itself is the col matrix: [C, H·W] per image equals [G, K, L].
  bool direct() const { return kH == 1 && kW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
  // Each output channel reads one input channel (depthwise, multiplier O/G below
  // kGemmMultiplier): direct loops. With more outputs per input channel (a first layer on grey
  // images: 1 → 32 channels) the GEMM path does the same work in fewer, longer loops.
  bool depthwise() const { return Cg == 1 && Og < kGemmMultiplier; }
  // Elements of one col tile buffer [K, tile_rows·Wo]; none when the GEMM path reads x in place
  // or is not used. Depthwise: a row of Wo partial sums for dweight instead.
  int64_t col_elems() const {
    if (depthwise()) return wide_depthwise() ? 2 * Hp() * Wp() + Ho * Wp() : Wo;
    return direct() ? 0 : K() * tile_rows * Wo;
  }
  // Depthwise with stride 1 runs on zero-padded planes in rows of the padded width (below).
  bool wide_depthwise() const { return depthwise() && sh == 1 && sw == 1; }
  int64_t Hp() const { return H + 2 * ph; }  // the zero-padded input plane
  int64_t Wp() const { return W + 2 * pw; }
  // Positions of a wide plane that the taps compute: Ho − 1 full rows of Wp and the last row's
  // Wo (the columns past Wo of a row are not outputs; past the last row's Wo they would read
  // beyond the padded plane).
  int64_t wide_len() const { return (Ho - 1) * Wp() + Wo; }
  // dx can be computed as a forward convolution of dy (stride 1 and padding ≤ d·(k − 1), so the
  // transposed padding d·(k − 1) − p is not negative); see the file comment. Not with one input
  // channel per group: that convolution would have one output channel per group (GEMMs of one
  // row), and dcol + col2im over kH·kW rows is cheaper.
  bool transposed_dx() const {
    return !direct() && Cg > 1 && sh == 1 && sw == 1 && ph <= dh * (kH - 1) && pw <= dw * (kW - 1);
  }
};

Geometry make_geometry(const Shape& xs, const Shape& ws, const Conv2dOptions& o) {
  const Shape ys = conv2d_output_shape(xs, ws, o);
  return {xs[0], xs[1], xs[2], xs[3], ws[0], o.groups, xs[1] / o.groups, ws[0] / o.groups, ws[2], ws[3],
          o.stride.h, o.stride.w, o.padding.h, o.padding.w, o.dilation.h, o.dilation.w, ys[2], ys[3]};
}

// The convolution that computes dx from dy when g.transposed_dx(): input dy [N, O, Ho, Wo],
// weight w̃ [C, O/G, kH, kW], output [N, C, H, W], stride 1, padding d·(k − 1) − p.
Geometry transposed_geometry(const Geometry& g) {
  return {g.N, g.O, g.Ho, g.Wo, g.C, g.G, g.Og, g.Cg, g.kH, g.kW, 1, 1, g.dh * (g.kH - 1) - g.ph,
          g.dw * (g.kW - 1) - g.pw, g.dh, g.dw, g.H, g.W};
}

// Output rows per column tile: the whole map when its col matrix fits `budget` bytes, else as
// many rows as fit (at least one).
void plan_tiles(Geometry& g, size_t elem_size, int64_t budget) {
  const int64_t row_bytes = std::max<int64_t>(g.K() * g.Wo * int64_t(elem_size), 1);
  g.tile_rows = std::clamp<int64_t>(budget / row_bytes, 1, std::max<int64_t>(g.Ho, 1));
}

// Output positions [lo, hi) whose input index out·stride + off lies in [0, in).
struct Range {
  int64_t lo, hi;
};
Range valid_range(int64_t off, int64_t stride, int64_t in, int64_t out) {
  const int64_t lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  const int64_t last = in - 1 - off;  // largest out·stride allowed
  const int64_t hi = last < 0 ? 0 : std::min(out, last / stride + 1);
  return {std::min(lo, out), std::max(std::min(lo, out), hi)};
}

// col [kH·kW, (oh1 − oh0)·Wo] (overwritten): the taps of output rows [oh0, oh1) of one input
// plane x [H, W].
template <typename T>
void im2col_plane(const Geometry& g, const T* x, T* col, int64_t oh0, int64_t oh1) {
  const int64_t Lt = (oh1 - oh0) * g.Wo;
  if (g.sh == 1 && g.sw == 1 && g.Wo == g.W) {
    // Stride 1 with the output as wide as the input ("same" padding): a tap's row of col is x
    // shifted by offh·W + offw, so the valid rows copy as one block; the columns that the shift
    // wrapped to the neighbouring row (ow < rw.lo or ow ≥ rw.hi) are then zeroed, as are the
    // rows whose input row lies in the padding. A row at a time would pay a loop setup per few
    // dozen elements, which cost more than the copy itself.
    for (int64_t kh = 0; kh < g.kH; ++kh) {
      const int64_t offh = kh * g.dh - g.ph;
      const Range rh = valid_range(offh, 1, g.H, g.Ho);
      const int64_t a = std::max(rh.lo, oh0), b = std::min(rh.hi, oh1);  // valid rows of the tile
      for (int64_t kw = 0; kw < g.kW; ++kw) {
        const int64_t offw = kw * g.dw - g.pw;
        const Range rw = valid_range(offw, 1, g.W, g.Wo);
        T* row = col + (kh * g.kW + kw) * Lt - oh0 * g.Wo;  // row[oh·Wo + ow] for oh in [oh0, oh1)
        if (a >= b || rw.lo >= rw.hi) {
          std::fill(row + oh0 * g.Wo, row + oh1 * g.Wo, T(0));
          continue;
        }
        std::fill(row + oh0 * g.Wo, row + a * g.Wo + rw.lo, T(0));
        // Positions a·Wo + rw.lo … (b−1)·Wo + rw.hi − 1 read x in bounds (the first and last
        // are valid taps).
        const int64_t first = a * g.Wo + rw.lo, last = (b - 1) * g.Wo + rw.hi;
        std::copy(x + first + offh * g.W + offw, x + last + offh * g.W + offw, row + first);
        // The wrapped columns between consecutive valid rows: the last Wo − rw.hi of row oh and
        // the first rw.lo of row oh + 1 are one contiguous run (none for the centre taps).
        const int64_t Wo = g.Wo, gap = rw.lo + (Wo - rw.hi);
        if (gap > 0) {
          T* r = row + a * Wo + rw.hi;
          for (int64_t oh = a; oh + 1 < b; ++oh, r += Wo)
            for (int64_t i = 0; i < gap; ++i) r[i] = T(0);
        }
        std::fill(row + last, row + oh1 * g.Wo, T(0));
      }
    }
    return;
  }
  for (int64_t kh = 0; kh < g.kH; ++kh) {
    const int64_t offh = kh * g.dh - g.ph;
    const Range rh = valid_range(offh, g.sh, g.H, g.Ho);
    for (int64_t kw = 0; kw < g.kW; ++kw) {
      const int64_t offw = kw * g.dw - g.pw;
      const Range rw = valid_range(offw, g.sw, g.W, g.Wo);
      T* row = col + (kh * g.kW + kw) * Lt - oh0 * g.Wo;  // row[oh·Wo + ow] for oh in [oh0, oh1)
      for (int64_t oh = oh0; oh < oh1; ++oh) {
        T* r = row + oh * g.Wo;
        if (oh < rh.lo || oh >= rh.hi) {
          std::fill(r, r + g.Wo, T(0));
          continue;
        }
        const T* xr = x + (oh * g.sh + offh) * g.W;  // input row; column ow·sw + offw
        // Plain loops, not std::copy / std::fill: the rows are short (a few dozen elements),
        // where a memmove call per row costs more than the copy.
        for (int64_t ow = 0; ow < rw.lo; ++ow) r[ow] = T(0);
        if (g.sw == 1) {
          const T* src = xr + offw;
#pragma omp simd
          for (int64_t ow = rw.lo; ow < rw.hi; ++ow) r[ow] = src[ow];
        } else {
          for (int64_t ow = rw.lo; ow < rw.hi; ++ow) r[ow] = xr[ow * g.sw + offw];
        }
        for (int64_t ow = rw.hi; ow < g.Wo; ++ow) r[ow] = T(0);
      }
    }
  }
}

// dx [H, W] += the taps of col [kH·kW, (oh1 − oh0)·Wo] (output rows [oh0, oh1)) that fall
// inside the plane (padding taps are dropped).
template <typename T>
void col2im_plane(const Geometry& g, const T* col, T* dx, int64_t oh0, int64_t oh1) {
  const int64_t Lt = (oh1 - oh0) * g.Wo;
  for (int64_t kh = 0; kh < g.kH; ++kh) {
    const int64_t offh = kh * g.dh - g.ph;
    const Range rh = valid_range(offh, g.sh, g.H, g.Ho);
    for (int64_t kw = 0; kw < g.kW; ++kw) {
      const int64_t offw = kw * g.dw - g.pw;
      const Range rw = valid_range(offw, g.sw, g.W, g.Wo);
      const T* row = col + (kh * g.kW + kw) * Lt - oh0 * g.Wo;
      for (int64_t oh = std::max(rh.lo, oh0); oh < std::min(rh.hi, oh1); ++oh) {
        const T* r = row + oh * g.Wo;
        T* dr = dx + (oh * g.sh + offh) * g.W;  // input row; column ow·sw + offw
        for (int64_t ow = rw.lo; ow < rw.hi; ++ow) dr[ow * g.sw + offw] += r[ow];
      }
    }
  }
}

// Depthwise planes: y [Ho, Wo] is a sum of kH·kW shifted, scaled copies of x [H, W] — as
// im2col's loops, accumulating straight into y instead of filling a col matrix for a GEMM with a
// single row (which costs more in call overhead than in arithmetic).
template <typename Fn>
inline __attribute__((always_inline)) void for_each_tap(const Geometry& g, Fn&& fn) {  // fn(tap, offh, offw, rows, cols)
  for (int64_t kh = 0; kh < g.kH; ++kh) {
    const int64_t offh = kh * g.dh - g.ph;
    const Range rh = valid_range(offh, g.sh, g.H, g.Ho);
    for (int64_t kw = 0; kw < g.kW; ++kw) {
      const int64_t offw = kw * g.dw - g.pw;
      fn(kh * g.kW + kw, offh, offw, rh, valid_range(offw, g.sw, g.W, g.Wo));
    }
  }
}

// y [Ho, Wo] = bias + Σ_taps w[tap]·x[shifted] (overwrites y).
template <typename T>
LSF_SIMD_CLONES void depthwise_forward_plane(const Geometry& g, const T* x, const T* w, T bias, T* y) {
  std::fill(y, y + g.L(), bias);
  for_each_tap(g, [&](int64_t tap, int64_t offh, int64_t offw, Range rh, Range rw) {
    const T wv = w[tap];
    for (int64_t oh = rh.lo; oh < rh.hi; ++oh) {
      const T* xr = x + (oh * g.sh + offh) * g.W;
      T* yr = y + oh * g.Wo;
      // y and x never overlap: safe to vectorise.
#pragma omp simd
      for (int64_t ow = rw.lo; ow < rw.hi; ++ow) yr[ow] += wv * xr[ow * g.sw + offw];
    }
  });
}

// dw [kH, kW] += Σ_positions dy·x[shifted]; dx [H, W] += Σ_taps w[tap]·dy (either may be null).
// The dweight sums run down the rows in acc [Wo] (one partial sum per output column, plain
// vectorisable multiply-adds), then across it: a fixed order, so results are deterministic.
template <typename T>
LSF_SIMD_CLONES void depthwise_backward_plane(const Geometry& g, const T* x, const T* w, const T* dy, T* dw, T* dx, T* acc) {
  for_each_tap(g, [&](int64_t tap, int64_t offh, int64_t offw, Range rh, Range rw) {
    if (dw != nullptr) std::fill(acc + rw.lo, acc + rw.hi, T(0));
    for (int64_t oh = rh.lo; oh < rh.hi; ++oh) {
      const int64_t row = (oh * g.sh + offh) * g.W;
      const T* dyr = dy + oh * g.Wo;
      if (dw != nullptr) {
        const T* xr = x + row;
        // acc is scratch of its own: no overlap with dy or x.
#pragma omp simd
        for (int64_t ow = rw.lo; ow < rw.hi; ++ow) acc[ow] += dyr[ow] * xr[ow * g.sw + offw];
      }
      if (dx != nullptr) {
        const T wv = w[tap];
        T* dxr = dx + row;
        // dx and dy never overlap, and distinct ow write distinct elements (stride ≥ 1).
#pragma omp simd
        for (int64_t ow = rw.lo; ow < rw.hi; ++ow) dxr[ow * g.sw + offw] += wv * dyr[ow];
      }
    }
    if (dw != nullptr) {
      T s = 0;
      for (int64_t ow = rw.lo; ow < rw.hi; ++ow) s += acc[ow];
      dw[tap] += s;
    }
  });
}

// Depthwise planes with stride 1, in "wide rows": with the input plane zero-padded to Hp × Wp,
// output (oh, ow) sits at oh·Wp + ow of a plane of rows Wp wide, and tap (kh, kw) reads the
// padded plane at that position + kh·dh·Wp + kw·dw. So every tap is one contiguous
// multiply-add over wide_len() positions instead of a loop per output row: the maps of
// vision transformers are small (8×8, 16×16), where the per-row loops cost more than their
// arithmetic. The columns ow ≥ Wo of each wide row are computed and dropped (forward) or held
// at zero (backward).

// xpad [Hp, Wp] = x [H, W] with a zero border.
template <typename T>
inline void pad_plane(const Geometry& g, const T* x, T* xpad) {
  const int64_t Wp = g.Wp();
  std::fill(xpad, xpad + g.ph * Wp, T(0));
  for (int64_t h = 0; h < g.H; ++h) {
    T* r = xpad + (h + g.ph) * Wp;
    for (int64_t i = 0; i < g.pw; ++i) r[i] = T(0);
    for (int64_t i = 0; i < g.W; ++i) r[g.pw + i] = x[h * g.W + i];
    for (int64_t i = g.pw + g.W; i < Wp; ++i) r[i] = T(0);
  }
  std::fill(xpad + (g.ph + g.H) * Wp, xpad + g.Hp() * Wp, T(0));
}

// y [Ho, Wo] = bias + Σ_taps w[tap]·xpad[shifted]; `wide` [Ho·Wp] is scratch.
template <typename T>
LSF_SIMD_CLONES void wide_depthwise_forward(const Geometry& g, const T* xpad, const T* w, T bias, T* y, T* wide) {
  const int64_t Wp = g.Wp(), n = g.wide_len();
  for (int64_t i = 0; i < n; ++i) wide[i] = bias;
  for (int64_t kh = 0; kh < g.kH; ++kh)
    for (int64_t kw = 0; kw < g.kW; ++kw) {
      const T wv = w[kh * g.kW + kw];
      const T* src = xpad + kh * g.dh * Wp + kw * g.dw;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) wide[i] += wv * src[i];
    }
  for (int64_t oh = 0; oh < g.Ho; ++oh)
    for (int64_t ow = 0; ow < g.Wo; ++ow) y[oh * g.Wo + ow] = wide[oh * Wp + ow];
}

// dw [kH·kW] += Σ dy·xpad[shifted] (when dw is not null) and dxpad [Hp, Wp] += Σ_taps
// w[tap]·dy shifted back (when dxpad is not null); `wide` [Ho·Wp] is scratch for dy.
template <typename T>
LSF_SIMD_CLONES void wide_depthwise_backward(const Geometry& g, const T* xpad, const T* w, const T* dy, T* dw,
                                             T* dxpad, T* wide) {
  const int64_t Wp = g.Wp(), n = g.wide_len();
  for (int64_t oh = 0; oh < g.Ho; ++oh) {
    T* r = wide + oh * Wp;
    for (int64_t ow = 0; ow < g.Wo; ++ow) r[ow] = dy[oh * g.Wo + ow];
    if (oh + 1 < g.Ho)
      for (int64_t ow = g.Wo; ow < Wp; ++ow) r[ow] = T(0);  // not outputs: no gradient
  }
  for (int64_t kh = 0; kh < g.kH; ++kh)
    for (int64_t kw = 0; kw < g.kW; ++kw) {
      const int64_t tap = kh * g.kW + kw, off = kh * g.dh * Wp + kw * g.dw;
      if (dw != nullptr) {
        const T* src = xpad + off;
        T s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < n; ++i) s += wide[i] * src[i];
        dw[tap] += s;
      }
      if (dxpad != nullptr) {
        const T wv = w[tap];
        T* dst = dxpad + off;
        // One tap's targets are distinct positions (a shift of the wide plane).
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) dst[i] += wv * wide[i];
      }
    }
}

// bf16: the operands came from bf16 (Geometry::bf16), so the product may run on the bf16 kernel,
// which checks them and declines if one is not exact in bf16.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc, bool bf16) {
  if (bf16 && gemm_bf16_if_it_pays(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n),
              int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc, bool /*bf16: f32 only*/) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n),
              int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

// Threads of the items schedule, or 1 for the sequential one. Plans g's column tiles for the
// schedule chosen; `extra_elems` is the per-thread scratch besides the col tile (a dweight
// partial sum).
int plan_schedule(Geometry& g, int64_t extra_elems, size_t elem_size) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  plan_tiles(g, elem_size, kColTileBytes);
  const double gemm_work = double(g.Og) * double(g.K()) * double(g.L());
  if (threads <= 1 || gemm_work * double(g.N * g.G) < kMinParallelWork) return 1;
  const bool many_items = g.N * g.G >= threads;
  const bool small_gemms = gemm_work < kSmallGemmPerThread * threads;
  const bool fits =
      int64_t(threads) * (g.col_elems() + extra_elems) * int64_t(elem_size) <= kMaxScratchBytes;
  if ((many_items || small_gemms) && fits) return threads;
  plan_tiles(g, elem_size, kSequentialTileBytes);  // one GEMM at a time, on OpenBLAS's threads
  return 1;
}

// The col tile of (image n, group gi) for output rows [oh0, oh1): im2col into `buf`
// [K, (oh1 − oh0)·Wo].
template <typename T>
void col_tile(const Geometry& g, const T* x, int64_t n, int64_t gi, int64_t oh0, int64_t oh1, T* buf,
              bool parallel) {
  const int64_t HW = g.H * g.W;
  const T* xg = x + (n * g.C + gi * g.Cg) * HW;
  const int64_t plane = g.kk() * (oh1 - oh0) * g.Wo;
  // The parallel loop only where it can run in parallel: a parallel construct with a false if
  // clause still opens a one-thread region, a cost paid per tile inside the items schedule.
  if (parallel && g.Cg > 1 && g.Cg * plane >= kParallelGrain) {
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < g.Cg; ++c) im2col_plane(g, xg + c * HW, buf + c * plane, oh0, oh1);
  } else {
    for (int64_t c = 0; c < g.Cg; ++c) im2col_plane(g, xg + c * HW, buf + c * plane, oh0, oh1);
  }
}

// y[n, g] = w_g · col (+ bias), one column tile at a time.
template <typename T>
void forward_item(const Geometry& g, const T* x, const T* w, const T* bias, T* y, int64_t n, int64_t gi, T* buf,
                  bool parallel) {
  const int64_t K = g.K(), L = g.L();
  T* yg = y + (n * g.O + gi * g.Og) * L;
  if (g.depthwise()) {
    const T* xg = x + (n * g.C + gi) * g.H * g.W;
    if (g.wide_depthwise()) {
      pad_plane(g, xg, buf);
      for (int64_t o = 0; o < g.Og; ++o)
        wide_depthwise_forward(g, buf, w + (gi * g.Og + o) * K, bias != nullptr ? bias[gi * g.Og + o] : T(0),
                               yg + o * L, buf + g.Hp() * g.Wp());
      return;
    }
    for (int64_t o = 0; o < g.Og; ++o)
      depthwise_forward_plane(g, xg, w + (gi * g.Og + o) * K, bias != nullptr ? bias[gi * g.Og + o] : T(0),
                              yg + o * L);
    return;
  }
  if (bias != nullptr)
    for (int64_t o = 0; o < g.Og; ++o) std::fill(yg + o * L, yg + (o + 1) * L, bias[gi * g.Og + o]);
  const T beta = T(bias != nullptr ? 1 : 0);
  const T* wg = w + gi * g.Og * K;
  if (g.direct()) {
    gemm(false, false, g.Og, L, K, T(1), wg, K, x + (n * g.C + gi * g.Cg) * g.H * g.W, L, beta, yg, L, g.bf16);
    return;
  }
  for (int64_t oh0 = 0; oh0 < g.Ho; oh0 += g.tile_rows) {
    const int64_t oh1 = std::min(g.Ho, oh0 + g.tile_rows), Lt = (oh1 - oh0) * g.Wo;
    col_tile(g, x, n, gi, oh0, oh1, buf, parallel);
    gemm(false, false, g.Og, Lt, K, T(1), wg, K, buf, Lt, beta, yg + oh0 * g.Wo, L, g.bf16);
  }
}

// y [N, O, Ho, Wo] = conv(x, w) + bias over the geometry g (which may be a transposed one).
template <typename T>
void run_forward(Geometry g, const T* xp, const T* wp, const T* bp, T* yp, const TensorOptions& options) {
  const int threads = plan_schedule(g, 0, sizeof(T));
  const int64_t buf_elems = g.col_elems();
  const int64_t items = g.N * g.G;
  Tensor scratch = empty({std::max<int64_t>(buf_elems * threads, 1)}, options);
  T* sp = scratch.data_ptr<T>();
  if (threads > 1) {
    RegionErrors errors;  // the items' GEMMs may allocate (bf16 packing) or check arguments
#pragma omp parallel num_threads(threads)
    {
      T* buf = sp + buf_elems * omp_get_thread_num();
#pragma omp for schedule(static)
      for (int64_t i = 0; i < items; ++i)
        errors.run([&] { forward_item(g, xp, wp, bp, yp, i / g.G, i % g.G, buf, false); });
    }
    errors.rethrow();
  } else {
    for (int64_t i = 0; i < items; ++i) forward_item(g, xp, wp, bp, yp, i / g.G, i % g.G, sp, true);
  }
}

template <typename T>
void forward(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& o) {
  Geometry g = make_geometry(x.shape(), weight.shape(), o);
  g.bf16 = bf16_operands({&x, &weight});
  run_forward<T>(g, x.data_ptr<T>(), weight.data_ptr<T>(), bias.defined() ? bias.data_ptr<T>() : nullptr,
                 y.data_ptr<T>(), x.options());
}

// dbias[o] = Σ over n and output positions of dy[n, o, ·], summed in double.
template <typename T>
void bias_grad(const Tensor& dbias, const Tensor& dy) {
  const int64_t N = dy.size(0), O = dy.size(1), L = dy.size(2) * dy.size(3);
  const T* d = dy.data_ptr<T>();
  T* out = dbias.data_ptr<T>();
#pragma omp parallel for schedule(static) if (N * O * L >= kParallelGrain && O > 1)
  for (int64_t o = 0; o < O; ++o) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* r = d + (n * O + o) * L;
#pragma omp simd reduction(+ : s)
      for (int64_t l = 0; l < L; ++l) s += double(r[l]);
    }
    out[o] = T(s);
  }
}

// The gradients of one (image, group) pair: dw (the caller's accumulator [O, K], += ) and
// dx[n, g] (overwritten), either may be null. `buf` holds one col (or dcol) tile.
template <typename T>
void backward_item(const Geometry& g, const T* x, const T* w, const T* dy, T* dw_acc, T* dx, int64_t n, int64_t gi,
                   T* buf, bool parallel) {
  const int64_t K = g.K(), L = g.L(), HW = g.H * g.W;
  const T* dyg = dy + (n * g.O + gi * g.Og) * L;
  if (g.depthwise()) {
    const T* xg = x != nullptr ? x + (n * g.C + gi) * HW : nullptr;
    T* dxg = dx != nullptr ? dx + (n * g.C + gi) * HW : nullptr;
    if (g.wide_depthwise()) {
      // buf: [xpad Hp·Wp][dxpad Hp·Wp][wide Ho·Wp].
      const int64_t Wp = g.Wp(), padded = g.Hp() * Wp;
      T* xpad = xg != nullptr ? buf : nullptr;
      T* dxpad = dxg != nullptr ? buf + padded : nullptr;
      if (xpad != nullptr) pad_plane(g, xg, xpad);
      if (dxpad != nullptr) std::fill(dxpad, dxpad + padded, T(0));
      for (int64_t o = 0; o < g.Og; ++o) {
        const int64_t oc = gi * g.Og + o;
        wide_depthwise_backward(g, xpad, w != nullptr ? w + oc * K : nullptr, dyg + o * L,
                                dw_acc != nullptr ? dw_acc + oc * K : nullptr, dxpad, buf + 2 * padded);
      }
      if (dxpad != nullptr)
        for (int64_t h = 0; h < g.H; ++h)
          for (int64_t i = 0; i < g.W; ++i) dxg[h * g.W + i] = dxpad[(h + g.ph) * Wp + g.pw + i];
      return;
    }
    if (dxg != nullptr) std::fill(dxg, dxg + HW, T(0));
    for (int64_t o = 0; o < g.Og; ++o) {
      const int64_t oc = gi * g.Og + o;
      depthwise_backward_plane(g, xg, w != nullptr ? w + oc * K : nullptr, dyg + o * L,
                               dw_acc != nullptr ? dw_acc + oc * K : nullptr, dxg, buf);
    }
    return;
  }
  if (dw_acc != nullptr) {
    T* dwg = dw_acc + gi * g.Og * K;
    if (g.direct()) {
      gemm(false, true, g.Og, K, L, T(1), dyg, L, x + (n * g.C + gi * g.Cg) * HW, L, T(1), dwg, K, g.bf16);
    } else {
      for (int64_t oh0 = 0; oh0 < g.Ho; oh0 += g.tile_rows) {
        const int64_t oh1 = std::min(g.Ho, oh0 + g.tile_rows), Lt = (oh1 - oh0) * g.Wo;
        col_tile(g, x, n, gi, oh0, oh1, buf, parallel);
        gemm(false, true, g.Og, K, Lt, T(1), dyg + oh0 * g.Wo, L, buf, Lt, T(1), dwg, K, g.bf16);
      }
    }
  }
  if (dx != nullptr) {
    T* dxg = dx + (n * g.C + gi * g.Cg) * HW;
    const T* wg = w + gi * g.Og * K;
    if (g.direct()) {  // dcol is dx[n, g] itself
      gemm(true, false, K, L, g.Og, T(1), wg, K, dyg, L, T(0), dxg, L, g.bf16);
      return;
    }
    std::fill(dxg, dxg + g.Cg * HW, T(0));
    for (int64_t oh0 = 0; oh0 < g.Ho; oh0 += g.tile_rows) {
      const int64_t oh1 = std::min(g.Ho, oh0 + g.tile_rows), Lt = (oh1 - oh0) * g.Wo;
      gemm(true, false, K, Lt, g.Og, T(1), wg, K, dyg + oh0 * g.Wo, L, T(0), buf, Lt, g.bf16);
      const int64_t plane = g.kk() * Lt;
      if (parallel && g.Cg > 1 && g.Cg * plane >= kParallelGrain) {
#pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < g.Cg; ++c) col2im_plane(g, buf + c * plane, dxg + c * HW, oh0, oh1);
      } else {
        for (int64_t c = 0; c < g.Cg; ++c) col2im_plane(g, buf + c * plane, dxg + c * HW, oh0, oh1);
      }
    }
  }
}

// w̃ [C, O/G, kH, kW] of the transposed convolution: w̃[g·C/G + c, o, kh, kw] =
// w[g·O/G + o, c, kH−1−kh, kW−1−kw].
template <typename T>
void transposed_weight(const Geometry& g, const T* w, T* wt) {
  const int64_t kk = g.kk();
  for (int64_t gi = 0; gi < g.G; ++gi)
    for (int64_t o = 0; o < g.Og; ++o)
      for (int64_t c = 0; c < g.Cg; ++c) {
        const T* src = w + ((gi * g.Og + o) * g.Cg + c) * kk;
        T* dst = wt + ((gi * g.Cg + c) * g.Og + o) * kk;
        for (int64_t t = 0; t < kk; ++t) dst[t] = src[kk - 1 - t];
      }
}

template <typename T>
void backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x,
              const Tensor& weight, const Conv2dOptions& o) {
  if (dbias.defined()) bias_grad<T>(dbias, dy);
  if (!dx.defined() && !dweight.defined()) return;
  const Shape& xs = dx.defined() ? dx.shape() : x.shape();
  const Shape& ws = dweight.defined() ? dweight.shape() : weight.shape();
  Geometry g = make_geometry(xs, ws, o);
  // dweight's products read dy and x, dx's dy and the weight.
  g.bf16 = bf16_operands({&dy}) && (!dweight.defined() || bf16_operands({&x})) && (!dx.defined() || bf16_operands({&weight}));
  const T* dyp = dy.data_ptr<T>();
  T* dxp = dx.defined() ? dx.data_ptr<T>() : nullptr;
  if (dxp != nullptr && g.transposed_dx()) {
    Tensor wt = empty({g.C, g.Og, g.kH, g.kW}, dy.options());
    transposed_weight(g, weight.data_ptr<T>(), wt.data_ptr<T>());
    run_forward<T>(transposed_geometry(g), dyp, wt.data_ptr<T>(), nullptr, dxp, dy.options());
    dxp = nullptr;  // done
  }
  if (dxp == nullptr && !dweight.defined()) return;
  const T* xp = dweight.defined() ? x.data_ptr<T>() : nullptr;
  const T* wp = dxp != nullptr ? weight.data_ptr<T>() : nullptr;
  const int64_t w_elems = g.O * g.K();
  const int64_t partial = dweight.defined() ? w_elems : 0;
  const int threads = plan_schedule(g, partial, sizeof(T));
  const int64_t per_thread = g.col_elems() + partial;
  const int64_t items = g.N * g.G;
  Tensor scratch = empty({std::max<int64_t>(per_thread * threads, 1)}, dy.options());
  T* sp = scratch.data_ptr<T>();
  if (threads > 1) {
    // Each thread: [dweight partial (if asked)][col buffer].
    RegionErrors errors;  // as in run_forward
#pragma omp parallel num_threads(threads)
    {
      T* mine = sp + per_thread * omp_get_thread_num();
      T* part = dweight.defined() ? mine : nullptr;
      T* buf = mine + partial;
      if (part != nullptr) std::fill(part, part + w_elems, T(0));
#pragma omp for schedule(static)
      for (int64_t i = 0; i < items; ++i)
        errors.run([&] { backward_item(g, xp, wp, dyp, part, dxp, i / g.G, i % g.G, buf, false); });
    }
    errors.rethrow();
    if (dweight.defined()) {
      T* out = dweight.data_ptr<T>();
#pragma omp parallel for schedule(static) if (w_elems * threads >= kParallelGrain)
      for (int64_t e = 0; e < w_elems; ++e) {
        T s = sp[e];
        for (int t = 1; t < threads; ++t) s += sp[t * per_thread + e];
        out[e] = s;
      }
    }
  } else {
    T* dwp = nullptr;
    if (dweight.defined()) {
      dwp = dweight.data_ptr<T>();
      std::fill(dwp, dwp + w_elems, T(0));
    }
    for (int64_t i = 0; i < items; ++i) backward_item(g, xp, wp, dyp, dwp, dxp, i / g.G, i % g.G, sp, true);
  }
}

void conv2d_forward(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                    const Conv2dOptions& options) {
  dispatch_float(x.dtype(), "conv2d", [&]<typename T>() { forward<T>(y, x, weight, bias, options); });
}

void conv2d_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x,
                     const Tensor& weight, const Conv2dOptions& options) {
  dispatch_float(dy.dtype(), "conv2d_backward",
                 [&]<typename T>() { backward<T>(dx, dweight, dbias, dy, x, weight, options); });
}

}  // namespace

LSF_REGISTER_KERNEL(conv2d_forward_kernel, DeviceType::CPU, conv2d_forward);
LSF_REGISTER_KERNEL(conv2d_backward_kernel, DeviceType::CPU, conv2d_backward);

}  // namespace lsf::cpu
