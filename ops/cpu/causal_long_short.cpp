// CPU kernels of the causal long-short attention core (ops/causal_long_short.h).
//
// Forward: OpenMP over (batch, head, tile of kQueryTile queries). Each query computes its
// nvis(t) + w logits into a per-task buffer (never a [M, Nc + w] tensor), takes one softmax and
// accumulates the output; its log-sum-exp is stored for the backward.
//
// Backward (FlashAttention-2 style recomputation; every output element is written by exactly
// one task, in a fixed order, so results do not depend on the thread count and there are no
// races):
//   pass 0: delta_t = dout_t · out_t (= Σ_slots p·dp, the softmax-backward row term);
//   pass 1, per (b, head, query tile):  dq_t, and per-task partial sums of du and dv;
//   pass 2, per (b, head, key tile):    dkw, dvw (window rows s ← queries t = s−w … s−1) and
//                                       dkc, dvc (slot σ ← queries whose chunk sees it);
//   pass 3, per (head, table-row tile): drw[j] and drc[p], summed over the batch and queries;
//   then du, dv are reduced over the pass-1 partials in task order.
// Each pass recomputes p = exp(logit − lse) and ds = p·(dout·value − delta) for its pairs, so the
// backward costs about four forward logit evaluations and O(B·h·M·e) extra memory (the
// biased queries, in double).
//
// Numerics: dot products, softmax sums and gradient sums accumulate in double for f32 and f64.
// lse is stored in the tensor dtype; for f32 that perturbs the recomputed probabilities by at
// most |lse|·2^-24 relative, the size of f32 rounding of the output itself.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lsformer/ops/causal_long_short.h"
#include "lsformer/ops/kernels/causal_long_short.h"
#include "lsformer/ops/cpu/loops.h"

namespace lsf::cpu {
namespace {

constexpr int64_t kQueryTile = 32;  // queries per forward / pass-1 task
constexpr int64_t kKeyTile = 32;    // key rows per pass-2 task, table rows per pass-3 task

// Four independent partial sums (fixed order, so still deterministic) break the add-latency
// chain that a single strict-order double accumulator would impose.
template <typename A, typename B>
inline double dot(const A* a, const B* b, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += double(a[i]) * double(b[i]);
    s1 += double(a[i + 1]) * double(b[i + 1]);
    s2 += double(a[i + 2]) * double(b[i + 2]);
    s3 += double(a[i + 3]) * double(b[i + 3]);
  }
  for (; i < n; ++i) s0 += double(a[i]) * double(b[i]);
  return (s0 + s1) + (s2 + s3);
}

// Pointers into the contiguous inputs for one (b, head) pair, and the per-query geometry.
template <typename T>
struct View {
  int64_t B, H, M, e, w, Nc, l, r, Nm;
  const T *q, *kw, *vw, *u, *v, *rw, *kc, *vc, *rc;

  View(const CausalLongShortInputs& in, const CausalLongShortGeometry& g)
      : B(in.q.size(0)), H(in.q.size(1)), M(in.q.size(2)), e(in.q.size(3)), w(in.rw.size(1)),
        Nc(in.kc.size(2)), l(g.chunk_length), r(g.rank), Nm(g.memory_chunks),
        q(in.q.data_ptr<T>()), kw(in.kw.data_ptr<T>()), vw(in.vw.data_ptr<T>()), u(in.u.data_ptr<T>()),
        v(in.v.data_ptr<T>()), rw(in.rw.data_ptr<T>()), kc(in.kc.data_ptr<T>()), vc(in.vc.data_ptr<T>()),
        rc(in.rc.data_ptr<T>()) {}

  int64_t nvis(int64_t t) const { return (Nm + t / l) * r; }
  // Offsets of row 0 for the pair bh = b·H + head.
  int64_t q_at(int64_t bh) const { return bh * M * e; }
  int64_t win_at(int64_t bh) const { return bh * (w + M) * e; }
  int64_t comp_at(int64_t bh) const { return bh * Nc * e; }

