// The baseline attention modules of issue 4: nn::FullAttention and nn::LinformerAttention.
// Values against PyTorch (tests/fixtures/attention_baselines.json, from
// gen_attention_baselines.py: F.multi_head_attention_forward for full attention, the LRA
// Linformer formula) and against independent dense per-query loops written below; causality by
// perturbation; key-padding invariance; dropout in train/eval mode; float64 gradchecks with
// respect to the input and every parameter; parameter names, counts and sharing; bad inputs.
#include <cmath>
#include <map>

#include "helpers.h"
#include "lsformer/models/attention/full_attention.h"
#include "lsformer/models/attention/linformer.h"
#include "lsformer/models/lm/causal_full_attention.h"
#include "lsformer/models/vision/cvt_ls_attention.h"
#include "lsformer/models/vision/vil_attention.h"

using namespace lsf;
using testing::gradcheck;

namespace {

const nlohmann::json& fixture() {
  static const nlohmann::json j = test::load_fixture("attention_baselines");
  return j;
}

std::map<std::string, Tensor> params_of(const nlohmann::json& c) {
  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : c["params"].items()) state[name] = test::fixture_tensor(t);
  return state;
}

std::vector<double> values(const Tensor& t) { return t.contiguous().to_vector<double>(); }

// A [B, n] bool mask with the last pads[b] tokens of batch element b padded.
Tensor make_mask(int64_t B, int64_t n, const std::vector<int64_t>& pads) {
  std::vector<double> m(size_t(B * n), 1.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = n - pads[size_t(b)]; t < n; ++t) m[size_t(b * n + t)] = 0.0;
  return tensor(m, {B, n}).to(kBool);
}

// Randomises every parameter of `m` (N(0, 1/d) weights, N(0, 0.1²) biases, N(0, 0.3²) for E/F)
// in f64, so the oracle tests do not depend on the default initialisation's scale.
void randomise(nn::Module& m, uint64_t seed) {
  Generator g(seed);
  NoGradGuard no_grad;
  for (const auto& [name, p] : m.named_parameters()) {
    const double sd = name.ends_with("bias") ? 0.1 : (name == "E" || name == "F") ? 0.3 : 1.0 / std::sqrt(double(p.size(-1)));
    normal_(p, 0.0, sd, &g);
  }
}

// ---- independent dense oracles: explicit loops over queries, keys and features, in double ----

struct Proj {  // one Linear's weight [out, in] and bias [out]
  std::vector<double> w, b;
  int64_t out, in;
  std::vector<double> apply(const std::vector<double>& x, int64_t rows) const {  // x [rows, in] → [rows, out]
    std::vector<double> y(size_t(rows * out));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double s = b.empty() ? 0.0 : b[size_t(o)];
        for (int64_t i = 0; i < in; ++i) s += x[size_t(r * in + i)] * w[size_t(o * in + i)];
        y[size_t(r * out + o)] = s;
      }
    return y;
  }
};

Proj proj_of(const nn::Linear& l) {
  return {values(l.weight), l.bias.defined() ? values(l.bias) : std::vector<double>{}, l.out_features(), l.in_features()};
}

// Softmax-weighted sum for one query: logits[j] over the visible slots, values rows vals[j].
void attend(const std::vector<double>& logits, const std::vector<const double*>& vals, int64_t e, double* out) {
  double mx = -INFINITY;
  for (double l : logits) mx = std::max(mx, l);
  double z = 0.0;
  for (double l : logits) z += std::exp(l - mx);
  for (size_t j = 0; j < logits.size(); ++j) {
    double p = std::exp(logits[j] - mx) / z;
    for (int64_t i = 0; i < e; ++i) out[i] += p * vals[j][i];
  }
}

