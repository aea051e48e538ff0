// CPU kernels of the classification losses: fused cross-entropy (log-softmax + NLL + label
// smoothing) forward and backward, and nll_loss forward and backward.
//
// Layout: input [N, C, K], target [N, K] (K = 1 for [N, C] input). With K == 1 each sample's
// logits are one contiguous row; otherwise tiles of up to kColumnTile adjacent positions k are
// processed together (per-position running max/sums in small arrays, the vectorised loop
// along the contiguous k), as in the softmax kernels.
//
// Cross-entropy forward, per element: m = max_c x_c, lse = m + log Σ_c exp(x_c − m) (saved),
//   loss = lse − (1 − ε)·x_t − (ε/C)·Σ_c x_c,
// which is (1 − ε)·(−log p_t) + (ε/C)·Σ_c (−log p_c) rewritten so no log-probability is
// stored. Backward: dx_c = g·(exp(x_c − lse) − (1 − ε)·[c = t] − ε/C), g = scale·dloss.
//
// Numerics: the row sums run in the input dtype (f32: relative error about (C/8 + 4)·2^-24,
// plus 2^-23 per vexp term (≤ 2 ulp, ops/cpu/unary_math.h)); each element's loss is formed in f64 from those and summed
// in f64 over the batch, per chunk of rows and then across chunks in order (deterministic
// for a given thread count). Element losses are rounded once to the input dtype.
#include <limits>
#include <vector>

#include "lsformer/ops/cpu/rowwise.h"
#include "lsformer/ops/loss.h"
#include "lsformer/ops/kernels/loss.h"

namespace lsf::cpu {
namespace {

struct Geometry {
  int64_t N = 1, C = 1, K = 1;
};

Geometry geometry(const Tensor& input) { return {input.shape()[0], input.shape()[1], input.shape()[2]}; }

// Label smoothing as the two coefficients of the target distribution.
struct Smoothing {
  double keep;       // 1 − ε: weight of the one-hot target
  double uniform;    // ε / C: weight of every class
  bool on;           // ε > 0 (otherwise Σ x_c, which may be −inf for masked logits, is unused)
};

Smoothing smoothing(double eps, int64_t C) { return {1.0 - eps, C > 0 ? eps / double(C) : 0.0, eps > 0}; }

// Folds one element's target into the chunk's stats; true when the element counts (its
// target is a class, not ignore_index and not out of range).
template <typename I>
inline bool classify(ClassLossStats& st, I t, int64_t flat, int64_t C, int64_t ignore_index) {
  if (int64_t(t) == ignore_index) return false;
  if (t < 0 || int64_t(t) >= C) {
    if (st.bad_index < 0) {
      st.bad_index = flat;
      st.bad_value = int64_t(t);
    }
    return false;
  }
  ++st.count;
  return true;
}

ClassLossStats combine(const std::vector<ClassLossStats>& parts) {
  ClassLossStats all;
  for (const ClassLossStats& p : parts) {
    all.sum += p.sum;
    all.count += p.count;
    if (all.bad_index < 0 && p.bad_index >= 0) {
      all.bad_index = p.bad_index;
      all.bad_value = p.bad_value;
    }
  }
  return all;
}

// ---- cross-entropy forward ----

// loss (or null), lse [N]; x [N, C]; target [N]. Rows [begin, end).
template <typename T, typename I>
LSF_SIMD_CLONES void ce_forward_rows(ClassLossStats& out, T* loss, T* lse, const T* x, const I* target, int64_t C,
                                     int64_t ignore_index, Smoothing sm, int64_t begin, int64_t end) {
  ClassLossStats st;  // local: chunks' stats sit side by side in memory (no false sharing)
  for (int64_t r = begin; r < end; ++r) {
    const T* xr = x + r * C;
    T m = -std::numeric_limits<T>::infinity(), sx = 0;
#pragma omp simd reduction(max : m) reduction(+ : sx)
    for (int64_t c = 0; c < C; ++c) {
      m = xr[c] > m ? xr[c] : m;
      sx += xr[c];
    }
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < C; ++c) s += vexp(T(xr[c] - m));
    const double l = double(m) + std::log(double(s));
    lse[r] = T(l);
    double v = 0;
    if (classify(st, target[r], r, C, ignore_index)) {
      v = l - sm.keep * double(xr[target[r]]);
      if (sm.on) v -= sm.uniform * double(sx);
      st.sum += v;
    }
    if (loss) loss[r] = T(v);
  }
  out = st;
}

// loss (or null), lse [N, K]; x [N, C, K]; target [N, K]. Tasks [begin, end) enumerate
// (sample, tile of positions).
template <typename T, typename I>
LSF_SIMD_CLONES void ce_forward_columns(ClassLossStats& out, T* loss, T* lse, const T* x, const I* target, int64_t C,
                                        int64_t K, int64_t ignore_index, Smoothing sm, int64_t tile, int64_t begin,
                                        int64_t end) {
  const int64_t tiles = (K + tile - 1) / tile;
  ClassLossStats st;  // local, as in ce_forward_rows
  T m[kColumnTile], sx[kColumnTile], s[kColumnTile];
  for (int64_t task = begin; task < end; ++task) {
    const int64_t n = task / tiles, j0 = (task % tiles) * tile;
    const int64_t w = std::min(tile, K - j0);
    const T* xb = x + n * C * K + j0;
    for (int64_t j = 0; j < w; ++j) {
      m[j] = -std::numeric_limits<T>::infinity();
      sx[j] = s[j] = 0;
    }
    for (int64_t c = 0; c < C; ++c) {
      const T* xc = xb + c * K;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) {
        m[j] = xc[j] > m[j] ? xc[j] : m[j];
        sx[j] += xc[j];
      }
    }
    for (int64_t c = 0; c < C; ++c) {
      const T* xc = xb + c * K;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) s[j] += vexp(T(xc[j] - m[j]));
    }
    for (int64_t j = 0; j < w; ++j) {
      const int64_t flat = n * K + j0 + j;
      const double l = double(m[j]) + std::log(double(s[j]));
      lse[flat] = T(l);
      double v = 0;
      const I t = target[flat];
      if (classify(st, t, flat, C, ignore_index)) {
        v = l - sm.keep * double(xb[int64_t(t) * K + j]);
        if (sm.on) v -= sm.uniform * double(sx[j]);
        st.sum += v;
      }
      if (loss) loss[flat] = T(v);
    }
  }
  out = st;
}

