// nn::CaptureScope (models/nn/capture.h): tensors recorded by module path (state_dict names),
// only while a scope is active and only for the selected paths, paused, nested; and what the
// attention modules record equals the computation it claims to be: the long-short attention
// rows against the independent dense oracle (tests/long_short_oracle.h), the causal rows
// recomposed into the module's output, the 2-D, full, Linformer and causal-full rows as
// probability rows with their structural zeros.
#include <cmath>

#include "helpers.h"
#include "long_short_oracle.h"
#include "lsformer/models/attention/causal_long_short.h"
#include "lsformer/models/attention/full_attention.h"
#include "lsformer/models/attention/heads.h"
#include "lsformer/models/attention/linformer.h"
#include "lsformer/models/attention/long_short.h"
#include "lsformer/models/attention/long_short_2d.h"
#include "lsformer/models/lm/causal_full_attention.h"
#include "lsformer/models/lra/lra_model.h"
#include "lsformer/models/nn/capture.h"

using namespace lsf;
using Catch::Contains;
using Vec = std::vector<double>;

namespace {

Vec vec(const Tensor& t) { return t.to(kF64).contiguous().to_vector<double>(); }

Tensor randn_t(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, TensorOptions(kF64), &g);
}

std::shared_ptr<lra::LraClassifier> tiny_lra() {
  manual_seed(3);
  auto m = std::make_shared<lra::LraClassifier>(lra::LraModelOptions{
      .vocab_size = 16, .max_seq_len = 16, .dim = 8, .heads = 2, .layers = 2, .ffn_dim = 16, .num_classes = 3,
      .window = 4, .rank = 2, .head_hidden = 8});
  m->eval();
  return m;
}

Tensor tokens_of(int64_t n) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(1 + (i * 7) % 15);
  return tensor(ids, {1, n});
}

// Every row of a [.., rows, cols] probability tensor sums to 1 (or is all 0 when `zero_ok`).
void check_rows_sum_to_one(const Tensor& p, double tol, bool zero_ok = false) {
  const int64_t cols = p.size(-1);
  const Vec v = vec(p);
  for (size_t row = 0; row * size_t(cols) < v.size(); ++row) {
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) {
      CHECK(v[row * size_t(cols) + size_t(j)] >= 0.0);
      s += v[row * size_t(cols) + size_t(j)];
    }
    if (!(zero_ok && s == 0.0)) CHECK(std::fabs(s - 1.0) <= tol);
  }
}

}  // namespace