// Full attention: every real query t attends to the keys j that are real and (causal) j ≤ t;
// padded queries get a zero context.
std::vector<double> full_oracle(const nn::FullAttention& m, const Tensor& x, const Tensor& mask) {
  const int64_t B = x.size(0), n = x.size(1), d = x.size(2), h = m.options().heads, e = d / h;
  const std::vector<double> xs = values(x);
  const std::vector<double> ms = mask.defined() ? values(mask) : std::vector<double>(size_t(B * n), 1.0);
  std::vector<double> y;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> xb(xs.begin() + b * n * d, xs.begin() + (b + 1) * n * d);
    auto Q = proj_of(*m.W_q).apply(xb, n), K = proj_of(*m.W_k).apply(xb, n), V = proj_of(*m.W_v).apply(xb, n);
    std::vector<double> ctx(size_t(n * d), 0.0);
    for (int64_t t = 0; t < n; ++t) {
      if (ms[size_t(b * n + t)] == 0.0) continue;
      for (int64_t hh = 0; hh < h; ++hh) {
        std::vector<double> logits;
        std::vector<const double*> vals;
        for (int64_t j = 0; j < n; ++j) {
          if (ms[size_t(b * n + j)] == 0.0 || (m.options().causal && j > t)) continue;
          double s = 0.0;
          for (int64_t i = 0; i < e; ++i) s += Q[size_t(t * d + hh * e + i)] * K[size_t(j * d + hh * e + i)];
          logits.push_back(s / std::sqrt(double(e)));
          vals.push_back(&V[size_t(j * d + hh * e)]);
        }
        attend(logits, vals, e, &ctx[size_t(t * d + hh * e)]);
      }
    }
    auto yb = proj_of(*m.W_o).apply(ctx, n);
    y.insert(y.end(), yb.begin(), yb.end());
  }
  return y;
}

// Linformer: K̄[s] = Σ_j E[s, j]·m_j·K[j] (per head), V̄ likewise with F (or E); every real
// query attends to the k slots; padded queries get a zero context.
std::vector<double> linformer_oracle(const nn::LinformerAttention& m, const Tensor& x, const Tensor& mask) {
  const auto& o = m.options();
  const int64_t B = x.size(0), n = x.size(1), d = x.size(2), h = o.heads, e = d / h, k = o.k;
  const std::vector<double> xs = values(x), Es = values(m.E), Fs = o.share_kv ? Es : values(m.F);
  const std::vector<double> ms = mask.defined() ? values(mask) : std::vector<double>(size_t(B * n), 1.0);
  auto proj_at = [&](const std::vector<double>& P, int64_t hh, int64_t s, int64_t j) {
    return P[size_t((o.per_head ? hh * k * n : 0) + s * n + j)];
  };
  std::vector<double> y;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> xb(xs.begin() + b * n * d, xs.begin() + (b + 1) * n * d);
    auto Q = proj_of(*m.W_q).apply(xb, n), K = proj_of(*m.W_k).apply(xb, n), V = proj_of(*m.W_v).apply(xb, n);
    std::vector<double> ctx(size_t(n * d), 0.0);
    for (int64_t hh = 0; hh < h; ++hh) {
      std::vector<double> Kp(size_t(k * e), 0.0), Vp(size_t(k * e), 0.0);
      for (int64_t s = 0; s < k; ++s)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < e; ++i) {
            const double mj = ms[size_t(b * n + j)];
            Kp[size_t(s * e + i)] += proj_at(Es, hh, s, j) * mj * K[size_t(j * d + hh * e + i)];
            Vp[size_t(s * e + i)] += proj_at(Fs, hh, s, j) * mj * V[size_t(j * d + hh * e + i)];
          }
      for (int64_t t = 0; t < n; ++t) {
        if (ms[size_t(b * n + t)] == 0.0) continue;
        std::vector<double> logits;
        std::vector<const double*> vals;
        for (int64_t s = 0; s < k; ++s) {
          double dot = 0.0;
          for (int64_t i = 0; i < e; ++i) dot += Q[size_t(t * d + hh * e + i)] * Kp[size_t(s * e + i)];
          logits.push_back(dot / std::sqrt(double(e)));
          vals.push_back(&Vp[size_t(s * e)]);
        }
        attend(logits, vals, e, &ctx[size_t(t * d + hh * e)]);
      }
    }
    auto yb = proj_of(*m.W_o).apply(ctx, n);
    y.insert(y.end(), yb.begin(), yb.end());
  }
  return y;
}

