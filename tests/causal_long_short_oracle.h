// Independent dense f64 oracle of the causal long-short attention (docs/transformer-ls.md §3.3,
// §9 "dense reference"): plain per-query loops that enumerate each query's slots straight from
// the text — the compressed slots (chunk k, rank m) with the chunk distance D = Nm + c − k, the
// mask D ≤ 0 and the position value D·r − 1 − m, then the w window keys at absolute positions
// t−w+1 … t with distances δ = w−1−j — and one plain softmax over the list. It shares no code
// with the op or the module (no tiles, no index tensors, no engine ops: only to_vector).
#pragma once

#include <cmath>
#include <vector>

#include "lsformer/models/attention/causal_long_short.h"
#include "lsformer/ops/causal_long_short.h"

namespace lsf::test::causal_ls {

using Vec = std::vector<double>;

inline double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Softmax over `logits` applied to the rows `values` (each e wide) → out (e wide).
inline void attend(const Vec& logits, const std::vector<const double*>& values, int64_t e, double* out) {
  double mx = -INFINITY;
  for (double z : logits) mx = std::max(mx, z);
  double total = 0;
  for (double z : logits) total += std::exp(z - mx);
  for (int64_t i = 0; i < e; ++i) out[i] = 0;
  for (size_t s = 0; s < logits.size(); ++s) {
    const double p = std::exp(logits[s] - mx) / total;
    for (int64_t i = 0; i < e; ++i) out[i] += p * values[s][i];
  }
}

// The attention core (the op's contract, ops/causal_long_short.h) → [B, h, M, e] row-major.
inline Vec op_oracle(const CausalLongShortInputs& in, const CausalLongShortGeometry& g) {
  const int64_t B = in.q.size(0), H = in.q.size(1), M = in.q.size(2), e = in.q.size(3);
  const int64_t w = in.rw.size(1), l = g.chunk_length, r = g.rank, Nm = g.memory_chunks;
  const int64_t Nch = Nm + M / l, Nc = Nch * r;
  const Vec q = in.q.to_vector<double>(), kw = in.kw.to_vector<double>(), vw = in.vw.to_vector<double>();
  const Vec u = in.u.to_vector<double>(), v = in.v.to_vector<double>(), rw = in.rw.to_vector<double>();
  const Vec kc = in.kc.to_vector<double>(), vc = in.vc.to_vector<double>(), rc = in.rc.to_vector<double>();
  Vec out(static_cast<size_t>(B * H * M * e));
  Vec qu(static_cast<size_t>(e)), qv(static_cast<size_t>(e));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t hd = 0; hd < H; ++hd)
      for (int64_t t = 0; t < M; ++t) {
        const double* qt = &q[size_t(((b * H + hd) * M + t) * e)];
        const int64_t c = t / l;
        Vec logits;
        std::vector<const double*> values;
        for (int64_t k = 0; k < Nch; ++k)
          for (int64_t m = 0; m < r; ++m) {
            const int64_t D = Nm + c - k;
            if (D <= 0) continue;  // own and later chunks are hidden
            const int64_t sigma = k * r + m, pos = D * r - 1 - m;
            const size_t at = size_t(((b * H + hd) * Nc + sigma) * e);
            logits.push_back(dot(qt, &kc[at], e) + dot(qt, &rc[size_t((hd * Nc + pos) * e)], e));
            values.push_back(&vc[at]);
          }
        for (int64_t i = 0; i < e; ++i) {
          qu[size_t(i)] = qt[i] + u[size_t(hd * e + i)];
          qv[size_t(i)] = qt[i] + v[size_t(hd * e + i)];
        }
        for (int64_t j = 0; j < w; ++j) {
          // Absolute position t − δ in block coordinates, δ = w−1−j; row (t − δ) + w of
          // [last w memory rows ; block].
          const int64_t delta = w - 1 - j, row = t - delta + w;
          const size_t at = size_t(((b * H + hd) * (w + M) + row) * e);
          logits.push_back(dot(qu.data(), &kw[at], e) + dot(qv.data(), &rw[size_t((hd * w + j) * e)], e));
          values.push_back(&vw[at]);
        }
        attend(logits, values, e, &out[size_t(((b * H + hd) * M + t) * e)]);
      }
  return out;
}

// y = W·x + b for one row (W [out, in] row-major).
inline Vec affine(const Vec& W, const Vec* b, const double* x, int64_t in, int64_t out) {
  Vec y(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) y[size_t(o)] = dot(&W[size_t(o * in)], x, in) + (b ? (*b)[size_t(o)] : 0.0);
  return y;
}

