// An independent dense f64 reference for the 2-D long-short attention (docs/transformer-ls.md §4.2–4.3):
// plain loops over std::vector<double>, one query at a time, enumerating that query's key slots
// straight from the text — [r projected | T×T window with explicit image coordinates, −∞ off the
// image, RPE row = dy·(w+2p) + dx | g global] — with an ordinary max-subtracted softmax over the
// list. It shares no code with the module (no tensors, no index tensors, no strided views).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace lsf::test::ls2d {

struct OracleConfig {
  int64_t B = 1, C = 8, heads = 2, window = 2, rank = 3, global = 1, side_len = 4;  // side_len = nx
  bool rpe = true;
  bool dual_ln = true;  // false: no LN_L / LN_G (the ablation)
};

// Row-major parameter values with the PyTorch layouts (Linear weight [out, in]).
struct OracleParams {
  std::vector<double> w_qkv, b_qkv;  // [3C, C], [3C] (b_qkv may be empty: no bias)
  std::vector<double> w_o, b_o;      // [C, C], [C]
  std::vector<double> w_p, b_p;      // [h·r, C], [h·r]
  std::vector<double> lnl_g, lnl_b;  // dual_ln_full [C]
  std::vector<double> lng_g, lng_b;  // dual_ln_dp [C]
  std::vector<double> table;         // [rows, h] when rpe
};

// LayerNorm of one row of length C (biased variance, eps 1e-5), in place.
inline void oracle_layer_norm(double* row, int64_t C, const std::vector<double>& gamma, const std::vector<double>& beta) {
  double mean = 0, var = 0;
  for (int64_t c = 0; c < C; ++c) mean += row[c];
  mean /= double(C);
  for (int64_t c = 0; c < C; ++c) var += (row[c] - mean) * (row[c] - mean);
  var /= double(C);
  const double inv = 1.0 / std::sqrt(var + 1e-5);
  for (int64_t c = 0; c < C; ++c) row[c] = (row[c] - mean) * inv * gamma[size_t(c)] + beta[size_t(c)];
}