void check_grad(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs) {
  auto r = gradcheck(fn, inputs);
  INFO(r.message);
  CHECK(r.ok);
}

TensorList with_params(const Tensor& x, const nn::Module& m) {
  TensorList in{x};
  for (const Tensor& p : m.parameters()) in.push_back(p);
  return in;
}

// x with rows `rows` of batch element b replaced by other values.
Tensor perturb_rows(const Tensor& x, int64_t b, const std::vector<int64_t>& rows, double scale) {
  std::vector<double> v = values(x);
  const int64_t n = x.size(1), d = x.size(2);
  for (int64_t t : rows)
    for (int64_t i = 0; i < d; ++i) v[size_t((b * n + t) * d + i)] = scale * (1.0 + 0.37 * double(i)) - 2.0;
  return tensor(v, x.shape()).to(x.dtype());
}

}  // namespace

// ---- values against PyTorch ------------------------------------------------------------------

// Tolerances for the fixture cases (|y| and |grad| are O(1); d = 8, n ≤ 6, e ≤ 4): each output
// passes through a chain of reductions — x·W (d terms), q·k (e), softmax (n), P·V (n), W_o (d),
// and the same chain backwards — of total length L = 2d + e + 2n ≤ 32, each term rounding by
// at most 2^-p relatively (p = 53 for f64, 24 for f32); intermediate magnitudes reach ~8
// (logits enter exp, whose relative error is the logit's absolute error). So
// atol = rtol = 8·L·2^-p: 256·2^-53 ≈ 2.8e-14 (f64) and 256·2^-24 ≈ 1.5e-5 (f32).
TEST_CASE("FullAttention and LinformerAttention match PyTorch (values and gradients)", "[attention_baselines]") {
  for (DType dtype : {kF64, kF32}) {
    const double tol = 256.0 * std::ldexp(1.0, dtype == kF64 ? -53 : -24);
    for (const auto& [name, c] : fixture().items()) {
      INFO(name << " in " << dtype);
      std::shared_ptr<nn::Attention> m;
      if (name.starts_with("full")) {
        m = std::make_shared<nn::FullAttention>(nn::FullAttentionOptions{
            .dim = c["d"].get<int64_t>(), .heads = c["heads"].get<int64_t>(), .causal = c["causal"].get<bool>()});
      } else {
        m = std::make_shared<nn::LinformerAttention>(nn::LinformerOptions{
            .dim = c["d"].get<int64_t>(), .heads = c["heads"].get<int64_t>(), .max_seq_len = c["n"].get<int64_t>(),
            .k = c["k"].get<int64_t>(),
            .share_kv = c["share_kv"].get<bool>(), .per_head = c["per_head"].get<bool>()});
      }
      m->to(dtype);
      m->load_state_dict(params_of(c));
      Tensor x = test::fixture_tensor(c["x"]).to(dtype).requires_grad_(true);
      Tensor mask = c.contains("mask") ? test::fixture_tensor(c["mask"]) : Tensor();
      Tensor y = m->forward(x, {.mask = mask});
      CHECK(y.dtype() == dtype);
      test::check_close(y, test::fixture_tensor(c["y"]), tol, tol);
      y.backward(test::fixture_tensor(c["g"]).to(dtype));
      test::check_close(x.grad(), test::fixture_tensor(c["dx"]), tol, tol);
      Tensor wq;
      for (const auto& [pname, p] : m->named_parameters())
        if (pname == "W_q.weight") wq = p;
      test::check_close(wq.grad(), test::fixture_tensor(c["dW_q"]), tol, tol);
    }
  }
}