TEST_CASE("CaptureScope records by module path while active, for the selected paths only", "[capture]") {
  auto model = tiny_lra();
  const Tensor tokens = tokens_of(12), mask = ones({1, 12}, TensorOptions(kBool));
  SECTION("every attention layer under its state_dict path") {
    nn::CaptureScope cap(*model);
    model->forward(tokens, mask);
    CHECK(cap.names_under("model.transformer_0.mha") ==
          std::vector<std::string>{"model.transformer_0.mha.attention", "model.transformer_0.mha.context",
                                   "model.transformer_0.mha.k", "model.transformer_0.mha.kbar",
                                   "model.transformer_0.mha.kbar_raw", "model.transformer_0.mha.proj",
                                   "model.transformer_0.mha.q", "model.transformer_0.mha.v", "model.transformer_0.mha.vbar",
                                   "model.transformer_0.mha.vbar_raw"});
    CHECK(cap.get("model.transformer_1.mha.attention").shape() == Shape({1, 2, 12, 3 + 8}));  // CLS + r = 2 | span 8
    CHECK(cap.get("model.transformer_0.mha.attention").shape() == Shape({1, 2, 12, 2 + 8}));
    for (const auto& [name, t] : cap.tensors()) CHECK(name.rfind("model.transformer_", 0) == 0);  // nothing else records
    CHECK_THROWS_WITH(cap.get("model.transformer_0.mha.nope"),
                      Contains("nothing was recorded as 'model.transformer_0.mha.nope'") &&
                          Contains("model.transformer_0.mha.attention"));
    // A second forward under the same scope keeps both, the second as "#1".
    model->forward(tokens, mask);
    CHECK(cap.contains("model.transformer_0.mha.attention#1"));
  }
  SECTION("a path prefix selects one layer; its siblings compute nothing") {
    nn::CaptureScope cap(*model, {"model.transformer_1"});
    model->forward(tokens, mask);
    CHECK(cap.contains("model.transformer_1.mha.attention"));
    CHECK(cap.names_under("model.transformer_0.mha").empty());
    nn::CaptureScope prefix_not_a_name(*model, {"model.transformer_"});  // "a.b" does not select "a.bc"
    model->forward(tokens, mask);
    CHECK(prefix_not_a_name.tensors().empty());
  }
  SECTION("nothing is recorded outside a scope, while paused, or for a module outside the tree") {
    model->forward(tokens, mask);  // no scope: nothing to record into, nothing computed
    nn::CaptureScope cap(*model);
    {
      nn::CapturePause pause;
      model->forward(tokens, mask);
    }
    CHECK(cap.tensors().empty());
    nn::LongShortAttention outsider({.dim = 8, .heads = 2, .window = 4, .rank = 2});
    outsider.forward(randn(Shape{1, 8, 8}));
    CHECK(cap.tensors().empty());
    CHECK(!nn::capturing(&outsider));
    CHECK(nn::capturing(model->model->blocks[0]->mha.get()));
  }
  SECTION("scopes nest: the innermost records, the outer resumes after it") {
    nn::CaptureScope outer(*model);
    {
      nn::CaptureScope inner(*model->model, {"transformer_0"});  // paths relative to its root
      model->forward(tokens, mask);
      CHECK(inner.contains("transformer_0.mha.attention"));
    }
    CHECK(outer.tensors().empty());
    model->forward(tokens, mask);
    CHECK(outer.contains("model.transformer_0.mha.attention"));
  }
  CHECK(!nn::capturing(model->model->blocks[0]->mha.get()));  // every scope ended
}

TEST_CASE("LongShortAttention records the oracle's joint probabilities", "[capture]") {
  struct Case {
    int64_t n, w, r;
    std::vector<int64_t> real;
    bool cls;
  };
  for (const Case& c : std::vector<Case>{{16, 4, 3, {16, 11}, false},  // window + projection, padding
                                         {16, 4, 3, {16, 9}, true},    // with a CLS slot first
                                         {12, 0, 2, {12, 7}, false},   // projection only
                                         {12, 4, 0, {}, false}}) {     // window only
    INFO("n " << c.n << " w " << c.w << " r " << c.r << " cls " << c.cls);
    const int64_t B = 2, d = 8, h = 2, e = 4;
    manual_seed(11);
    nn::LongShortAttention m({.dim = d, .heads = h, .window = c.w, .rank = c.r});
    m.to(kF64);
    m.eval();
    Tensor x = randn_t({B, c.n, d}, 5), mask, cls;
    std::vector<bool> real;
    if (!c.real.empty()) {
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < c.n; ++t) real.push_back(t < c.real[size_t(b)]);
      std::vector<int64_t> flags(real.begin(), real.end());
      mask = ne(tensor(flags, {B, c.n}), 0.0);
    }
    if (c.cls) cls = randn_t({B, 1, d}, 6);
    nn::CaptureScope cap(m);
    m.forward(x, {.mask = mask, .cls = cls});
    const Tensor& a = cap.get("attention");
    const int64_t R = c.r + (c.cls ? 1 : 0), s = c.w > 0 ? c.w + 2 * std::max<int64_t>(c.w / 2, 1) : 0;
    REQUIRE(a.shape() == Shape({B, h, c.n, R + s}));
    // The oracle enumerates each query's slots itself, from the recorded inputs of the softmax.
    std::vector<Vec> probs;
    const oracle::Core core{B, h, c.n, e, R, c.w};
    const Vec context = oracle::core(core, vec(cap.get("q")), vec(cap.get("k")), vec(cap.get("v")),
                                     R > 0 ? vec(cap.get("kbar")) : Vec{}, R > 0 ? vec(cap.get("vbar")) : Vec{}, real, &probs);
    Vec flat;
    for (const Vec& row : probs) flat.insert(flat.end(), row.begin(), row.end());
    // f64 softmax over ≤ 11 slots of logits computed in two orders: ≤ 1e-14 apart; 1e-13.
    test::check_close(a, flat, 1e-13, 1e-13);
    test::check_close(cap.get("context"), context, 1e-13, 1e-13);
    check_rows_sum_to_one(a, 1e-13, /*zero_ok=*/!c.real.empty());  // padded queries' rows are 0
    if (c.r > 0) check_rows_sum_to_one(cap.get("proj"), 1e-13);    // P: a softmax over the tokens
  }
}