// x [B, g + nx², C] → y [B, g + nx², C]. `probs` (if not null) receives the joint probabilities
// of every patch query, [B, h, nx², r + T² + g] in the slot order above.
inline std::vector<double> oracle_forward(const OracleConfig& cf, const OracleParams& pr, const std::vector<double>& x,
                                          std::vector<double>* probs = nullptr) {
  const int64_t C = cf.C, h = cf.heads, e = C / h, w = cf.window, r = cf.rank, g = cf.global, nx = cf.side_len;
  const int64_t N = nx * nx, n = g + N;
  const int64_t side = std::max<int64_t>(w / 2, 1), T = w + 2 * side, p = w / 2;
  const double scale = 1.0 / std::sqrt(double(e));
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<double> y(static_cast<size_t>(cf.B * n * C), 0.0);

  for (int64_t b = 0; b < cf.B; ++b) {
    const double* xb = x.data() + b * n * C;
    // Step 1–2: q (scaled), k, v with LN_L over C for all tokens.
    std::vector<double> q(static_cast<size_t>(n * C)), k(static_cast<size_t>(n * C)), v(static_cast<size_t>(n * C));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t o = 0; o < 3 * C; ++o) {
        double s = pr.b_qkv.empty() ? 0.0 : pr.b_qkv[size_t(o)];
        for (int64_t c = 0; c < C; ++c) s += xb[t * C + c] * pr.w_qkv[size_t(o * C + c)];
        if (o < C) q[size_t(t * C + o)] = s * scale;
        else if (o < 2 * C) k[size_t(t * C + o - C)] = s;
        else v[size_t(t * C + o - 2 * C)] = s;
      }
      if (cf.dual_ln) {
        oracle_layer_norm(&k[size_t(t * C)], C, pr.lnl_g, pr.lnl_b);
        oracle_layer_norm(&v[size_t(t * C)], C, pr.lnl_g, pr.lnl_b);
      }
    }
    auto qh = [&](int64_t t, int64_t hd, int64_t c) { return q[size_t(t * C + hd * e + c)]; };
    auto kh = [&](int64_t t, int64_t hd, int64_t c) { return k[size_t(t * C + hd * e + c)]; };
    auto vh = [&](int64_t t, int64_t hd, int64_t c) { return v[size_t(t * C + hd * e + c)]; };

    // Step 4: projection over the patch tokens (token index g + j), softmax over j per column.
    std::vector<double> kbar(static_cast<size_t>(r * C), 0.0), vbar(static_cast<size_t>(r * C), 0.0);  // [r, C] merged heads
    for (int64_t hd = 0; hd < h; ++hd) {
      for (int64_t s = 0; s < r; ++s) {
        const int64_t col = hd * r + s;
        std::vector<double> logit(static_cast<size_t>(N));
        double mx = ninf;
        for (int64_t j = 0; j < N; ++j) {
          double a = pr.b_p[size_t(col)];
          for (int64_t c = 0; c < C; ++c) a += xb[(g + j) * C + c] * pr.w_p[size_t(col * C + c)];
          logit[size_t(j)] = a;
          mx = std::max(mx, a);
        }
        double z = 0;
        for (auto& a : logit) z += (a = std::exp(a - mx));
        for (int64_t j = 0; j < N; ++j) {
          const double pj = logit[size_t(j)] / z;
          for (int64_t c = 0; c < e; ++c) {
            kbar[size_t(s * C + hd * e + c)] += pj * kh(g + j, hd, c);
            vbar[size_t(s * C + hd * e + c)] += pj * vh(g + j, hd, c);
          }
        }
      }
    }
    for (int64_t s = 0; s < r && cf.dual_ln; ++s) {
      oracle_layer_norm(&kbar[size_t(s * C)], C, pr.lng_g, pr.lng_b);
      oracle_layer_norm(&vbar[size_t(s * C)], C, pr.lng_g, pr.lng_b);
    }

    // Steps 5–9 per patch query; out [N, C] (heads side by side).
    std::vector<double> out(static_cast<size_t>(N * C), 0.0);
    for (int64_t hd = 0; hd < h; ++hd) {
      for (int64_t iy = 0; iy < nx; ++iy) {
        for (int64_t ix = 0; ix < nx; ++ix) {
          const int64_t tq = g + iy * nx + ix;
          std::vector<double> logit;
          std::vector<std::vector<double>> value;
          auto dot = [&](auto key) {
            double s = 0;
            for (int64_t c = 0; c < e; ++c) s += qh(tq, hd, c) * key(c);
            return s;
          };
          for (int64_t s = 0; s < r; ++s) {  // projected slots
            logit.push_back(dot([&](int64_t c) { return kbar[size_t(s * C + hd * e + c)]; }));
            std::vector<double> val(static_cast<size_t>(e));
            for (int64_t c = 0; c < e; ++c) val[size_t(c)] = vbar[size_t(s * C + hd * e + c)];
            value.push_back(val);
          }
          const int64_t gy = iy / w, gx = ix / w, qy = iy % w, qx = ix % w;
          for (int64_t ty = 0; ty < T; ++ty) {  // window slots, row-major T×T
            for (int64_t tx = 0; tx < T; ++tx) {
              const int64_t ky = gy * w - side + ty, kx = gx * w - side + tx;  // image coordinates
              std::vector<double> val(static_cast<size_t>(e), 0.0);
              if (ky < 0 || ky >= nx || kx < 0 || kx >= nx) {
                logit.push_back(ninf);
              } else {
                const int64_t tk = g + ky * nx + kx;
                double a = dot([&](int64_t c) { return kh(tk, hd, c); });
                if (cf.rpe) {
                  const int64_t rky = ty - p, rkx = tx - p;  // relative to the group's top-left query
                  const int64_t dy = qy - rky + (w + p - 1), dx = qx - rkx + (w + p - 1);
                  a += pr.table[size_t((dy * (w + 2 * p) + dx) * h + hd)];
                }
                logit.push_back(a);
                for (int64_t c = 0; c < e; ++c) val[size_t(c)] = vh(tk, hd, c);
              }
              value.push_back(val);
            }
          }
          for (int64_t t = 0; t < g; ++t) {  // global slots
            logit.push_back(dot([&](int64_t c) { return kh(t, hd, c); }));
            std::vector<double> val(static_cast<size_t>(e));
            for (int64_t c = 0; c < e; ++c) val[size_t(c)] = vh(t, hd, c);
            value.push_back(val);
          }
          double mx = ninf, z = 0;
          for (double a : logit) mx = std::max(mx, a);
          for (double& a : logit) z += (a = std::exp(a - mx));
          for (size_t i = 0; i < logit.size(); ++i) {
            for (int64_t c = 0; c < e; ++c)
              out[size_t((iy * nx + ix) * C + hd * e + c)] += logit[i] / z * value[i][size_t(c)];
          }
          if (probs != nullptr) {
            const size_t S = logit.size(), at = size_t(((b * h + hd) * N + iy * nx + ix)) * S;
            if (probs->size() < at + S) probs->resize(at + S);
            for (size_t i = 0; i < S; ++i) (*probs)[at + i] = logit[i] / z;
          }
        }
      }
    }

    // Step 10: global update (g = 1): keys/values [k_g, v_g] then every patch output.
    std::vector<double> all(static_cast<size_t>(n * C), 0.0);
    for (int64_t j = 0; j < N * C; ++j) all[size_t(g * C + j)] = out[size_t(j)];
    for (int64_t t = 0; t < g; ++t) {
      for (int64_t hd = 0; hd < h; ++hd) {
        std::vector<double> logit(static_cast<size_t>(1 + N));
        double a0 = 0;
        for (int64_t c = 0; c < e; ++c) a0 += qh(t, hd, c) * kh(t, hd, c);
        logit[0] = a0;
        for (int64_t j = 0; j < N; ++j) {
          double a = 0;
          for (int64_t c = 0; c < e; ++c) a += qh(t, hd, c) * out[size_t(j * C + hd * e + c)];
          logit[size_t(1 + j)] = a;
        }
        double mx = ninf, z = 0;
        for (double a : logit) mx = std::max(mx, a);
        for (double& a : logit) z += (a = std::exp(a - mx));
        for (int64_t c = 0; c < e; ++c) {
          double s = logit[0] / z * vh(t, hd, c);
          for (int64_t j = 0; j < N; ++j) s += logit[size_t(1 + j)] / z * out[size_t(j * C + hd * e + c)];
          all[size_t(t * C + hd * e + c)] = s;
        }
      }
    }

    // Step 11: output projection.
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t o = 0; o < C; ++o) {
        double s = pr.b_o[size_t(o)];
        for (int64_t c = 0; c < C; ++c) s += all[size_t(t * C + c)] * pr.w_o[size_t(o * C + c)];
        y[size_t((b * n + t) * C + o)] = s;
      }
    }
  }
  return y;
}

}  // namespace lsf::test::ls2d