// ---- against the dense per-query oracles -----------------------------------------------------

// f64 against the double-precision loops: the same rounding analysis as above with d = 16,
// n ≤ 9, e ≤ 8, k ≤ 5 (forward only): L = 2d + e + 2n + k ≤ 63 → atol = rtol = 8·64·2^-53 ≈ 5.7e-14.
TEST_CASE("FullAttention equals the dense per-query oracle (mask, causal, heads)", "[attention_baselines]") {
  const double tol = 512.0 * std::ldexp(1.0, -53);
  for (bool causal : {false, true})
    for (int64_t heads : {1, 2, 4}) {
      INFO("causal " << causal << ", heads " << heads);
      nn::FullAttention m({.dim = 16, .heads = heads, .causal = causal});
      m.to(kF64);
      randomise(m, 7 + uint64_t(heads));
      Tensor x = test::grad_input({3, 9, 16}, 11).detach();
      test::check_close(m.forward(x), full_oracle(m, x, Tensor()), tol, tol);
      Tensor mask = make_mask(3, 9, {0, 4, 8});  // the last element keeps a single real token
      test::check_close(m.forward(x, {.mask = mask}), full_oracle(m, x, mask), tol, tol);
    }
  nn::FullAttention nobias({.dim = 16, .heads = 2, .qkv_bias = false, .out_bias = false});
  nobias.to(kF64);
  randomise(nobias, 3);
  Tensor x = test::grad_input({2, 5, 16}, 12).detach();
  test::check_close(nobias.forward(x), full_oracle(nobias, x, Tensor()), tol, tol);
}

TEST_CASE("LinformerAttention equals its explicit formula (E/F sharing, per-head, mask)", "[attention_baselines]") {
  const double tol = 512.0 * std::ldexp(1.0, -53);  // derivation above the full-attention oracle test
  for (bool share_kv : {true, false})
    for (bool per_head : {true, false}) {
      INFO("share_kv " << share_kv << ", per_head " << per_head);
      nn::LinformerAttention m({.dim = 16, .heads = 2, .max_seq_len = 9, .k = 5, .share_kv = share_kv, .per_head = per_head});
      m.to(kF64);
      randomise(m, 21);
      Tensor x = test::grad_input({2, 9, 16}, 13).detach();
      test::check_close(m.forward(x), linformer_oracle(m, x, Tensor()), tol, tol);
      Tensor mask = make_mask(2, 9, {3, 0});
      test::check_close(m.forward(x, {.mask = mask}), linformer_oracle(m, x, mask), tol, tol);
    }
}

// ---- causality, padding, dropout -------------------------------------------------------------

TEST_CASE("FullAttention causal: perturbing future tokens leaves earlier outputs bit-identical", "[attention_baselines]") {
  nn::FullAttention m({.dim = 8, .heads = 2, .causal = true});
  Tensor x = randn({1, 7, 8});
  const std::vector<double> y0 = values(m.forward(x));
  for (int64_t tp = 0; tp < 7; ++tp) {
    INFO("perturbed token " << tp);
    const std::vector<double> y1 = values(m.forward(perturb_rows(x, 0, {tp}, 3.0)));
    for (int64_t t = 0; t < 7; ++t) {
      bool same = std::equal(y0.begin() + t * 8, y0.begin() + (t + 1) * 8, y1.begin() + t * 8);
      INFO("output " << t);
      CHECK(same == (t < tp));  // outputs before tp exactly unchanged; tp and later must change
    }
  }
}