TEST_CASE("CausalLongShortAttention's recorded probabilities recompose its output", "[capture]") {
  const int64_t B = 1, d = 8, h = 2, e = 4, l = 4, r = 2, w = 4, C = 8, M = 8;
  manual_seed(21);
  nn::CausalLongShortAttention m({.dim = d, .heads = h, .chunk_length = l, .rank = r, .window = w, .memory_length = C});
  m.to(kF64);
  m.eval();
  const Tensor x = randn_t({B, M, d}, 1), xm = randn_t({B, C, d}, 2);
  nn::CaptureScope cap(m);
  const Tensor y = m.forward(x, {.memory = xm});
  const Tensor& a = cap.get("attention");
  const int64_t Nc = (C / l + M / l) * r;
  REQUIRE(a.shape() == Shape({B, h, M, Nc + w}));
  REQUIRE(cap.get("proj").shape() == Shape({B, h, C / l + M / l, r, l}));
  check_rows_sum_to_one(a, 1e-13);
  check_rows_sum_to_one(cap.get("proj"), 1e-13);
  const Vec p = vec(a);
  // Slots of the query's own and later chunks are exactly 0 (§3.6).
  for (int64_t hh = 0; hh < h; ++hh)
    for (int64_t t = 0; t < M; ++t)
      for (int64_t sigma = (C / l + t / l) * r; sigma < Nc; ++sigma) CHECK(p[size_t((hh * M + t) * (Nc + w) + sigma)] == 0.0);
  // out_t = Σ_σ p_σ·vc_σ + Σ_j p_j·vw[t+1+j], vw = LN_L(W_v [last w memory rows ; block]); then W_o.
  const Vec vc = vec(cap.get("vc"));
  const Vec vw = vec(nn::split_heads(m.dual_ln_win->forward(m.proj_val->forward(cat({xm.narrow(1, C - w, w), x}, 1))), h));
  Vec ctx(size_t(B * M * d), 0.0);  // merged heads [M, d]
  for (int64_t hh = 0; hh < h; ++hh)
    for (int64_t t = 0; t < M; ++t)
      for (int64_t f = 0; f < e; ++f) {
        double o = 0;
        for (int64_t sigma = 0; sigma < Nc; ++sigma)
          o += p[size_t((hh * M + t) * (Nc + w) + sigma)] * vc[size_t((hh * Nc + sigma) * e + f)];
        for (int64_t j = 0; j < w; ++j)
          o += p[size_t((hh * M + t) * (Nc + w) + Nc + j)] * vw[size_t((hh * (w + M) + t + 1 + j) * e + f)];
        ctx[size_t(t * d + hh * e + f)] = o;
      }
  const Tensor expect = m.proj_out->forward(tensor(ctx, {B, M, d}));
  // f64 sums of ≤ 12 terms and one d = 8 projection: 1e-12.
  test::check_close(y, expect, 1e-12, 1e-12);
}

