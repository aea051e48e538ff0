// CPU kernels of the fused bidirectional long-short attention (see ops/long_short.h).
//
// Work split. Queries are cut into blocks of L tokens (whole segments of w, L ≥ 2·ext); a task
// is one (batch·head, block). All queries of a block read the keys of one band
// [c·L − ext, c·L + L + ext) plus the R global slots, so the task's keys stay in cache while
// each query's R + s logits are formed in a small per-thread buffer. Nothing of size
// n × (R + s) is stored: forward keeps the row's log-sum-exp, backward recomputes the logits.
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
// Numerics: logits and the output accumulate in the tensor's dtype (dot products of length e);
// the softmax denominator accumulates in double, so f32 rows lose ≤ ~e·2^-24 relative in the
// logits and a few ulp in the normalisation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/loops.h"
#include "ops/long_short.h"

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
  // About 64 queries per task by default: enough to amortise the band, small enough for many tasks.
  int64_t want = std::max<int64_t>(geo.block > 0 ? geo.block : 64, 2 * d.ext);
  d.L = (want + d.seg - 1) / d.seg * d.seg;
  d.nblocks = d.n > 0 ? (d.n + d.L - 1) / d.L : 0;
  return d;
}

template <typename T>
inline T dot(const T* a, const T* b, int64_t e) {
  T acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < e; ++i) acc += a[i] * b[i];
  return acc;
}

template <typename T>
inline void axpy(T* y, T a, const T* x, int64_t e) {
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

// The logits of query t (bh fixed) into lg [S]: global slots, then the window band.
template <typename T>
void row_logits(T* lg, const T* qt, const T* kb, const T* kh, const uint8_t* mb, int64_t t, const Dims& d) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < d.R; ++i) lg[i] = dot(qt, kb + i * d.e, d.e);
  const int64_t start = t / d.seg * d.seg - d.ext;
  for (int64_t u = 0; u < d.s; ++u) {
    const int64_t j = start + u;
    lg[d.R + u] = (j >= 0 && j < d.n && mb[j] != 0) ? dot(qt, kh + j * d.e, d.e) : kNegInf;
  }
}

template <typename T>
void forward_impl(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& kbar, const Tensor& vbar, const Tensor& mask, const LongShortGeometry& geo,
                  const LongShortDropout& drop) {
  const Dims d = dims_of(q, kbar, geo);
  const int64_t S = d.S(), e = d.e, tasks = d.B * d.h * d.nblocks;
  const T* Q = q.data_ptr<T>();
  const T* K = k.data_ptr<T>();
  const T* V = v.data_ptr<T>();
  const T* KB = kbar.data_ptr<T>();
  const T* VB = vbar.data_ptr<T>();
  const uint8_t* M = mask.data_ptr<uint8_t>();
  T* O = out.data_ptr<T>();
  T* LSE = lse.data_ptr<T>();
  const bool parallel = d.B * d.h * d.n * S * std::max<int64_t>(e, 1) >= kParallelGrain;
#pragma omp parallel if (parallel)
  {
    std::vector<T> lg(static_cast<size_t>(S)), f(lg.size());
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bh = task / d.nblocks, c = task % d.nblocks, b = bh / d.h;
      const T* kb = KB + bh * d.R * e;
      const T* vb = VB + bh * d.R * e;
      const T* kh = K + bh * d.n * e;
      const T* vh = V + bh * d.n * e;
      const uint8_t* mb = M + b * d.n;
      for (int64_t t = c * d.L; t < c * d.L + d.rows(c); ++t) {
        T* ot = O + (bh * d.n + t) * e;
        std::fill(ot, ot + e, T(0));
        LSE[bh * d.n + t] = std::numeric_limits<T>::infinity();  // padded query: every p is 0
        if (mb[t] == 0) continue;
        row_logits(lg.data(), Q + (bh * d.n + t) * e, kb, kh, mb, t, d);
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t i = 0; i < S; ++i) mx = std::max(mx, lg[i]);
        if (mx == -std::numeric_limits<T>::infinity()) continue;  // no visible key: zero row
        double sum = 0;
        for (int64_t i = 0; i < S; ++i) sum += std::exp(double(lg[i] - mx));
        const T l = T(double(mx) + std::log(sum));
        LSE[bh * d.n + t] = l;
        dropout_factors(f.data(), S, uint64_t((bh * d.n + t) * S), drop);
        const int64_t start = t / d.seg * d.seg - d.ext;
        for (int64_t i = 0; i < S; ++i) {
          if (f[i] == T(0) || lg[i] == -std::numeric_limits<T>::infinity()) continue;
          const T p = std::exp(lg[i] - l) * f[i];
          axpy(ot, p, i < d.R ? vb + i * e : vh + (start + i - d.R) * e, e);
        }
      }
    }
  }
}