TEST_CASE("Padding: padded tokens' values change nothing, their outputs are W_o's bias", "[attention_baselines]") {
  const int64_t B = 2, n = 8, d = 8;
  Tensor mask = make_mask(B, n, {1, 3});
  std::vector<std::shared_ptr<nn::Attention>> modules{
      std::make_shared<nn::FullAttention>(nn::FullAttentionOptions{.dim = d, .heads = 2}),
      std::make_shared<nn::FullAttention>(nn::FullAttentionOptions{.dim = d, .heads = 2, .causal = true}),
      std::make_shared<nn::LinformerAttention>(nn::LinformerOptions{.dim = d, .heads = 2, .max_seq_len = n, .k = 4})};
  for (size_t i = 0; i < modules.size(); ++i) {
    INFO("module " << i);
    auto& m = *modules[i];
    Tensor x = randn({B, n, d}).requires_grad_(true);
    Tensor y0 = m.forward(x, {.mask = mask});
    Tensor x2 = perturb_rows(perturb_rows(x.detach(), 0, {7}, 50.0), 1, {5, 6, 7}, -20.0);
    // Exactly equal: padded keys have probability exactly 0 (0·v adds +0), padded rows are 0.
    CHECK(values(m.forward(x2, {.mask = mask})) == values(y0));
    const std::vector<double> y = values(y0), bias = values(m.named_parameters().back().second);  // W_o.bias
    for (auto [b, t] : {std::pair<int64_t, int64_t>{0, 7}, {1, 5}, {1, 6}, {1, 7}})
      CHECK(std::vector<double>(y.begin() + (b * n + t) * d, y.begin() + (b * n + t + 1) * d) == bias);
    // No gradient reaches padded tokens.
    y0.backward(randn({B, n, d}));
    const std::vector<double> dx = values(x.grad());
    for (auto [b, t] : {std::pair<int64_t, int64_t>{0, 7}, {1, 5}, {1, 6}, {1, 7}})
      for (int64_t f = 0; f < d; ++f) CHECK(dx[size_t((b * n + t) * d + f)] == 0.0);
  }
}

// A sequence with no real token at all (every row is a padded query): no NaN anywhere, the
// outputs are W_o's bias and no gradient reaches x (every probability row is zeroed).
TEST_CASE("Padding: an entirely padded sequence gives W_o's bias and no NaN", "[attention_baselines]") {
  std::vector<std::shared_ptr<nn::Attention>> modules{
      std::make_shared<nn::FullAttention>(nn::FullAttentionOptions{.dim = 4, .heads = 2, .causal = true}),
      std::make_shared<nn::FullAttention>(nn::FullAttentionOptions{.dim = 4, .heads = 2}),
      std::make_shared<nn::LinformerAttention>(nn::LinformerOptions{.dim = 4, .heads = 2, .max_seq_len = 3, .k = 2})};
  for (auto& m : modules) {
    INFO(m->type_name());
    Tensor x = randn({1, 3, 4}).requires_grad_(true);
    Tensor y = m->forward(x, {.mask = zeros({1, 3}).to(kBool)});
    const std::vector<double> bias = values(m->named_parameters().back().second), yv = values(y);
    for (size_t t = 0; t < 3; ++t) CHECK(std::vector<double>(yv.begin() + t * 4, yv.begin() + (t + 1) * 4) == bias);
    y.backward(ones({1, 3, 4}));
    CHECK(values(x.grad()) == std::vector<double>(12, 0.0));
  }
}

// Full attention over the 5 real tokens alone equals the padded run's real rows (more padding
// appended changes nothing): f64, chain as in the oracle tests, atol = rtol = 512·2^-53.
TEST_CASE("FullAttention: real rows do not depend on how much padding follows", "[attention_baselines]") {
  const double tol = 512.0 * std::ldexp(1.0, -53);
  nn::FullAttention m({.dim = 8, .heads = 2});
  m.to(kF64);
  Tensor x = test::grad_input({1, 9, 8}, 5).detach();
  Tensor y_pad = m.forward(x, {.mask = make_mask(1, 9, {4})});
  Tensor y_real = m.forward(x.narrow(1, 0, 5));
  test::check_close(y_pad.narrow(1, 0, 5), y_real, tol, tol);
}