ClassLossStats cross_entropy_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                                     const Tensor& target, int64_t ignore_index, double label_smoothing) {
  const Geometry g = geometry(logits);
  const Smoothing sm = smoothing(label_smoothing, g.C);
  ClassLossStats result;
  dispatch_float(logits.dtype(), "cross_entropy", [&]<typename T>() {
    dispatch_index(target.dtype(), "cross_entropy", [&]<typename I>() {
      T* pl = loss.defined() ? loss.data_ptr<T>() : nullptr;
      T* plse = lse.data_ptr<T>();
      const T* px = logits.data_ptr<T>();
      const I* pt = target.data_ptr<I>();
      const int64_t tile = column_tile(g.N, g.K);
      const int64_t tasks = g.K == 1 ? g.N : g.N * ((g.K + tile - 1) / tile);
      const int64_t chunks = chunk_count(tasks, g.C * std::min(g.K, tile));
      std::vector<ClassLossStats> parts(chunks);
      for_each_chunk(tasks, chunks, [&](int64_t c, int64_t b, int64_t e) {
        if (g.K == 1) ce_forward_rows<T, I>(parts[c], pl, plse, px, pt, g.C, ignore_index, sm, b, e);
        else ce_forward_columns<T, I>(parts[c], pl, plse, px, pt, g.C, g.K, ignore_index, sm, tile, b, e);
      });
      result = combine(parts);
    });
  });
  return result;
}

// ---- cross-entropy backward ----

// dx, x [N, C]; lse, target [N]; dloss[r·gstride]. Rows [begin, end).
template <typename T, typename I>
LSF_SIMD_CLONES void ce_backward_rows(T* dx, const T* dloss, int64_t gstride, const T* x, const T* lse,
                                      const I* target, int64_t C, int64_t ignore_index, Smoothing sm, double scale,
                                      int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    T* dxr = dx + r * C;
    const int64_t t = int64_t(target[r]);
    if (t == ignore_index || t < 0 || t >= C) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) dxr[c] = 0;
      continue;
    }
    const T* xr = x + r * C;
    const T g = T(scale * double(dloss[r * gstride]));
    const T a = T(double(g) * sm.uniform), l = lse[r];
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dxr[c] = g * vexp(T(xr[c] - l)) - a;
    dxr[t] -= T(double(g) * sm.keep);
  }
}

