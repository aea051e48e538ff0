// Independent dense O(n²) oracle of the bidirectional long-short attention (docs/transformer-ls.md
// §2.3, §9): plain double loops over std::vector, sharing no code with the engine. For every
// query it enumerates its key slots explicitly (CLS, projected slots, then window positions by
// the index arithmetic j = ⌊t/w⌋·w − ext + u), forms the logits, applies one softmax over that
// list and sums the values.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace lsf::oracle {

using Vec = std::vector<double>;

// Core (steps 7–12 without dropout). q, k, v [B, h, n, e], kbar, vbar [B, h, R, e], real [B, n]
// (empty: all real). window w ≥ 0; self_slot: w = 0 with the query's own key as the one window
// slot. Returns the context [B, h, n, e]; `probs` (if not null) receives, per row (b, h, t), the
// probabilities of its slots in the order [global | window] (window slots outside the sequence
// or padded included, with probability 0).
struct Core {
  int64_t B, h, n, e, R, w;
  bool self_slot = false;
};

inline int64_t oracle_ext(int64_t w) { return w > 0 ? std::max<int64_t>(w / 2, 1) : 0; }

inline Vec core(const Core& c, const Vec& q, const Vec& k, const Vec& v, const Vec& kbar, const Vec& vbar,
                const std::vector<bool>& real, std::vector<Vec>* probs = nullptr) {
  const int64_t ext = oracle_ext(c.w), span = c.w > 0 ? c.w + 2 * ext : (c.self_slot ? 1 : 0);
  Vec out(size_t(c.B * c.h * c.n * c.e), 0.0);
  auto is_real = [&](int64_t b, int64_t j) { return real.empty() || real[size_t(b * c.n + j)]; };
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t hh = 0; hh < c.h; ++hh)
      for (int64_t t = 0; t < c.n; ++t) {
        const int64_t bh = b * c.h + hh;
        const double* qt = &q[size_t((bh * c.n + t) * c.e)];
        // The slot list: (key row, value row) pointers, or null for a masked slot.
        std::vector<const double*> keys, values;
        for (int64_t i = 0; i < c.R; ++i) {
          keys.push_back(&kbar[size_t((bh * c.R + i) * c.e)]);
          values.push_back(&vbar[size_t((bh * c.R + i) * c.e)]);
        }
        if (c.w > 0) {
          const int64_t g = t / c.w;
          for (int64_t u = 0; u < span; ++u) {
            const int64_t j = g * c.w - ext + u;
            const bool ok = j >= 0 && j < c.n && is_real(b, j);
            keys.push_back(ok ? &k[size_t((bh * c.n + j) * c.e)] : nullptr);
            values.push_back(ok ? &v[size_t((bh * c.n + j) * c.e)] : nullptr);
          }
        } else if (c.self_slot) {
          keys.push_back(&k[size_t((bh * c.n + t) * c.e)]);
          values.push_back(&v[size_t((bh * c.n + t) * c.e)]);
        }
        Vec p(keys.size(), 0.0);
        if (is_real(b, t)) {  // padded queries keep a zero row
          double mx = -std::numeric_limits<double>::infinity();
          for (size_t i = 0; i < keys.size(); ++i) {
            if (keys[i] == nullptr) continue;
            double l = 0;
            for (int64_t f = 0; f < c.e; ++f) l += qt[f] * keys[i][f];
            p[i] = l;
            mx = std::max(mx, l);
          }
          double z = 0;
          for (size_t i = 0; i < keys.size(); ++i)
            if (keys[i] != nullptr) z += std::exp(p[i] - mx);
          for (size_t i = 0; i < keys.size(); ++i) p[i] = keys[i] != nullptr ? std::exp(p[i] - mx) / z : 0.0;
          double* ot = &out[size_t((bh * c.n + t) * c.e)];
          for (size_t i = 0; i < keys.size(); ++i)
            if (values[i] != nullptr)
              for (int64_t f = 0; f < c.e; ++f) ot[f] += p[i] * values[i][f];
        }
        if (probs != nullptr) probs->push_back(p);
      }
  return out;
}