TEST_CASE("Attention dropout: identity in eval mode, all-dropped rows give W_o's bias, seeded", "[attention_baselines]") {
  Generator gen(99);
  nn::FullAttention m({.dim = 8, .heads = 2, .dropout = 0.5, .generator = &gen});
  nn::FullAttention ref({.dim = 8, .heads = 2});
  const NamedTensors state = m.state_dict();
  ref.load_state_dict(std::map<std::string, Tensor>(state.begin(), state.end()));
  Tensor x = randn({2, 6, 8});
  m.eval();
  CHECK(values(m.forward(x)) == values(ref.forward(x)));
  m.train();
  gen.manual_seed(5);
  const std::vector<double> a = values(m.forward(x));
  gen.manual_seed(5);
  CHECK(values(m.forward(x)) == a);  // the same Philox stream replays the same mask
  CHECK(a != values(ref.forward(x)));

  Generator gen1(1);
  nn::LinformerAttention all({.dim = 8, .heads = 2, .max_seq_len = 6, .k = 3, .dropout = 1.0, .generator = &gen1});
  const std::vector<double> y = values(all.forward(x)), bias = values(all.W_o->bias);
  for (size_t r = 0; r < 12; ++r) CHECK(std::vector<double>(y.begin() + r * 8, y.begin() + (r + 1) * 8) == bias);
}

// ---- gradient checks ---------------------------------------------------------------------------

// The Linears' gradients take the same path in every variant, so they are checked once (causal
// and masked, the variant that exercises every op) and the other variants check the input only:
// this keeps the number of perturbed forward passes small.
TEST_CASE("FullAttention passes f64 gradcheck (input and every parameter)", "[attention_baselines]") {
  for (bool causal : {false, true})
    for (bool masked : {false, true}) {
      INFO("causal " << causal << ", masked " << masked);
      nn::FullAttention m({.dim = 4, .heads = 2, .causal = causal});
      m.to(kF64);
      Tensor x = test::grad_input({2, 4, 4}, 31);
      Tensor mask = masked ? make_mask(2, 4, {0, 2}) : Tensor();
      check_grad([&](const TensorList& in) { return m.forward(in[0], {.mask = mask}); },
                 causal && masked ? with_params(x, m) : TensorList{x});
    }
}

TEST_CASE("LinformerAttention passes f64 gradcheck (input, Linears, E and F)", "[attention_baselines]") {
  for (bool share_kv : {true, false})
    for (bool per_head : {true, false}) {
      INFO("share_kv " << share_kv << ", per_head " << per_head);
      nn::LinformerAttention m({.dim = 4, .heads = 2, .max_seq_len = 4, .k = 3, .share_kv = share_kv, .per_head = per_head});
      m.to(kF64);
      randomise(m, 41);
      Tensor x = test::grad_input({2, 4, 4}, 32);
      Tensor mask = make_mask(2, 4, {1, 0});
      // E (and F) in every variant (their broadcast and sharing differ); the Linears once.
      TensorList inputs = share_kv && per_head ? with_params(x, m) : TensorList{x, m.E};
      if (m.F.defined() && inputs.size() == 2) inputs.push_back(m.F);
      check_grad([&](const TensorList& in) { return m.forward(in[0], {.mask = mask}); }, inputs);
    }
}

// A larger shape through random projections uᵀ J v (gradcheck switches to them above 2^15
// Jacobian entries).
TEST_CASE("Baselines pass projected f64 gradchecks on a larger shape", "[attention_baselines]") {
  nn::FullAttention full({.dim = 16, .heads = 4, .causal = true});
  full.to(kF64);
  Tensor x = test::grad_input({2, 24, 16}, 33);
  Tensor mask = make_mask(2, 24, {0, 7});
  check_grad([&](const TensorList& in) { return full.forward(in[0], {.mask = mask}); }, with_params(x, full));
  nn::LinformerAttention lin({.dim = 16, .heads = 4, .max_seq_len = 24, .k = 8});
  lin.to(kF64);
  check_grad([&](const TensorList& in) { return lin.forward(in[0], {.mask = mask}); }, with_params(x, lin));
}