// dx, x [N, C, K]; lse, target [N, K]. Tasks as in ce_forward_columns.
template <typename T, typename I>
LSF_SIMD_CLONES void ce_backward_columns(T* dx, const T* dloss, int64_t gstride, const T* x, const T* lse,
                                         const I* target, int64_t C, int64_t K, int64_t ignore_index, Smoothing sm,
                                         double scale, int64_t tile, int64_t begin, int64_t end) {
  const int64_t tiles = (K + tile - 1) / tile;
  T g[kColumnTile], a[kColumnTile], l[kColumnTile];
  for (int64_t task = begin; task < end; ++task) {
    const int64_t n = task / tiles, j0 = (task % tiles) * tile;
    const int64_t w = std::min(tile, K - j0);
    const int64_t base = n * C * K + j0;
    for (int64_t j = 0; j < w; ++j) {
      const int64_t flat = n * K + j0 + j;
      const int64_t t = int64_t(target[flat]);
      const bool counted = t != ignore_index && t >= 0 && t < C;
      // An ignored position gets g = a = 0 and lse = +inf, so exp(x − lse)·g = 0.
      g[j] = counted ? T(scale * double(dloss[flat * gstride])) : T(0);
      a[j] = T(double(g[j]) * sm.uniform);
      l[j] = counted ? lse[flat] : std::numeric_limits<T>::infinity();
    }
    for (int64_t c = 0; c < C; ++c) {
      const T* xc = x + base + c * K;
      T* dxc = dx + base + c * K;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) dxc[j] = g[j] * vexp(T(xc[j] - l[j])) - a[j];
    }
    for (int64_t j = 0; j < w; ++j) {
      const int64_t t = int64_t(target[n * K + j0 + j]);
      if (t != ignore_index && t >= 0 && t < C) dx[base + t * K + j] -= T(double(g[j]) * sm.keep);
    }
  }
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits, const Tensor& lse,
                            const Tensor& target, int64_t ignore_index, double label_smoothing, double scale) {
  const Geometry g = geometry(logits);
  const Smoothing sm = smoothing(label_smoothing, g.C);
  const int64_t gstride = dloss.numel() == 1 ? 0 : 1;
  dispatch_float(logits.dtype(), "cross_entropy backward", [&]<typename T>() {
    dispatch_index(target.dtype(), "cross_entropy backward", [&]<typename I>() {
      T* pdx = dlogits.data_ptr<T>();
      const T* pg = dloss.data_ptr<T>();
      const T* px = logits.data_ptr<T>();
      const T* plse = lse.data_ptr<T>();
      const I* pt = target.data_ptr<I>();
      if (g.K == 1) {
        parallel_rows(g.N, g.C, [&](int64_t b, int64_t e) {
          ce_backward_rows<T, I>(pdx, pg, gstride, px, plse, pt, g.C, ignore_index, sm, scale, b, e);
        });
      } else {
        const int64_t tile = column_tile(g.N, g.K);
        const int64_t tiles = (g.K + tile - 1) / tile;
        parallel_rows(g.N * tiles, g.C * std::min(g.K, tile), [&](int64_t b, int64_t e) {
          ce_backward_columns<T, I>(pdx, pg, gstride, px, plse, pt, g.C, g.K, ignore_index, sm, scale, tile, b, e);
        });
      }
    });
  });
}

// ---- nll_loss ----

ClassLossStats nll_forward(const Tensor& loss, const Tensor& log_probs, const Tensor& target, int64_t ignore_index) {
  const Geometry g = geometry(log_probs);
  ClassLossStats result;
  dispatch_float(log_probs.dtype(), "nll_loss", [&]<typename T>() {
    dispatch_index(target.dtype(), "nll_loss", [&]<typename I>() {
      T* pl = loss.defined() ? loss.data_ptr<T>() : nullptr;
      const T* px = log_probs.data_ptr<T>();
      const I* pt = target.data_ptr<I>();
      const int64_t elements = g.N * g.K;
      const int64_t chunks = chunk_count(elements, 1);
      std::vector<ClassLossStats> parts(chunks);
      for_each_chunk(elements, chunks, [&](int64_t c, int64_t b, int64_t e) {
        ClassLossStats st;  // local, as in ce_forward_rows
        for (int64_t flat = b; flat < e; ++flat) {
          const I t = pt[flat];
          double v = 0;
          if (classify(st, t, flat, g.C, ignore_index)) {
            const int64_t n = flat / g.K, k = flat % g.K;
            v = -double(px[(n * g.C + int64_t(t)) * g.K + k]);
            st.sum += v;
          }
          if (pl) pl[flat] = T(v);
        }
        parts[c] = st;
      });
      result = combine(parts);
    });
  });
  return result;
}

void nll_backward(const Tensor& dlog_probs, const Tensor& dloss, const Tensor& target, int64_t ignore_index,
                  double scale) {
  const Geometry g = geometry(dlog_probs);
  const int64_t gstride = dloss.numel() == 1 ? 0 : 1;
  dispatch_float(dlog_probs.dtype(), "nll_loss backward", [&]<typename T>() {
    dispatch_index(target.dtype(), "nll_loss backward", [&]<typename I>() {
      T* pdx = dlog_probs.data_ptr<T>();
      const T* pg = dloss.data_ptr<T>();
      const I* pt = target.data_ptr<I>();
      // A sample's C·K gradient block is written only by the task of that sample.
      parallel_rows(g.N, g.C * g.K, [&](int64_t b, int64_t e) {
        std::fill(pdx + b * g.C * g.K, pdx + e * g.C * g.K, T(0));
        for (int64_t n = b; n < e; ++n)
          for (int64_t k = 0; k < g.K; ++k) {
            const int64_t flat = n * g.K + k, t = int64_t(pt[flat]);
            if (t != ignore_index && t >= 0 && t < g.C)
              pdx[(n * g.C + t) * g.K + k] = T(-scale * double(pg[flat * gstride]));
          }
      });
    });
  });
}

}  // namespace

LSF_REGISTER_KERNEL(cross_entropy_forward_kernel, DeviceType::CPU, cross_entropy_forward);
LSF_REGISTER_KERNEL(cross_entropy_backward_kernel, DeviceType::CPU, cross_entropy_backward);
LSF_REGISTER_KERNEL(nll_loss_forward_kernel, DeviceType::CPU, nll_forward);
LSF_REGISTER_KERNEL(nll_loss_backward_kernel, DeviceType::CPU, nll_backward);

}  // namespace lsf::cpu