// The whole layer (§2.3 steps 1–14) from its parameters, all double, PyTorch layouts
// (Linear weight [out, in]). x [B, n, d], real [B, n] (empty: all real), cls [B, d] (empty: none).
struct Params {
  Vec Wq, bq, Wk, bk, Wv, bv, Wo, bo, Wp, bp, ln_l_w, ln_l_b, ln_s_w, ln_s_b;
};
struct Layer {
  int64_t B, n, d, h, w, r;
};

// y[m, out] = x[m, in]·W[out, in] + b[out]
inline Vec linear(const Vec& x, int64_t m, int64_t in, int64_t out, const Vec& W, const Vec& b) {
  Vec y(size_t(m * out));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b[size_t(o)];
      for (int64_t f = 0; f < in; ++f) acc += x[size_t(i * in + f)] * W[size_t(o * in + f)];
      y[size_t(i * out + o)] = acc;
    }
  return y;
}

inline Vec layer_norm(const Vec& x, int64_t m, int64_t d, const Vec& g, const Vec& b, double eps = 1e-5) {
  Vec y(x.size());
  for (int64_t i = 0; i < m; ++i) {
    double mean = 0, var = 0;
    for (int64_t f = 0; f < d; ++f) mean += x[size_t(i * d + f)];
    mean /= double(d);
    for (int64_t f = 0; f < d; ++f) var += (x[size_t(i * d + f)] - mean) * (x[size_t(i * d + f)] - mean);
    var /= double(d);
    for (int64_t f = 0; f < d; ++f)
      y[size_t(i * d + f)] = (x[size_t(i * d + f)] - mean) / std::sqrt(var + eps) * g[size_t(f)] + b[size_t(f)];
  }
  return y;
}

// [B, m, h·e] (token-major) → [B, h, m, e]
inline Vec heads_first(const Vec& x, int64_t B, int64_t m, int64_t h, int64_t e) {
  Vec y(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < m; ++t)
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t f = 0; f < e; ++f)
          y[size_t(((b * h + hh) * m + t) * e + f)] = x[size_t(((b * m + t) * h + hh) * e + f)];
  return y;
}
inline Vec tokens_first(const Vec& x, int64_t B, int64_t m, int64_t h, int64_t e) {
  Vec y(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < m; ++t)
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t f = 0; f < e; ++f)
          y[size_t(((b * m + t) * h + hh) * e + f)] = x[size_t(((b * h + hh) * m + t) * e + f)];
  return y;
}