// ---- names, counts, sharing, initialisation ----------------------------------------------------

TEST_CASE("Parameter names and counts (LRA settings) and layer-wise projection sharing", "[attention_baselines]") {
  nn::FullAttention full({.dim = 64, .heads = 2});
  std::vector<std::string> names;
  for (const auto& [name, p] : full.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"W_q.weight", "W_q.bias", "W_k.weight", "W_k.bias", "W_v.weight",
                                          "W_v.bias", "W_o.weight", "W_o.bias"});
  CHECK(full.parameter_count() == 4 * (64 * 64 + 64));
  CHECK(full.head_dim() == 32);
  nn::FullAttention nobias({.dim = 64, .heads = 2, .qkv_bias = false});
  CHECK(nobias.parameter_count() == 4 * 64 * 64 + 64);

  // LRA Linformer: n = 4096, k = 256, E [h, k, n] shared by keys and values.
  nn::LinformerAttention lin({.dim = 64, .heads = 2, .max_seq_len = 4096, .k = 256});
  names.clear();
  for (const auto& [name, p] : lin.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"E", "W_q.weight", "W_q.bias", "W_k.weight", "W_k.bias", "W_v.weight",
                                          "W_v.bias", "W_o.weight", "W_o.bias"});
  CHECK(lin.E.shape() == Shape{2, 256, 4096});
  CHECK(lin.parameter_count() == 2 * 256 * 4096 + 4 * (64 * 64 + 64));
  // E ~ N(0, 0.02²): with N = 2^21 samples, the sample mean has sd 0.02/√N ≈ 1.4e-5 (bound 5 sd)
  // and the sample sd a relative sd of 1/√(2N) ≈ 4.9e-4 (bound 5 sd ≈ 0.25 %).
  const std::vector<double> ev = values(lin.E);
  double mean = 0, sq = 0;
  for (double v : ev) mean += v;
  mean /= double(ev.size());
  for (double v : ev) sq += (v - mean) * (v - mean);
  CHECK(std::fabs(mean) < 5 * 0.02 / std::sqrt(double(ev.size())));
  CHECK(std::fabs(std::sqrt(sq / double(ev.size())) / 0.02 - 1.0) < 5.0 / std::sqrt(2.0 * double(ev.size())));

  nn::LinformerAttention ef({.dim = 8, .heads = 2, .max_seq_len = 6, .k = 3, .share_kv = false, .per_head = false});
  CHECK(ef.named_parameters()[0].first == "E");
  CHECK(ef.named_parameters()[1].first == "F");
  CHECK(ef.F.shape() == Shape{3, 6});

  // Layer-wise sharing: the second layer uses the first's E and F and registers neither.
  nn::LinformerAttention second({.dim = 8, .heads = 2, .max_seq_len = 6, .k = 3, .share_kv = false,
                                 .per_head = false, .share_projection_with = &ef});
  CHECK(second.shares_projection());
  CHECK(second.E.is_same(ef.E));
  CHECK(second.F.is_same(ef.F));
  CHECK(second.parameter_count() == 4 * (8 * 8 + 8));
  Tensor x = randn({1, 6, 8});
  sum(second.forward(x)).backward();
  CHECK(ef.E.grad().defined());  // gradients of the shared matrices land on the owner's tensors
  CHECK(ef.F.grad().defined());
}

// ---- bad inputs ----------------------------------------------------------------------------------