  // qu = q̂_t + u, qv = q̂_t + v for head `head`.
  void biased(int64_t bh, int64_t head, int64_t t, double* qu, double* qv) const {
    const T* qt = q + q_at(bh) + t * e;
    for (int64_t i = 0; i < e; ++i) {
      qu[i] = double(qt[i]) + double(u[head * e + i]);
      qv[i] = double(qt[i]) + double(v[head * e + i]);
    }
  }
  double window_logit(int64_t bh, int64_t head, const double* qu, const double* qv, int64_t t, int64_t j) const {
    return dot(qu, kw + win_at(bh) + (t + 1 + j) * e, e) + dot(qv, rw + (head * w + j) * e, e);
  }
  double compressed_logit(int64_t bh, int64_t head, int64_t t, int64_t sigma) const {
    const T* qt = q + q_at(bh) + t * e;
    return dot(qt, kc + comp_at(bh) + sigma * e, e) + dot(qt, rc + (head * Nc + nvis(t) - 1 - sigma) * e, e);
  }
};

// Threads only pay off when the call does enough work (the pair count times the head width).
template <typename T>
bool worth_threads(const View<T>& x) {
  return x.B * x.H * x.M * (x.Nc + x.w) * x.e >= 4 * kParallelGrain;
}

template <typename T>
void forward_typed(const Tensor& out_t, const Tensor& lse_t, const CausalLongShortInputs& in,
                   const CausalLongShortGeometry& g) {
  const View<T> x(in, g);
  T* out = out_t.data_ptr<T>();
  T* lse = lse_t.data_ptr<T>();
  const int64_t tiles = (x.M + kQueryTile - 1) / kQueryTile;
  const int64_t tasks = x.B * x.H * tiles;
  const bool parallel = worth_threads(x);
#pragma omp parallel if (parallel)
  {
    std::vector<double> logits(static_cast<size_t>(x.Nc + x.w)), qu(static_cast<size_t>(x.e)), qv(static_cast<size_t>(x.e)), acc(static_cast<size_t>(x.e));
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bh = task / tiles, head = bh % x.H, t0 = (task % tiles) * kQueryTile;
      const int64_t t1 = std::min(x.M, t0 + kQueryTile);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t nvis = x.nvis(t), n = nvis + x.w;
        x.biased(bh, head, t, qu.data(), qv.data());
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t s = 0; s < nvis; ++s) mx = std::max(mx, logits[size_t(s)] = x.compressed_logit(bh, head, t, s));
        for (int64_t j = 0; j < x.w; ++j)
          mx = std::max(mx, logits[size_t(nvis + j)] = x.window_logit(bh, head, qu.data(), qv.data(), t, j));
        double total = 0;
        for (int64_t s = 0; s < n; ++s) total += (logits[size_t(s)] = std::exp(logits[size_t(s)] - mx));
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t s = 0; s < n; ++s) {
          const double p = logits[size_t(s)] / total;
          const T* val = s < nvis ? x.vc + x.comp_at(bh) + s * x.e : x.vw + x.win_at(bh) + (t + 1 + s - nvis) * x.e;
          for (int64_t i = 0; i < x.e; ++i) acc[size_t(i)] += p * double(val[i]);
        }
        T* o = out + x.q_at(bh) + t * x.e;
        for (int64_t i = 0; i < x.e; ++i) o[i] = T(acc[size_t(i)]);
        lse[bh * x.M + t] = T(mx + std::log(total));
      }
    }
  }
}

