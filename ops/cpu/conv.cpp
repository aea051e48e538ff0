// CPU conv2d: im2col + GEMM on OpenBLAS (cblas_sgemm / cblas_dgemm), forward and backward.
//
// Per image n and group g, with K = C/G·kH·kW and L = Ho·Wo:
//   col  [K, L]   = im2col(x[n, channels of g])       (zero where a tap falls into padding)
//   y    [O/G, L] = w_g [O/G, K] · col (+ bias)        (bias written first, GEMM with beta = 1)
//   dw_g [O/G, K] += dy[n, g] · colᵀ                   (summed over the batch)
//   dcol [K, L]   = w_gᵀ · dy[n, g];  dx[n, g] = col2im(dcol)   (overlapping taps add up)
// A 1×1 kernel with stride 1 and no padding has col = x, so x (and dx) are used in place.
// Depthwise convolutions (C/G = 1: one input channel per group) skip im2col and GEMM: each
// output plane is accumulated directly from kH·kW shifted input planes, and dx / dweight by the
// same loops (a GEMM with one row would cost more in call overhead than in arithmetic).
//
// Two schedules, chosen per call:
//  - items: the N·G (image, group) pairs are spread over OpenMP threads, each with its own col
//    buffer and its own dweight partial sum (added up in thread order at the end, so results are
//    deterministic for a given thread count); OpenBLAS, built on OpenMP, runs single-threaded
//    inside the parallel region. Used when there are at least as many pairs as threads or the
//    GEMMs are too small for OpenBLAS to thread (depthwise convs, small feature maps).
//  - sequential: one image at a time, im2col / col2im parallel over channels, each GEMM on
//    OpenBLAS's threads. Used for few large images, or when per-thread buffers would be too big,
//    and on one thread for calls with little work in total.
// dbias is a separate reduction over (n, l) per output channel, in double.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "lsformer/ops/conv.h"
#include "lsformer/ops/kernels/conv.h"
#include "lsformer/ops/cpu/loops.h"
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