// Returns y [B, n (+1 with CLS), d].
inline Vec layer(const Layer& L, const Params& P, const Vec& x, const std::vector<bool>& real, const Vec& cls) {
  const int64_t B = L.B, n = L.n, d = L.d, h = L.h, e = d / h, r = L.r;
  const bool has_cls = !cls.empty();
  const double scale = 1.0 / std::sqrt(double(e));
  auto is_real = [&](int64_t b, int64_t j) { return real.empty() || real[size_t(b * n + j)]; };
  Vec q = heads_first(linear(x, B * n, d, d, P.Wq, P.bq), B, n, h, e);
  for (double& a : q) a *= scale;
  Vec k = heads_first(layer_norm(linear(x, B * n, d, d, P.Wk, P.bk), B * n, d, P.ln_l_w, P.ln_l_b), B, n, h, e);
  Vec v = heads_first(layer_norm(linear(x, B * n, d, d, P.Wv, P.bv), B * n, d, P.ln_l_w, P.ln_l_b), B, n, h, e);
  const int64_t R = r + (has_cls ? 1 : 0);
  Vec kbar(size_t(B * R * d), 0.0), vbar(size_t(B * R * d), 0.0);  // token-major [B, R, h·e]
  Vec qc, kc, vc;
  if (has_cls) {
    qc = linear(cls, B, d, d, P.Wq, P.bq);
    for (double& a : qc) a *= scale;
    kc = linear(cls, B, d, d, P.Wk, P.bk);
    vc = linear(cls, B, d, d, P.Wv, P.bv);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t f = 0; f < d; ++f) {
        kbar[size_t(b * R * d + f)] = kc[size_t(b * d + f)];
        vbar[size_t(b * R * d + f)] = vc[size_t(b * d + f)];
      }
  }
  if (r > 0) {
    Vec s = linear(x, B * n, d, h * r, P.Wp, P.bp);  // [B, n, h·r], column head·r + slot
    for (int64_t b = 0; b < B; ++b)
      for (int64_t col = 0; col < h * r; ++col) {
        const int64_t hh = col / r, slot = col % r;
        double mx = -std::numeric_limits<double>::infinity(), z = 0;
        for (int64_t j = 0; j < n; ++j)
          if (is_real(b, j)) mx = std::max(mx, s[size_t((b * n + j) * h * r + col)]);
        for (int64_t j = 0; j < n; ++j)
          if (is_real(b, j)) z += std::exp(s[size_t((b * n + j) * h * r + col)] - mx);
        for (int64_t j = 0; j < n; ++j) {
          if (!is_real(b, j)) continue;
          const double p = std::exp(s[size_t((b * n + j) * h * r + col)] - mx) / z;
          for (int64_t f = 0; f < e; ++f) {
            kbar[size_t((b * R + R - r + slot) * d + hh * e + f)] += p * k[size_t(((b * h + hh) * n + j) * e + f)];
            vbar[size_t((b * R + R - r + slot) * d + hh * e + f)] += p * v[size_t(((b * h + hh) * n + j) * e + f)];
          }
        }
      }
  }
  Vec kb = heads_first(layer_norm(kbar, B * R, d, P.ln_s_w, P.ln_s_b), B, R, h, e);
  Vec vb = heads_first(layer_norm(vbar, B * R, d, P.ln_s_w, P.ln_s_b), B, R, h, e);
  Vec ctx = core({B, h, n, e, R, L.w, L.w == 0 && r == 0}, q, k, v, kb, vb, real);  // [B, h, n, e]
  const int64_t N = n + (has_cls ? 1 : 0);
  Vec all(size_t(B * h * N * e), 0.0);
  for (int64_t bh = 0; bh < B * h; ++bh)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t f = 0; f < e; ++f) all[size_t((bh * N + N - n + t) * e + f)] = ctx[size_t((bh * n + t) * e + f)];
  if (has_cls) {  // the CLS query over [k_c] ∪ {C_j : j real}, keys = values = C
    for (int64_t b = 0; b < B; ++b)
      for (int64_t hh = 0; hh < h; ++hh) {
        const int64_t bh = b * h + hh;
        const double* qq = &qc[size_t(b * d + hh * e)];
        Vec logit(size_t(n + 1), -std::numeric_limits<double>::infinity());
        logit[0] = 0;
        for (int64_t f = 0; f < e; ++f) logit[0] += qq[f] * kc[size_t(b * d + hh * e + f)];
        for (int64_t j = 0; j < n; ++j) {
          if (!is_real(b, j)) continue;
          double l = 0;
          for (int64_t f = 0; f < e; ++f) l += qq[f] * ctx[size_t((bh * n + j) * e + f)];
          logit[size_t(j + 1)] = l;
        }
        const double mx = *std::max_element(logit.begin(), logit.end());
        double z = 0;
        for (double l : logit) z += std::exp(l - mx);
        for (int64_t f = 0; f < e; ++f) {
          double o = std::exp(logit[0] - mx) / z * vc[size_t(b * d + hh * e + f)];
          for (int64_t j = 0; j < n; ++j) o += std::exp(logit[size_t(j + 1)] - mx) / z * ctx[size_t((bh * n + j) * e + f)];
          all[size_t((bh * N) * e + f)] = o;
        }
      }
  }
  return linear(tokens_first(all, B, N, h, e), B * N, d, d, P.Wo, P.bo);
}

}  // namespace lsf::oracle