inline Vec layer_norm_row(const Vec& x, const Vec& gamma, const Vec& beta) {
  const size_t n = x.size();
  double mean = 0, var = 0;
  for (double a : x) mean += a;
  mean /= double(n);
  for (double a : x) var += (a - mean) * (a - mean);
  var /= double(n);
  Vec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = (x[i] - mean) / std::sqrt(var + 1e-5) * gamma[i] + beta[i];
  return y;
}

inline Vec sincos(double p, int64_t d) {
  Vec s(static_cast<size_t>(d));
  for (int64_t k = 0; k < d / 2; ++k) {
    const double f = std::pow(10000.0, -2.0 * double(k) / double(d));
    s[size_t(k)] = std::sin(p * f);
    s[size_t(d / 2 + k)] = std::cos(p * f);
  }
  return s;
}

// The whole module (§3.3 steps 1–11): x [B, M, d], xm [B, C, d] → [B, M, d] row-major.
inline Vec module_oracle(const nn::CausalLongShortAttention& a, const Tensor& x_t, const Tensor& xm_t) {
  const auto& o = a.options();
  const int64_t B = x_t.size(0), M = x_t.size(1), C = xm_t.size(1), d = o.dim, H = o.heads, e = d / H;
  const int64_t l = o.chunk_length, r = o.rank, w = o.window, Nm = C / l, Nb = M / l;
  auto V = [](const Tensor& t) { return t.to_vector<double>(); };
  auto Bias = [](const std::shared_ptr<nn::Linear>& lin) { return lin->bias.defined() ? lin->bias.to_vector<double>() : Vec{}; };
  const Vec Wq = V(a.proj_query->weight), Wk = V(a.proj_key->weight), Wv = V(a.proj_val->weight), Wo = V(a.proj_out->weight);
  const Vec bq = Bias(a.proj_query), bk = Bias(a.proj_key), bv = Bias(a.proj_val), bo = Bias(a.proj_out);
  const Vec Wp = V(a.dconv_1->weight), bp = V(a.dconv_1->bias), Wr = V(a.r_net->weight);
  const Vec Wrc = V(a.r_net_chunk->weight), brc = V(a.r_net_chunk->bias);
  const Vec u = V(a.r_w_bias), v = V(a.r_r_bias);
  const Vec gL = V(a.dual_ln_win->weight), bL = V(a.dual_ln_win->bias);
  const Vec gG = V(a.dual_ln_dproj->weight), bG = V(a.dual_ln_dproj->bias);
  const bool has_bias = !bq.empty();
  auto lin = [&](const Vec& W, const Vec& b, const double* x) { return affine(W, has_bias ? &b : nullptr, x, d, d); };
  const Vec X = V(x_t), XM = V(xm_t);
  Vec out(static_cast<size_t>(B * M * d));
  for (int64_t b = 0; b < B; ++b) {
    const double* xb = &X[size_t(b * M * d)];
    const double* mb = &XM[size_t(b * C * d)];
    // Chunk weights P[chunk][head·r + m][τ] over the l tokens of a chunk, from rows `src`.
    auto weights = [&](const double* src, int64_t chunk) {
      std::vector<Vec> logit(size_t(H * r), Vec(static_cast<size_t>(l)));
      for (int64_t tau = 0; tau < l; ++tau) {
        Vec s = affine(Wp, &bp, src + (chunk * l + tau) * d, d, H * r);
        for (int64_t f = 0; f < H * r; ++f) logit[size_t(f)][size_t(tau)] = s[size_t(f)];
      }
      for (Vec& row : logit) {
        double mx = -INFINITY, tot = 0;
        for (double z : row) mx = std::max(mx, z);
        for (double& z : row) tot += (z = std::exp(z - mx));
        for (double& z : row) z /= tot;
      }
      return logit;
    };
    std::vector<Vec> Kbar, Vbar;  // slot σ = chunk·r + m, memory chunks first, d wide (LN_G applied)
    // Memory path: compress the LN1 head slices, then W_k / W_v, then LN_G.
    for (int64_t k = 0; k < Nm; ++k) {
      auto P = weights(mb, k);
      for (int64_t m = 0; m < r; ++m) {
        Vec z(size_t(d), 0.0);
        for (int64_t hd = 0; hd < H; ++hd)
          for (int64_t tau = 0; tau < l; ++tau)
            for (int64_t i = 0; i < e; ++i)
              z[size_t(hd * e + i)] += P[size_t(hd * r + m)][size_t(tau)] * mb[(k * l + tau) * d + hd * e + i];
        Kbar.push_back(layer_norm_row(lin(Wk, bk, z.data()), gG, bG));
        Vbar.push_back(layer_norm_row(lin(Wv, bv, z.data()), gG, bG));
      }
    }
    // Block path: W_k / W_v first, then compress the head slices, then LN_G.
    std::vector<Vec> Kb, Vb;
    for (int64_t t = 0; t < M; ++t) {
      Kb.push_back(lin(Wk, bk, xb + t * d));
      Vb.push_back(lin(Wv, bv, xb + t * d));
    }
    for (int64_t k = 0; k < Nb; ++k) {
      auto P = weights(xb, k);
      for (int64_t m = 0; m < r; ++m) {
        Vec zk(size_t(d), 0.0), zv(size_t(d), 0.0);
        for (int64_t hd = 0; hd < H; ++hd)
          for (int64_t tau = 0; tau < l; ++tau)
            for (int64_t i = 0; i < e; ++i) {
              const double p = P[size_t(hd * r + m)][size_t(tau)];
              zk[size_t(hd * e + i)] += p * Kb[size_t(k * l + tau)][size_t(hd * e + i)];
              zv[size_t(hd * e + i)] += p * Vb[size_t(k * l + tau)][size_t(hd * e + i)];
            }
        Kbar.push_back(layer_norm_row(zk, gG, bG));
        Vbar.push_back(layer_norm_row(zv, gG, bG));
      }
    }
    // Window keys/values by absolute position a ∈ [−w, M): memory row C + a for a < 0; LN_L.
    auto window_row = [&](int64_t a, bool key) {
      const Vec raw = a < 0 ? lin(key ? Wk : Wv, key ? bk : bv, mb + (C + a) * d) : (key ? Kb : Vb)[size_t(a)];
      return layer_norm_row(raw, gL, bL);
    };
    Vec ctx(static_cast<size_t>(M * d));
    for (int64_t t = 0; t < M; ++t) {
      const Vec qfull = lin(Wq, bq, xb + t * d);
      const int64_t c = t / l;
      for (int64_t hd = 0; hd < H; ++hd) {
        Vec qh(static_cast<size_t>(e));
        for (int64_t i = 0; i < e; ++i) qh[size_t(i)] = qfull[size_t(hd * e + i)] / std::sqrt(double(e));
        Vec logits;
        std::vector<Vec> vals;
        for (int64_t k = 0; k < Nm + Nb; ++k)
          for (int64_t m = 0; m < r; ++m) {
            const int64_t D = Nm + c - k;
            if (D <= 0) continue;
            const Vec pos = affine(Wrc, &brc, sincos(double(D * r - 1 - m), d).data(), d, d);
            const Vec& kbar = Kbar[size_t(k * r + m)];
            logits.push_back(dot(qh.data(), &kbar[size_t(hd * e)], e) + dot(qh.data(), &pos[size_t(hd * e)], e));
            vals.emplace_back(Vbar[size_t(k * r + m)].begin() + hd * e, Vbar[size_t(k * r + m)].begin() + (hd + 1) * e);
          }
        for (int64_t delta = w - 1; delta >= 0; --delta) {
          const Vec key = window_row(t - delta, true), val = window_row(t - delta, false);
          const Vec R = affine(Wr, nullptr, sincos(double(delta), d).data(), d, d);
          double z = 0;
          for (int64_t i = 0; i < e; ++i)
            z += (qh[size_t(i)] + u[size_t(hd * e + i)]) * key[size_t(hd * e + i)] +
                 (qh[size_t(i)] + v[size_t(hd * e + i)]) * R[size_t(hd * e + i)];
          logits.push_back(z);
          vals.emplace_back(val.begin() + hd * e, val.begin() + (hd + 1) * e);
        }
        std::vector<const double*> ptrs;
        for (const Vec& vv : vals) ptrs.push_back(vv.data());
        attend(logits, ptrs, e, &ctx[size_t(t * d + hd * e)]);
      }
    }
    for (int64_t t = 0; t < M; ++t) {
      const Vec y = lin(Wo, bo, &ctx[size_t(t * d)]);
      for (int64_t i = 0; i < d; ++i) out[size_t((b * M + t) * d + i)] = y[size_t(i)];
    }
  }
  return out;
}

}  // namespace lsf::test::causal_ls