struct Geometry {
  int64_t N, C, H, W;       // input
  int64_t O, G, Cg, Og;     // channels, groups, per-group channels
  int64_t kH, kW;           // kernel
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t Ho, Wo;           // output
  int64_t kk() const { return kH * kW; }
  int64_t K() const { return Cg * kk(); }  // rows of one group's col matrix
  int64_t L() const { return Ho * Wo; }    // columns: output positions
  // x itself is the col matrix: [C, H·W] per image equals [G, K, L].
  bool direct() const { return kH == 1 && kW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
  // Each output channel reads one input channel (depthwise, any multiplier O/G): direct loops.
  bool depthwise() const { return Cg == 1; }
  // Elements of one col buffer [K, L]; none when the GEMM path reads x in place or is not used.
  // Depthwise: a row of Wo partial sums for dweight instead.
  int64_t col_elems() const { return depthwise() ? Wo : direct() ? 0 : K() * L(); }
};

Geometry make_geometry(const Shape& xs, const Shape& ws, const Conv2dOptions& o) {
  const Shape ys = conv2d_output_shape(xs, ws, o);
  return {xs[0], xs[1], xs[2], xs[3], ws[0], o.groups, xs[1] / o.groups, ws[0] / o.groups, ws[2], ws[3],
          o.stride.h, o.stride.w, o.padding.h, o.padding.w, o.dilation.h, o.dilation.w, ys[2], ys[3]};
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

// col [kH·kW, L] (overwritten) from one input plane x [H, W].
template <typename T>
void im2col_plane(const Geometry& g, const T* x, T* col) {
  const int64_t L = g.L();
  for (int64_t kh = 0; kh < g.kH; ++kh) {
    const int64_t offh = kh * g.dh - g.ph;
    const Range rh = valid_range(offh, g.sh, g.H, g.Ho);
    for (int64_t kw = 0; kw < g.kW; ++kw) {
      const int64_t offw = kw * g.dw - g.pw;
      const Range rw = valid_range(offw, g.sw, g.W, g.Wo);
      T* row = col + (kh * g.kW + kw) * L;
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        T* r = row + oh * g.Wo;
        if (oh < rh.lo || oh >= rh.hi) {
          std::fill(r, r + g.Wo, T(0));
          continue;
        }
        const T* xr = x + (oh * g.sh + offh) * g.W;  // input row; column ow·sw + offw
        std::fill(r, r + rw.lo, T(0));
        if (g.sw == 1) {
          std::copy(xr + rw.lo + offw, xr + rw.hi + offw, r + rw.lo);
        } else {
          for (int64_t ow = rw.lo; ow < rw.hi; ++ow) r[ow] = xr[ow * g.sw + offw];
        }
        std::fill(r + rw.hi, r + g.Wo, T(0));
      }
    }
  }
}

// dx [H, W] += the taps of col [kH·kW, L] that fall inside the plane (padding taps are dropped).
template <typename T>
void col2im_plane(const Geometry& g, const T* col, T* dx) {
  const int64_t L = g.L();
  for (int64_t kh = 0; kh < g.kH; ++kh) {
    const int64_t offh = kh * g.dh - g.ph;
    const Range rh = valid_range(offh, g.sh, g.H, g.Ho);
    for (int64_t kw = 0; kw < g.kW; ++kw) {
      const int64_t offw = kw * g.dw - g.pw;
      const Range rw = valid_range(offw, g.sw, g.W, g.Wo);
      const T* row = col + (kh * g.kW + kw) * L;
      for (int64_t oh = rh.lo; oh < rh.hi; ++oh) {
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
void for_each_tap(const Geometry& g, Fn&& fn) {  // fn(tap, offh, offw, rows, cols)
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
void depthwise_forward_plane(const Geometry& g, const T* x, const T* w, T bias, T* y) {
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
void depthwise_backward_plane(const Geometry& g, const T* x, const T* w, const T* dy, T* dw, T* dx, T* acc) {
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

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n),
              int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n),
              int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

// Threads of the items schedule, or 1 for the sequential one.
int item_threads(const Geometry& g, int64_t scratch_elems_per_thread, size_t elem_size) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const double gemm_work = double(g.Og) * double(g.K()) * double(g.L());
  if (threads <= 1 || gemm_work * double(g.N * g.G) < kMinParallelWork) return 1;
  const bool many_items = g.N * g.G >= threads;
  const bool small_gemms = gemm_work < kSmallGemmPerThread * threads;
  const bool fits = int64_t(threads) * scratch_elems_per_thread * int64_t(elem_size) <= kMaxScratchBytes;
  return (many_items || small_gemms) && fits ? threads : 1;
}

// The col matrix of (image n, group gi): x itself (direct) or im2col into `buf` [K, L].
template <typename T>
const T* group_col(const Geometry& g, const T* x, int64_t n, int64_t gi, T* buf, bool parallel) {
  const int64_t HW = g.H * g.W;
  const T* xg = x + (n * g.C + gi * g.Cg) * HW;
  if (g.direct()) return xg;
  const int64_t plane = g.kk() * g.L();
#pragma omp parallel for schedule(static) if (parallel && g.Cg > 1 && g.Cg * plane >= kParallelGrain)
  for (int64_t c = 0; c < g.Cg; ++c) im2col_plane(g, xg + c * HW, buf + c * plane);
  return buf;
}

// y[n, g] = w_g · col (+ bias).
template <typename T>
void forward_item(const Geometry& g, const T* x, const T* w, const T* bias, T* y, int64_t n, int64_t gi, T* buf,
                  bool parallel) {
  const int64_t K = g.K(), L = g.L();
  T* yg = y + (n * g.O + gi * g.Og) * L;
  if (g.depthwise()) {
    const T* xg = x + (n * g.C + gi) * g.H * g.W;
    for (int64_t o = 0; o < g.Og; ++o)
      depthwise_forward_plane(g, xg, w + (gi * g.Og + o) * K, bias != nullptr ? bias[gi * g.Og + o] : T(0),
                              yg + o * L);
    return;
  }
  const T* col = group_col(g, x, n, gi, buf, parallel);
  if (bias != nullptr)
    for (int64_t o = 0; o < g.Og; ++o) std::fill(yg + o * L, yg + (o + 1) * L, bias[gi * g.Og + o]);
  gemm(false, false, g.Og, L, K, T(1), w + gi * g.Og * K, K, col, L, T(bias != nullptr ? 1 : 0), yg, L);
}

template <typename T>
void forward(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& o) {
  const Geometry g = make_geometry(x.shape(), weight.shape(), o);
  const T* xp = x.data_ptr<T>();
  const T* wp = weight.data_ptr<T>();
  const T* bp = bias.defined() ? bias.data_ptr<T>() : nullptr;
  T* yp = y.data_ptr<T>();
  const int64_t buf_elems = g.col_elems();
  const int threads = item_threads(g, buf_elems, sizeof(T));
  const int64_t items = g.N * g.G;
  Tensor scratch = empty({std::max<int64_t>(buf_elems * threads, 1)}, x.options());
  T* sp = scratch.data_ptr<T>();
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    {
      T* buf = sp + buf_elems * omp_get_thread_num();
#pragma omp for schedule(static)
      for (int64_t i = 0; i < items; ++i) forward_item(g, xp, wp, bp, yp, i / g.G, i % g.G, buf, false);
    }
  } else {
    for (int64_t i = 0; i < items; ++i) forward_item(g, xp, wp, bp, yp, i / g.G, i % g.G, sp, true);
  }
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
// dx[n, g] (overwritten). `buf` [K, L] holds col, then dcol.
template <typename T>
void backward_item(const Geometry& g, const T* x, const T* w, const T* dy, T* dw_acc, T* dx, int64_t n, int64_t gi,
                   T* buf, bool parallel) {
  const int64_t K = g.K(), L = g.L(), HW = g.H * g.W;
  const T* dyg = dy + (n * g.O + gi * g.Og) * L;
  if (g.depthwise()) {
    const T* xg = x != nullptr ? x + (n * g.C + gi) * HW : nullptr;
    T* dxg = dx != nullptr ? dx + (n * g.C + gi) * HW : nullptr;
    if (dxg != nullptr) std::fill(dxg, dxg + HW, T(0));
    for (int64_t o = 0; o < g.Og; ++o) {
      const int64_t oc = gi * g.Og + o;
      depthwise_backward_plane(g, xg, w != nullptr ? w + oc * K : nullptr, dyg + o * L,
                               dw_acc != nullptr ? dw_acc + oc * K : nullptr, dxg, buf);
    }
    return;
  }
  if (dw_acc != nullptr) {
    const T* col = group_col(g, x, n, gi, buf, parallel);
    gemm(false, true, g.Og, K, L, T(1), dyg, L, col, L, T(1), dw_acc + gi * g.Og * K, K);
  }
  if (dx != nullptr) {
    T* dxg = dx + (n * g.C + gi * g.Cg) * HW;
    const T* wg = w + gi * g.Og * K;
    if (g.direct()) {  // dcol is dx[n, g] itself
      gemm(true, false, K, L, g.Og, T(1), wg, K, dyg, L, T(0), dxg, L);
      return;
    }
    gemm(true, false, K, L, g.Og, T(1), wg, K, dyg, L, T(0), buf, L);
    const int64_t plane = g.kk() * L;
#pragma omp parallel for schedule(static) if (parallel && g.Cg > 1 && g.Cg * plane >= kParallelGrain)
    for (int64_t c = 0; c < g.Cg; ++c) {
      T* p = dxg + c * HW;
      std::fill(p, p + HW, T(0));
      col2im_plane(g, buf + c * plane, p);
    }
  }
}

template <typename T>
void backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x,
              const Tensor& weight, const Conv2dOptions& o) {
  if (dbias.defined()) bias_grad<T>(dbias, dy);
  if (!dx.defined() && !dweight.defined()) return;
  const Shape& xs = dx.defined() ? dx.shape() : x.shape();
  const Shape& ws = dweight.defined() ? dweight.shape() : weight.shape();
  const Geometry g = make_geometry(xs, ws, o);
  const T* xp = dweight.defined() ? x.data_ptr<T>() : nullptr;
  const T* wp = dx.defined() ? weight.data_ptr<T>() : nullptr;
  const T* dyp = dy.data_ptr<T>();
  T* dxp = dx.defined() ? dx.data_ptr<T>() : nullptr;
  const int64_t w_elems = g.O * g.K();
  const int64_t buf_elems = g.col_elems();
  const int64_t per_thread = buf_elems + (dweight.defined() ? w_elems : 0);
  const int threads = item_threads(g, per_thread, sizeof(T));
  const int64_t items = g.N * g.G;
  Tensor scratch = empty({std::max<int64_t>(per_thread * threads, 1)}, dy.options());
  T* sp = scratch.data_ptr<T>();
  if (threads > 1) {
    // Each thread: [dweight partial (if asked)][col buffer].
#pragma omp parallel num_threads(threads)
    {
      T* mine = sp + per_thread * omp_get_thread_num();
      T* part = dweight.defined() ? mine : nullptr;
      T* buf = mine + (dweight.defined() ? w_elems : 0);
      if (part != nullptr) std::fill(part, part + w_elems, T(0));
#pragma omp for schedule(static)
      for (int64_t i = 0; i < items; ++i) backward_item(g, xp, wp, dyp, part, dxp, i / g.G, i % g.G, buf, false);
    }
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