TEST_CASE("the 2-D, full, Linformer and causal-full attentions record probability rows", "[capture]") {
  SECTION("2-D long-short: patch order, off-image window slots 0, P rows sum to 1") {
    manual_seed(31);
    nn::LongShortAttention2d m({.dim = 8, .heads = 2, .window = 2, .rank = 3});
    m.to(kF64);
    m.eval();
    nn::CaptureScope cap(m);
    m.forward(randn_t({1, 1 + 16, 8}, 3), {.height = 4, .width = 4, .num_global = 1});
    const Tensor& a = cap.get("attention");
    const int64_t T = 4;  // w + 2·max(⌊w/2⌋, 1)
    REQUIRE(a.shape() == Shape({1, 2, 16, 3 + T * T + 1}));
    check_rows_sum_to_one(a, 1e-13);
    check_rows_sum_to_one(cap.get("proj"), 1e-13);
    // Patch (0, 0) is in group (0, 0): its window block starts one row and column off the map.
    const Vec p = vec(a);
    for (int64_t ty = 0; ty < T; ++ty)
      for (int64_t tx = 0; tx < T; ++tx) {
        const bool off = ty == 0 || tx == 0;
        const double v = p[size_t(3 + ty * T + tx)];
        CHECK((off ? v == 0.0 : v > 0.0));
      }
  }
  SECTION("full attention (causal): zero above the diagonal, P·V·W_o is the output") {
    manual_seed(32);
    nn::FullAttention m({.dim = 8, .heads = 2, .causal = true});
    m.to(kF64);
    m.eval();
    const Tensor x = randn_t({1, 6, 8}, 4);
    nn::CaptureScope cap(m);
    const Tensor y = m.forward(x);
    const Tensor& a = cap.get("attention");
    check_rows_sum_to_one(a, 1e-13);
    const Vec p = vec(a);
    for (int64_t hh = 0; hh < 2; ++hh)
      for (int64_t t = 0; t < 6; ++t)
        for (int64_t j = t + 1; j < 6; ++j) CHECK(p[size_t((hh * 6 + t) * 6 + j)] == 0.0);
    const Tensor ctx = matmul(a, nn::split_heads(m.W_v->forward(x), 2));
    test::check_close(y, m.W_o->forward(nn::merge_heads(ctx)), 1e-13, 1e-13);  // same ops, same order
  }
  SECTION("Linformer: rows over the k projected slots") {
    manual_seed(33);
    nn::LinformerAttention m({.dim = 8, .heads = 2, .max_seq_len = 8, .k = 3});
    m.to(kF64);
    m.eval();
    nn::CaptureScope cap(m);
    m.forward(randn_t({1, 8, 8}, 5));
    REQUIRE(cap.get("attention").shape() == Shape({1, 2, 8, 3}));
    check_rows_sum_to_one(cap.get("attention"), 1e-13);
  }
  SECTION("causal full attention (the char-LM baseline): memory visible, future keys 0") {
    manual_seed(34);
    lm::CausalFullAttention m({.dim = 8, .heads = 2});
    m.to(kF64);
    m.eval();
    nn::CaptureScope cap(m);
    m.forward(randn_t({1, 4, 8}, 6), {.memory = randn_t({1, 4, 8}, 7)});
    const Tensor& a = cap.get("attention");
    REQUIRE(a.shape() == Shape({1, 2, 4, 8}));
    check_rows_sum_to_one(a, 1e-13);
    const Vec p = vec(a);
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t key = 0; key < 8; ++key) CHECK((key > 4 + t ? p[size_t(t * 8 + key)] == 0.0 : p[size_t(t * 8 + key)] > 0.0));
  }
}

TEST_CASE("on CUDA the long-short attention records the probabilities the CPU records", "[capture][cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  manual_seed(41);
  nn::LongShortAttention m({.dim = 8, .heads = 2, .window = 4, .rank = 3});
  m.eval();
  Generator g(9);
  const Tensor x = randn({2, 16, 8}, TensorOptions(), &g);
  std::vector<int64_t> flags(32, 1);
  for (int64_t t = 11; t < 16; ++t) flags[size_t(16 + t)] = 0;  // the second row: 11 real tokens
  const Tensor mask = ne(tensor(flags, {2, 16}), 0.0);
  Tensor on_cpu;
  {
    nn::CaptureScope cap(m);
    m.forward(x, {.mask = mask});
    on_cpu = cap.get("attention");
  }
  m.to(kCUDA);
  nn::CaptureScope cap(m);
  m.forward(x.to(kCUDA), {.mask = mask.to(kCUDA)});
  // f32 softmax over ≤ 11 slots after d = 8 projections and LayerNorms, computed by other
  // kernels in another order: ≤ ~50 ulp of values ≤ 1 (2^-24 ≈ 6e-8): 1e-5.
  test::check_close(cap.get("attention").to(kCPU), on_cpu.to_vector<double>(), 1e-5, 1e-5);
}