template <typename T>
void backward_impl(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dkbar, const Tensor& dvbar,
                   const Tensor& dout, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& kbar, const Tensor& vbar, const Tensor& mask, const LongShortGeometry& geo,
                   const LongShortDropout& drop) {
  const Dims d = dims_of(q, kbar, geo);
  const int64_t S = d.S(), e = d.e, BH = d.B * d.h, nb = d.nblocks, tasks = BH * nb;
  const int64_t ext2 = 2 * d.ext, band = d.L + ext2;
  const bool want_q = dq.defined(), want_kv = dk.defined() || dv.defined();
  const bool want_bar = dkbar.defined() || dvbar.defined();
  const T* Q = q.data_ptr<T>();
  const T* K = k.data_ptr<T>();
  const T* V = v.data_ptr<T>();
  const T* KB = kbar.data_ptr<T>();
  const T* VB = vbar.data_ptr<T>();
  const T* DO = dout.data_ptr<T>();
  const T* LSE = lse.data_ptr<T>();
  const uint8_t* M = mask.data_ptr<uint8_t>();
  T* DQ = want_q ? dq.data_ptr<T>() : nullptr;
  // Window gradients go to dk/dv when asked for, else to scratch that is dropped.
  std::vector<T> scratch_k, scratch_v;
  T* DK = dk.defined() ? dk.data_ptr<T>() : nullptr;
  T* DV = dv.defined() ? dv.data_ptr<T>() : nullptr;
  if (want_kv && DK == nullptr) scratch_k.assign(size_t(BH * d.n * e), T(0)), DK = scratch_k.data();
  if (want_kv && DV == nullptr) scratch_v.assign(size_t(BH * d.n * e), T(0)), DV = scratch_v.data();
  // Edge rows of each block's band ([0, 2ext) left, then [Lc, Lc + 2ext) right), and the
  // per-block partial sums of dK̄/dV̄.
  std::vector<T> edge_k(want_kv ? size_t(tasks * 2 * ext2 * e) : 0), edge_v(edge_k.size());
  std::vector<T> bar_k(want_bar ? size_t(tasks * d.R * e) : 0), bar_v(bar_k.size());
  const bool parallel = BH * d.n * S * std::max<int64_t>(e, 1) >= kParallelGrain;

#pragma omp parallel if (parallel)
  {
    std::vector<T> lg(static_cast<size_t>(S)), f(lg.size()), ds(lg.size()), pd(lg.size());
    std::vector<T> band_k(want_kv ? size_t(band * e) : 0), band_v(band_k.size());
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bh = task / nb, c = task % nb, b = bh / d.h, Lc = d.rows(c);
      const int64_t band0 = c * d.L - d.ext;  // key index of band row 0
      const T* kb = KB + bh * d.R * e;
      const T* vb = VB + bh * d.R * e;
      const T* kh = K + bh * d.n * e;
      const T* vh = V + bh * d.n * e;
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
      for (int64_t t = c * d.L; t < c * d.L + Lc; ++t) {
        const T* qt = Q + (bh * d.n + t) * e;
        const T* got = DO + (bh * d.n + t) * e;
        T* dqt = want_q ? DQ + (bh * d.n + t) * e : nullptr;
        if (want_q) std::fill(dqt, dqt + e, T(0));
        const T l = LSE[bh * d.n + t];
        if (mb[t] == 0 || l == std::numeric_limits<T>::infinity()) continue;  // zero row, zero gradients
        row_logits(lg.data(), qt, kb, kh, mb, t, d);
        dropout_factors(f.data(), S, uint64_t((bh * d.n + t) * S), drop);
        const int64_t start = t / d.seg * d.seg - d.ext;
        // p_i, dropped probabilities pd_i, and D = Σ p_i·dp_i with dp_i = f_i·(dout·v_i).
        double D = 0;
        for (int64_t i = 0; i < S; ++i) {
          if (lg[i] == -std::numeric_limits<T>::infinity()) {  // masked: p = 0, no gradient
            lg[i] = ds[i] = pd[i] = T(0);
            continue;
          }
          const T p = std::exp(lg[i] - l);
          const T* vi = i < d.R ? vb + i * e : vh + (start + i - d.R) * e;
          const T dp = f[i] == T(0) ? T(0) : dot(got, vi, e) * f[i];
          lg[i] = p;  // reuse the buffer for p
          ds[i] = dp;
          pd[i] = p * f[i];
          D += double(p) * double(dp);
        }
        for (int64_t i = 0; i < S; ++i) {
          if (lg[i] == T(0)) continue;         // p_i = 0: no gradient through this slot
          const T g = lg[i] * (ds[i] - T(D));  // dlogit_i = p_i (dp_i − D)
          if (i < d.R) {
            if (want_q) axpy(dqt, g, kb + i * e, e);
            if (want_bar) {
              axpy(pk + i * e, g, qt, e);
              axpy(pv + i * e, pd[i], got, e);
            }
          } else {
            const int64_t j = start + i - d.R;
            if (want_q) axpy(dqt, g, kh + j * e, e);
            if (want_kv) {
              axpy(band_k.data() + (j - band0) * e, g, qt, e);
              axpy(band_v.data() + (j - band0) * e, pd[i], got, e);
            }
          }
        }
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
            dst_k = DK + (bh * d.n + j) * e, dst_v = DV + (bh * d.n + j) * e;
          }
          std::copy(band_k.data() + r * e, band_k.data() + (r + 1) * e, dst_k);
          std::copy(band_v.data() + r * e, band_v.data() + (r + 1) * e, dst_v);
        }
      }
    }

    // Second pass: keys outside every interior sum the edge rows of the blocks covering them.
    if (want_kv) {
#pragma omp for schedule(static)
      for (int64_t row = 0; row < BH * d.n; ++row) {
        const int64_t bh = row / d.n, j = row % d.n, home = j / d.L;
        if (j >= home * d.L + ext2 - d.ext && j < home * d.L + d.rows(home) - d.ext) continue;  // interior
        T* dkj = DK + row * e;
        T* dvj = DV + row * e;
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
        std::vector<T>* parts[2] = {&bar_k, &bar_v};
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

LSF_REGISTER_KERNEL(long_short_attention_kernel, DeviceType::CPU, long_short_forward);
LSF_REGISTER_KERNEL(long_short_attention_backward_kernel, DeviceType::CPU, long_short_backward);

}  // namespace lsf::cpu