template <typename T>
void backward_typed(const CausalLongShortInputs& d, const Tensor& dout_t, const Tensor& out_t, const Tensor& lse_t,
                    const CausalLongShortInputs& in, const CausalLongShortGeometry& g) {
  const View<T> x(in, g);
  const int64_t B = x.B, H = x.H, M = x.M, e = x.e, w = x.w, Nc = x.Nc;
  const T* dout = dout_t.data_ptr<T>();
  const T* out = out_t.data_ptr<T>();
  const T* lse = lse_t.data_ptr<T>();
  const int64_t BH = B * H;
  const bool parallel = worth_threads(x);

  // pass 0: delta_t = dout_t · out_t, and the biased queries q̂_t + u, q̂_t + v of every query
  // (each pair in the passes below would otherwise rebuild them).
  std::vector<double> delta(static_cast<size_t>(BH * M)), biased(static_cast<size_t>(BH * M * 2 * e));
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < BH * M; ++i) {
    delta[size_t(i)] = dot(dout + i * e, out + i * e, e);
    x.biased(i / M, (i / M) % H, i % M, &biased[size_t(i * 2 * e)], &biased[size_t(i * 2 * e + e)]);
  }
  auto qu_of = [&](int64_t bh, int64_t t) { return &biased[size_t((bh * M + t) * 2 * e)]; };

  // p and ds of one (query, slot) pair from its logit.
  auto prob = [&](int64_t bh, int64_t t, double logit) { return std::exp(logit - double(lse[bh * M + t])); };
  auto grad_logit = [&](int64_t bh, int64_t t, double p, const T* value) {
    return p * (dot(dout + x.q_at(bh) + t * e, value, e) - delta[size_t(bh * M + t)]);
  };

  // pass 1: dq and the partial sums of du, dv per task.
  const int64_t qtiles = (M + kQueryTile - 1) / kQueryTile;
  const int64_t qtasks = BH * qtiles;
  const bool need_bias = d.u.defined() || d.v.defined();
  std::vector<double> bias_part(need_bias ? size_t(qtasks * 2 * e) : 0, 0.0);
  if (d.q.defined() || need_bias) {
    T* dq = d.q.defined() ? d.q.data_ptr<T>() : nullptr;
#pragma omp parallel if (parallel)
    {
      std::vector<double> acc(static_cast<size_t>(e));
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < qtasks; ++task) {
        const int64_t bh = task / qtiles, head = bh % H, t0 = (task % qtiles) * kQueryTile;
        const int64_t t1 = std::min(M, t0 + kQueryTile);
        double* du_part = need_bias ? bias_part.data() + task * 2 * e : nullptr;
        double* dv_part = need_bias ? du_part + e : nullptr;
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t nvis = x.nvis(t);
          const double* qu = qu_of(bh, t);
          const double* qv = qu + e;
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t s = 0; s < nvis; ++s) {
            const double p = prob(bh, t, x.compressed_logit(bh, head, t, s));
            const double ds = grad_logit(bh, t, p, x.vc + x.comp_at(bh) + s * e);
            const T* k = x.kc + x.comp_at(bh) + s * e;
            const T* pos = x.rc + (head * Nc + nvis - 1 - s) * e;
            for (int64_t i = 0; i < e; ++i) acc[size_t(i)] += ds * (double(k[i]) + double(pos[i]));
          }
          for (int64_t j = 0; j < w; ++j) {
            const double p = prob(bh, t, x.window_logit(bh, head, qu, qv, t, j));
            const double ds = grad_logit(bh, t, p, x.vw + x.win_at(bh) + (t + 1 + j) * e);
            const T* k = x.kw + x.win_at(bh) + (t + 1 + j) * e;
            const T* pos = x.rw + (head * w + j) * e;
            for (int64_t i = 0; i < e; ++i) {
              acc[size_t(i)] += ds * (double(k[i]) + double(pos[i]));
              if (need_bias) {
                du_part[i] += ds * double(k[i]);
                dv_part[i] += ds * double(pos[i]);
              }
            }
          }
          if (dq)
            for (int64_t i = 0; i < e; ++i) dq[x.q_at(bh) + t * e + i] = T(acc[size_t(i)]);
        }
      }
    }
  }
  for (int which = 0; which < 2; ++which) {  // du (0), dv (1): fixed task order
    const Tensor& target = which == 0 ? d.u : d.v;
    if (!target.defined()) continue;
    T* dst = target.data_ptr<T>();
    for (int64_t head = 0; head < H; ++head)
      for (int64_t i = 0; i < e; ++i) {
        double acc = 0;
        for (int64_t b = 0; b < B; ++b)
          for (int64_t tile = 0; tile < qtiles; ++tile)
            acc += bias_part[size_t((((b * H + head) * qtiles + tile) * 2 + which) * e + i)];
        dst[head * e + i] = T(acc);
      }
  }

  // pass 2: key side. Window rows s (0 ≤ s < w+M) are read by queries t = s−w … s−1 at band
  // column j = s−1−t; compressed slot σ of chunk k = ⌊σ/r⌋ by the queries of block chunks
  // c ≥ k − Nm + 1, i.e. t ≥ max(0, (k − Nm + 1)·l).
  const bool need_window = d.kw.defined() || d.vw.defined();
  const bool need_comp = d.kc.defined() || d.vc.defined();
  const int64_t wtiles = need_window ? (w + M + kKeyTile - 1) / kKeyTile : 0;
  const int64_t ctiles = need_comp ? (Nc + kKeyTile - 1) / kKeyTile : 0;
  if (wtiles + ctiles > 0) {
    const int64_t per_bh = wtiles + ctiles;
#pragma omp parallel if (parallel)
    {
      std::vector<double> dk(static_cast<size_t>(e)), dv(static_cast<size_t>(e));
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < BH * per_bh; ++task) {
        const int64_t bh = task / per_bh, head = bh % H, tile = task % per_bh;
        const bool window = tile < wtiles;
        const int64_t s0 = (window ? tile : tile - wtiles) * kKeyTile;
        const int64_t s1 = std::min(window ? w + M : Nc, s0 + kKeyTile);
        for (int64_t s = s0; s < s1; ++s) {
          std::fill(dk.begin(), dk.end(), 0.0);
          std::fill(dv.begin(), dv.end(), 0.0);
          if (window) {
            const T* value = x.vw + x.win_at(bh) + s * e;
            for (int64_t t = std::max<int64_t>(0, s - w); t <= std::min(M - 1, s - 1); ++t) {
              const double* qu = qu_of(bh, t);
              const double p = prob(bh, t, x.window_logit(bh, head, qu, qu + e, t, s - 1 - t));
              const double ds = grad_logit(bh, t, p, value);
              const T* go = dout + x.q_at(bh) + t * e;
              for (int64_t i = 0; i < e; ++i) {
                dk[size_t(i)] += ds * qu[i];
                dv[size_t(i)] += p * double(go[i]);
              }
            }
          } else {
            const T* value = x.vc + x.comp_at(bh) + s * e;
            const int64_t first = std::max<int64_t>(0, (s / x.r - x.Nm + 1) * x.l);
            for (int64_t t = first; t < M; ++t) {
              const double p = prob(bh, t, x.compressed_logit(bh, head, t, s));
              const double ds = grad_logit(bh, t, p, value);
              const T* qt = x.q + x.q_at(bh) + t * e;
              const T* go = dout + x.q_at(bh) + t * e;
              for (int64_t i = 0; i < e; ++i) {
                dk[size_t(i)] += ds * double(qt[i]);
                dv[size_t(i)] += p * double(go[i]);
              }
            }
          }
          const Tensor& dkt = window ? d.kw : d.kc;
          const Tensor& dvt = window ? d.vw : d.vc;
          const int64_t at = (window ? x.win_at(bh) : x.comp_at(bh)) + s * e;
          if (dkt.defined())
            for (int64_t i = 0; i < e; ++i) dkt.data_ptr<T>()[at + i] = T(dk[size_t(i)]);
          if (dvt.defined())
            for (int64_t i = 0; i < e; ++i) dvt.data_ptr<T>()[at + i] = T(dv[size_t(i)]);
        }
      }
    }
  }

  // pass 3: position tables. rw row j is used by every query t at column j (key row t+1+j);
  // rc row p by the query t at slot σ = nvis(t) − 1 − p when that slot exists (σ ≥ 0).
  const int64_t rtiles = d.rw.defined() ? (w + kKeyTile - 1) / kKeyTile : 0;
  const int64_t ptiles = d.rc.defined() ? (Nc + kKeyTile - 1) / kKeyTile : 0;
  if (rtiles + ptiles > 0) {
    const int64_t per_head = rtiles + ptiles;
#pragma omp parallel if (parallel)
    {
      std::vector<double> acc(static_cast<size_t>(e));
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < H * per_head; ++task) {
        const int64_t head = task / per_head, tile = task % per_head;
        const bool window = tile < rtiles;
        const int64_t r0 = (window ? tile : tile - rtiles) * kKeyTile;
        const int64_t r1 = std::min(window ? w : Nc, r0 + kKeyTile);
        for (int64_t row = r0; row < r1; ++row) {
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t b = 0; b < B; ++b) {
            const int64_t bh = b * H + head;
            for (int64_t t = 0; t < M; ++t) {
              if (window) {
                const double* qu = qu_of(bh, t);
                const double* qv = qu + e;
                const double p = prob(bh, t, x.window_logit(bh, head, qu, qv, t, row));
                const double ds = grad_logit(bh, t, p, x.vw + x.win_at(bh) + (t + 1 + row) * e);
                for (int64_t i = 0; i < e; ++i) acc[size_t(i)] += ds * qv[i];
              } else {
                const int64_t sigma = x.nvis(t) - 1 - row;
                if (sigma < 0) continue;
                const double p = prob(bh, t, x.compressed_logit(bh, head, t, sigma));
                const double ds = grad_logit(bh, t, p, x.vc + x.comp_at(bh) + sigma * e);
                const T* qt = x.q + x.q_at(bh) + t * e;
                for (int64_t i = 0; i < e; ++i) acc[size_t(i)] += ds * double(qt[i]);
              }
            }
          }
          T* dst = window ? d.rw.data_ptr<T>() + (head * w + row) * e : d.rc.data_ptr<T>() + (head * Nc + row) * e;
          for (int64_t i = 0; i < e; ++i) dst[i] = T(acc[size_t(i)]);
        }
      }
    }
  }
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