TEST_CASE("Bad configurations and inputs are rejected with clear messages", "[attention_baselines]") {
  using Catch::Contains;
  CHECK_THROWS_WITH(nn::FullAttention({.dim = 10, .heads = 4}),
                    Contains("FullAttention") && Contains("dim=10") && Contains("heads=4"));
  CHECK_THROWS_WITH(nn::LinformerAttention({.dim = 10, .heads = 3, .max_seq_len = 8, .k = 2}),
                    Contains("LinformerAttention") && Contains("dim=10") && Contains("heads=3"));
  CHECK_THROWS_WITH(nn::LinformerAttention({.dim = 8, .heads = 2, .max_seq_len = 8, .k = 0}),
                    Contains("LinformerAttention") && Contains("k=0"));
  CHECK_THROWS_WITH(nn::FullAttention({.dim = 8, .heads = 2, .dropout = 1.5}), Contains("dropout"));

  nn::FullAttention full({.dim = 8, .heads = 2});
  nn::LinformerAttention lin({.dim = 8, .heads = 2, .max_seq_len = 6, .k = 3});
  Tensor x = randn({2, 6, 8});
  for (nn::Attention* m : std::vector<nn::Attention*>{&full, &lin}) {
    const std::string op = m->type_name();
    INFO(op);
    CHECK_THROWS_WITH(m->forward(x, {.mask = ones({2, 5}).to(kBool)}),
                      Contains(op) && Contains("{2, 5}") && Contains("{2, 6}"));
    CHECK_THROWS_WITH(m->forward(x, {.mask = ones({2, 6})}), Contains(op) && Contains("bool") && Contains("f32"));
    CHECK_THROWS_WITH(m->forward(x, {.memory = randn({2, 4, 8})}), Contains(op) && Contains("memory") && Contains("{2, 4, 8}"));
    CHECK_THROWS_WITH(m->forward(x, {.cls = randn({2, 1, 8})}), Contains(op) && Contains("CLS"));
    CHECK_THROWS_WITH(m->forward(x, {.cls_only = true}), Contains(op) && Contains("cls_only"));
    CHECK_THROWS_WITH(m->forward(x, {.height = 2, .width = 3}), Contains(op) && Contains("2-D"));
    CHECK_THROWS_WITH(m->forward(randn({2, 6, 7})), Contains(op) && Contains("{2, 6, 7}"));
    CHECK_THROWS_WITH(m->forward(randn({6, 8})), Contains(op) && Contains("{6, 8}"));
    CHECK_THROWS_WITH(m->forward(Tensor()), Contains(op) && Contains("undefined"));
  }
  CHECK_THROWS_WITH(lin.forward(randn({2, 5, 8})),
                    Contains("LinformerAttention") && Contains("{2, 5, 8}") && Contains("max_seq_len=6"));
  CHECK_THROWS_WITH(nn::LinformerAttention({.dim = 8, .heads = 2, .max_seq_len = 7, .k = 3, .share_projection_with = &lin}),
                    Contains("LinformerAttention") && Contains("max_seq_len=7") && Contains("must match"));
}

TEST_CASE("attention modules without a CLS slot refuse AttentionArgs::cls_only", "[attention]") {
  // Only the bidirectional long-short attention returns the CLS row alone; every other module
  // would otherwise return all rows where the caller expects one.
  lm::CausalFullAttention causal({.dim = 8, .heads = 2});
  vision::ViLFullAttention vil({.dim = 8, .heads = 2});
  vision::CvTLSAttention cvt({.dim = 8, .heads = 2, .window = 2, .rank = 2});
  const Tensor x = zeros({1, 5, 8});
  CHECK_THROWS_WITH(causal.forward(zeros({1, 4, 8}), {.cls_only = true}), Catch::Contains("cls_only") && Catch::Contains("bidirectional"));
  CHECK_THROWS_WITH(vil.forward(x, {.cls_only = true}), Catch::Contains("cls_only") && Catch::Contains("not supported"));
  CHECK_THROWS_WITH(cvt.forward(x, {.cls_only = true, .height = 2, .width = 2, .num_global = 1}),
                    Catch::Contains("cls_only") && Catch::Contains("not supported"));
  CHECK_THROWS_WITH(cvt.forward(x, {.mask = ones({1, 5}, kBool), .height = 2, .width = 2, .num_global = 1}),
                    Catch::Contains("args.mask") && Catch::Contains("not supported"));
}
