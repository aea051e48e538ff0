// Tests of the LRA classifier (models/lra, docs/transformer-ls.md §2.4): output shapes for every
// attention kind, pooling and the dual encoder; parameter names; logits and gradients against a
// PyTorch re-implementation (tests/fixtures/gen_lra_model.py); invariance to extra right padding;
// the CLS entering only the last layer; f64 gradient checks; a short training run; option errors.
#include <random>

#include "helpers.h"
#include "lsformer/ops/flops.h"

using namespace lsf;

namespace {

// Rows of ids (≥ 1) right-padded with 0 to length n; mask = id ≠ 0.
struct Docs {
  Tensor tokens, mask;
};

Docs make_docs(const std::vector<std::vector<int64_t>>& rows, int64_t n) {
  std::vector<int64_t> ids;
  for (const auto& row : rows) {
    REQUIRE(int64_t(row.size()) <= n);
    ids.insert(ids.end(), row.begin(), row.end());
    ids.insert(ids.end(), size_t(n) - row.size(), 0);
  }
  Tensor tokens = tensor(ids, {int64_t(rows.size()), n});
  return {tokens, ne(tokens, 0.0)};
}

// `count` rows of random ids in [1, vocab) with the given lengths.
std::vector<std::vector<int64_t>> random_rows(const std::vector<int64_t>& lengths, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> id(1, vocab - 1);
  std::vector<std::vector<int64_t>> rows;
  for (int64_t len : lengths) {
    rows.emplace_back();
    for (int64_t t = 0; t < len; ++t) rows.back().push_back(id(rng));
  }
  return rows;
}

lra::AttentionKind attention_kind(const std::string& name) {
  return parse_enum<lra::AttentionKind>(name, lra::kAttentionKindNames, "attention");
}
lra::Pooling pooling_kind(const std::string& name) { return parse_enum<lra::Pooling>(name, lra::kPoolingNames, "pooling"); }

lra::LraModelOptions tiny(const std::string& attention, const std::string& pooling) {
  return {.vocab_size = 12, .max_seq_len = 16, .dim = 8, .heads = 2, .layers = 2, .ffn_dim = 16,
          .num_classes = 3, .attention = attention_kind(attention), .window = 2, .rank = 2, .linformer_k = 4,
          .pooling = pooling_kind(pooling), .head_hidden = 8};
}

// Parameters drawn away from the initialisation, so that every path (CLS, LayerNorm affine,
// position table) visibly shapes the output: N(0, 1) embeddings and CLS, LayerNorm affine near (1, 0).
void randomise(nn::Module& m, uint64_t seed) {
  Generator g(seed);
  for (const auto& [name, t] : m.named_parameters()) {
    const bool norm = name.find("norm") != std::string::npos || name.find("dual_ln") != std::string::npos;
    const bool table = name.find("embeddings") != std::string::npos || name.find("cls_embed") != std::string::npos;
    if (norm) nn::init::normal_(t, name.ends_with("weight") ? 1.0 : 0.0, 0.2, &g);
    else if (table) nn::init::normal_(t, 0.0, 1.0, &g);
  }
}

bool has_name(const nn::Module& m, const std::string& name) {
  for (const auto& [k, t] : m.state_dict())
    if (k == name) return true;
  return false;
}

lra::LraModelOptions options_from(const nlohmann::json& c) {
  lra::LraModelOptions o;
  o.vocab_size = c.at("vocab_size");
  o.max_seq_len = c.at("max_seq_len");
  o.dim = c.at("dim");
  o.heads = c.at("heads");
  o.layers = c.at("layers");
  o.ffn_dim = c.at("ffn_dim");
  o.num_classes = c.at("num_classes");
  o.attention = attention_kind(c.at("attention"));
  o.window = c.at("window");
  o.rank = c.at("rank");
  o.pooling = pooling_kind(c.at("pooling"));
  o.dual = c.at("dual");
  o.head_hidden = c.at("head_hidden");
  return o;
}

}  // namespace

TEST_CASE("LraClassifier gives [B, classes] logits for every attention, pooling and the dual head", "[lra]") {
  struct Variant {
    std::string attention, pooling;
    int64_t window, rank;
  };
  const std::vector<Variant> variants = {
      {"long_short", "cls", 2, 2},  {"long_short", "mean", 2, 2}, {"long_short", "cls", 0, 3},
      {"long_short", "cls", 4, 0},  {"full", "cls", 0, 0},        {"full", "mean", 0, 0},
      {"linformer", "mean", 0, 0},
  };
  for (const auto& v : variants) {
    for (bool dual : {false, true}) {
      INFO(v.attention << " pooling " << v.pooling << " w " << v.window << " r " << v.rank << " dual " << dual);
      lra::LraModelOptions o = tiny(v.attention, v.pooling);
      o.window = v.window;
      o.rank = v.rank;
      o.dual = dual;
      lra::LraClassifier model(o);
      model.eval();
      const int64_t n = v.attention == "linformer" ? o.max_seq_len : 8;
      Docs a = make_docs(random_rows({8, 5, 3}, o.vocab_size, 1), n);
      Docs b = make_docs(random_rows({4, 8, 2}, o.vocab_size, 2), n);
      Tensor logits = dual ? model.forward(a.tokens, a.mask, b.tokens, b.mask) : model.forward(a.tokens, a.mask);
      CHECK(logits.shape() == Shape({3, 3}));
      CHECK(logits.dtype() == kF32);
      for (double x : logits.to_vector<double>()) CHECK(std::isfinite(x));
    }
  }
}

TEST_CASE("LraClassifier uses the official LRA state_dict names", "[lra]") {
  lra::LraClassifier ls(tiny("long_short", "cls"));
  for (const char* name :
       {"model.cls_embed", "model.embeddings.word_embeddings.weight", "model.embeddings.position_embeddings.weight",
        "model.transformer_0.norm1.weight", "model.transformer_0.mha.W_q.weight", "model.transformer_0.mha.dconv_fc.bias",
        "model.transformer_1.mha.dual_ln_s.weight", "model.transformer_1.mha.dual_ln_l.bias",
        "model.transformer_1.norm2.bias", "model.transformer_1.mlpblock.0.weight", "model.transformer_1.mlpblock.3.bias",
        "model.norm.weight", "seq_classifer.mlpblock.0.weight", "seq_classifer.mlpblock.2.bias"}) {
    INFO(name);
    CHECK(has_name(ls, name));
  }
  CHECK(ls.state_dict().front().first == "model.cls_embed");  // the Model's own parameter first, as PyTorch
  CHECK(ls.model->cls_embed.shape() == Shape({1, 1, 8}));
  CHECK(ls.model->cls_embed.to_vector<float>() == std::vector<float>(8, 0.0f));  // zero-initialised (§2.6)
  CHECK(!has_name(lra::LraClassifier(tiny("long_short", "mean")), "model.cls_embed"));

  lra::LraModelOptions dual = tiny("full", "mean");
  dual.dual = true;
  lra::LraClassifier d(dual);
  CHECK(d.seq_classifer->mlpblock->operator[](0)->state_dict().front().second.shape() == Shape({8, 32}));  // 4d inputs

  CHECK(lra::pad_multiple(tiny("long_short", "cls")) == 2);
  CHECK(lra::pad_multiple(tiny("full", "cls")) == 1);
  CHECK(!lra::fixed_length(tiny("long_short", "cls")));
  CHECK(lra::fixed_length(tiny("linformer", "mean")));

  // Linformer: one E, registered by the first layer, used by both (the LRA code's shared matrix).
  lra::LraClassifier lin(tiny("linformer", "mean"));
  CHECK(has_name(lin, "model.transformer_0.mha.E"));
  CHECK(!has_name(lin, "model.transformer_1.mha.E"));
}

TEST_CASE("LraClassifier matches the PyTorch model: logits and loss gradients (f64), logits in f32", "[lra]") {
  const auto& fixture = test::cached_fixture("lra_model");
  for (const auto& [name, c] : fixture.items()) {
    INFO("case " << name);
    lra::LraClassifier model(options_from(c.at("config")));
    model.to(kF64);
    std::map<std::string, Tensor> state;
    for (const auto& [k, t] : c.at("state").items()) state[k] = test::fixture_tensor(t);
    model.load_state_dict(state);  // strict: every official name present, none extra
    Tensor tokens = test::fixture_tensor(c.at("tokens"));
    Tensor mask = test::fixture_tensor(c.at("mask"));
    Tensor logits = c.contains("tokens2")
                        ? model.forward(tokens, mask, test::fixture_tensor(c.at("tokens2")), test::fixture_tensor(c.at("mask2")))
                        : model.forward(tokens, mask);
    // f64 throughout: unit roundoff u = 2^-53 ≈ 1.1e-16. The deepest path stacks ~30 stages
    // (embedding sum, 2 × [LN, 3 projections, softmax, context, W_o, LN, 2-layer MLP], LN, head)
    // whose reductions are at most L = 16 long; a relative error of L·u per stage grows to
    // ≤ 30·16·u ≈ 5e-14 for O(1) values, amplified by at most ~10 by the LayerNorm/softmax
    // Jacobians at these scales: atol = rtol = 1e-12 (values and gradients alike).
    const double tol = 1e-12;
    test::check_close(logits, test::fixture_tensor(c.at("logits")), tol, tol);
    Tensor loss = cross_entropy(logits, test::fixture_tensor(c.at("labels")));
    CHECK(std::fabs(loss.item<double>() - c.at("loss").get<double>()) <= tol);
    loss.backward();
    std::map<std::string, Tensor> params;
    for (const auto& [k, t] : model.named_parameters()) params[k] = t;
    for (const auto& [k, g] : c.at("grads").items()) {
      INFO("gradient of " << k);
      REQUIRE(params.count(k) == 1);
      REQUIRE(params[k].grad().defined());
      test::check_close(params[k].grad(), test::fixture_tensor(g), tol, tol);
    }

    // The same model in f32 (parameters are multiples of 2^-8, exact in f32): u = 2^-24 ≈ 6e-8,
    // with the same 30 stages × L = 16 × amplification ≤ 10 as above: 30·16·10·u ≈ 3e-4.
    model.to(kF32);
    Tensor logits32 = c.contains("tokens2")
                          ? model.forward(tokens, mask, test::fixture_tensor(c.at("tokens2")), test::fixture_tensor(c.at("mask2")))
                          : model.forward(tokens, mask);
    CHECK(logits32.dtype() == kF32);
    test::check_close(logits32, test::fixture_tensor(c.at("logits")), 3e-4, 3e-4);
  }
}

TEST_CASE("LraClassifier on packed sequences equals the padded computation: logits, hidden states, gradients", "[lra]") {
  // options.packed (the default) runs the position-wise layers on the real tokens only; the
  // padded path computes every position, as the official code. Same parameters, same inputs
  // (right padding and, through a hand-made mask, holes): the real tokens' results agree to f64
  // rounding. Tolerance as the PyTorch comparison above: ~30 stages × reductions ≤ 16 × u ×
  // amplification 10 ≈ 5e-13 → 1e-12.
  for (const std::string pooling : {"cls", "mean"}) {
    for (bool fused : {true, false}) {
      INFO("pooling " << pooling << ", fused " << fused);
      lra::LraModelOptions o = tiny("long_short", pooling);
      o.fused = fused;
      lra::LraClassifier packed(o);
      o.packed = false;
      lra::LraClassifier padded(o);
      packed.to(kF64);
      padded.to(kF64);
      randomise(packed, 3);
      std::map<std::string, Tensor> state;
      for (const auto& [k, t] : packed.state_dict()) state[k] = t;
      padded.load_state_dict(state);
      Docs d = make_docs(random_rows({16, 9, 3, 12}, 12, 8), 16);
      d.mask.select(0, 0).narrow(0, 5, 3).fill_(0.0);  // a hole inside the first example
      const Tensor labels = tensor(std::vector<int64_t>{0, 2, 1, 1}, {4});
      std::vector<Tensor> hidden_packed, hidden_padded;
      Tensor a = packed.model->forward(d.tokens, d.mask, &hidden_packed);
      Tensor b = padded.model->forward(d.tokens, d.mask, &hidden_padded);
      test::check_close(a, b, 1e-12, 1e-12);
      REQUIRE(hidden_packed.size() == hidden_padded.size());
      for (size_t i = 0; i < hidden_packed.size(); ++i) {
        INFO("hidden state " << i);
        REQUIRE(hidden_packed[i].shape() == hidden_padded[i].shape());
        // Real rows (and the CLS row) agree; padding is 0 on the packed path.
        Tensor real = d.mask.to(kF64).unsqueeze(2);
        if (hidden_packed[i].size(1) > d.tokens.size(1))  // the CLS row first
          real = cat({ones({4, 1, 1}, TensorOptions(kF64)), real}, 1);
        test::check_close(mul(hidden_packed[i], real), mul(hidden_padded[i], real), 1e-12, 1e-12);
        CHECK(sum(abs(sub(hidden_packed[i], mul(hidden_packed[i], real)))).item<double>() == 0.0);
      }
      cross_entropy(packed.forward(d.tokens, d.mask), labels).backward();
      cross_entropy(padded.forward(d.tokens, d.mask), labels).backward();
      std::map<std::string, Tensor> padded_params;
      for (const auto& [k, t] : padded.named_parameters()) padded_params[k] = t;
      for (const auto& [k, t] : packed.named_parameters()) {
        INFO("gradient of " << k);
        REQUIRE(t.grad().defined());
        test::check_close(t.grad(), padded_params.at(k).grad(), 1e-12, 1e-12);
      }
    }
  }
}

TEST_CASE("LraClassifier logits do not depend on extra right padding", "[lra]") {
  struct Variant {
    std::string attention, pooling;
    int64_t window, rank;
  };
  for (const auto& v : std::vector<Variant>{{"long_short", "cls", 2, 2}, {"long_short", "mean", 2, 2},
                                            {"long_short", "cls", 0, 3}, {"long_short", "mean", 4, 0},
                                            {"full", "cls", 0, 0}, {"full", "mean", 0, 0}}) {
    for (bool fused : {true, false}) {
      if (!fused && v.attention != "long_short") continue;
      INFO(v.attention << " pooling " << v.pooling << " w " << v.window << " r " << v.rank << " fused " << fused);
      lra::LraModelOptions o = tiny(v.attention, v.pooling);
      o.window = v.window;
      o.rank = v.rank;
      o.fused = fused;
      lra::LraClassifier model(o);
      randomise(model, 5);
      model.eval();
      const auto rows = random_rows({8, 5, 1, 7}, o.vocab_size, 3);
      Docs short_docs = make_docs(rows, 8), long_docs = make_docs(rows, 16);
      Tensor a = model.forward(short_docs.tokens, short_docs.mask);
      Tensor b = model.forward(long_docs.tokens, long_docs.mask);
      // Padded positions add exact zeros (zero probability, zero projection weight, masked from
      // the pooled mean); only the summation order of reductions over n can change. f32,
      // u = 2^-24 ≈ 6e-8, reductions of length ≤ 16, ~30 stacked stages each amplifying by
      // ≤ ~2 at these scales: 30·16·2·u ≈ 6e-5 relative on O(1) logits → atol = rtol = 1e-4.
      test::check_close(b, a, 1e-4, 1e-4);
      // The example alone (no other rows in the batch) gives the same logits too.
      Docs alone = make_docs({rows[2]}, 4 * std::max<int64_t>(o.window, 1));
      test::check_close(model.forward(alone.tokens, alone.mask), a.narrow(0, 2, 1), 1e-4, 1e-4);
    }
  }
}

TEST_CASE("LraClassifier injects the CLS only into the last layer", "[lra]") {
  for (const std::string attention : {"long_short", "full"}) {
    INFO(attention);
    lra::LraModelOptions o = tiny(attention, "cls");
    lra::LraClassifier model(o);
    randomise(model, 7);
    model.eval();
    Docs d = make_docs(random_rows({8, 6}, o.vocab_size, 4), 8);
    std::vector<Tensor> hidden1, hidden2;
    model.model->forward(d.tokens, d.mask, &hidden1);
    REQUIRE(hidden1.size() == 2);
    CHECK(hidden1[0].shape() == Shape({2, 8, 8}));      // layer 0: tokens only
    CHECK(hidden1[1].shape() == Shape({2, 1 + 8, 8}));  // last layer: CLS row first
    Tensor logits1 = model.forward(d.tokens, d.mask);

    Generator g(9);
    nn::init::normal_(model.model->cls_embed, 0.0, 1.0, &g);
    model.model->forward(d.tokens, d.mask, &hidden2);
    // The first layer never sees the CLS: bit-identical activations.
    CHECK(hidden2[0].to_vector<float>() == hidden1[0].to_vector<float>());
    // The readout depends on it.
    Tensor logits2 = model.forward(d.tokens, d.mask);
    CHECK(amax(abs(sub(logits2, logits1))).item<float>() > 1e-3f);

    // The CLS row's residual is the raw CLS: with the attention's and MLP's output layers zeroed,
    // the block returns [c; X] unchanged (no LayerNorm on the CLS's residual path).
    auto block = model.model->blocks.back();
    Tensor c = model.model->cls_embed;
    for (const auto& [k, t] : block->named_parameters())
      if (k.starts_with("mha.W_o") || k.starts_with("mlpblock.3")) nn::init::zeros_(t);
    Tensor out = block->forward(hidden2[0], d.mask, c.expand({2, 1, 8}));
    test::check_close(out.narrow(1, 0, 1), c.expand({2, 1, 8}), 0.0, 0.0);
    test::check_close(out.narrow(1, 1, 8), hidden2[0], 0.0, 0.0);
  }
}

TEST_CASE("LraClassifier pooled at the CLS forms only the last layer's CLS row: same logits and gradients", "[lra]") {
  // Without `hidden`, the last block computes its CLS row alone (LraBlock cls_only); asked for
  // every layer's states it computes all rows. Both give the same pooled features, and the loss
  // gradients agree: the discarded rows' gradients are zero, so the two differ only where a
  // product over fewer rows runs another GEMM kernel or register tile, or a weight gradient sums
  // zero terms between its rows' products, rounding a step differently (≤ (d + 1)·u of the
  // terms, u = 2^-53), passed on through ~30 stages amplifying ≤ ~10 each at these scales →
  // 1e-12, as the tests above.
  struct Variant {
    std::string attention;
    bool packed, fused;
  };
  for (const auto& v : std::vector<Variant>{{"long_short", true, true}, {"long_short", false, true},
                                            {"long_short", true, false}, {"full", false, true}}) {
    INFO(v.attention << " packed " << v.packed << " fused " << v.fused);
    lra::LraModelOptions o = tiny(v.attention, "cls");
    o.packed = v.packed;
    o.fused = v.fused;
    lra::LraClassifier model(o);
    model.to(kF64);
    randomise(model, 21);
    Docs d = make_docs(random_rows({16, 9, 3, 12}, o.vocab_size, 22), 16);
    const Tensor labels = tensor(std::vector<int64_t>{0, 2, 1, 1}, {4});
    int64_t macs[2] = {0, 0};  // the forward's multiply-adds: all rows, CLS rows only
    auto grads = [&](bool all_rows) {
      model.zero_grad();
      std::vector<Tensor> hidden;
      Tensor features;
      {
        FlopCounter counter;
        features = model.model->forward(d.tokens, d.mask, all_rows ? &hidden : nullptr);
        macs[all_rows ? 0 : 1] = counter.multiply_adds();
      }
      if (all_rows) REQUIRE(hidden.back().size(1) == 1 + 16);  // the last layer's every row was formed
      cross_entropy(model.seq_classifer->forward(features), labels).backward();
      std::vector<Tensor> out{features.detach()};
      for (const auto& [k, t] : model.named_parameters()) out.push_back(t.grad());
      return out;
    };
    const std::vector<Tensor> all = grads(true), cls_row = grads(false);
    // The work left out: the last layer's token rows through the MLP (d·ffn + ffn·d each) and,
    // where the attention has a CLS slot, through W_o (d·d); the packed path has only the real
    // tokens' rows (16 + 9 + 3 + 12), the padded one all 4 × 16. Full attention takes the CLS as
    // a token and still forms every row of its own output.
    const int64_t rows = v.packed ? 40 : 4 * 16, d_ = o.dim, ffn = o.ffn_dim;
    const int64_t skipped = rows * (2 * d_ * ffn + (v.attention == "long_short" ? d_ * d_ : 0));
    CHECK(macs[0] - macs[1] == skipped);
    REQUIRE(all.size() == cls_row.size());
    for (size_t i = 0; i < all.size(); ++i) {
      INFO("pooled features, then parameter gradient " << i);
      REQUIRE(all[i].defined());
      REQUIRE(cls_row[i].defined());
      test::check_close(cls_row[i], all[i], 1e-12, 1e-12);
    }
  }
  // A block asked for the CLS row alone without a CLS is an error.
  lra::LraClassifier model(tiny("long_short", "cls"));
  Docs d = make_docs(random_rows({8, 6}, 12, 4), 8);
  CHECK_THROWS_WITH(model.model->blocks.back()->forward(randn({2, 8, 8}), d.mask, Tensor(), /*cls_only=*/true),
                    Catch::Contains("cls_only") && Catch::Contains("no cls was passed"));
}

TEST_CASE("LraClassifier passes f64 gradcheck of the loss w.r.t. its parameters", "[lra]") {
  struct Variant {
    std::string attention, pooling;
    bool fused;
  };
  for (const auto& v : std::vector<Variant>{{"long_short", "cls", true}, {"long_short", "cls", false},
                                            {"long_short", "mean", true}, {"full", "cls", true}}) {
    INFO(v.attention << " pooling " << v.pooling << " fused " << v.fused);
    lra::LraModelOptions o = {.vocab_size = 6, .max_seq_len = 4, .dim = 4, .heads = 2, .layers = 2, .ffn_dim = 8,
                              .num_classes = 3, .attention = attention_kind(v.attention), .window = 2, .rank = 2,
                              .pooling = pooling_kind(v.pooling), .head_hidden = 4, .fused = v.fused};
    lra::LraClassifier model(o);
    model.to(kF64);
    randomise(model, 11);
    Docs d = make_docs({{1, 2, 3, 4}, {5, 2, 1}}, 4);
    Tensor labels = tensor(std::vector<int64_t>{2, 0}, {2});
    std::map<std::string, Tensor> params;
    for (const auto& [k, t] : model.named_parameters()) params[k] = t;
    TensorList inputs = {params.at("model.embeddings.word_embeddings.weight"),
                         params.at("model.embeddings.position_embeddings.weight"),
                         params.at("model.transformer_0.mha.W_k.weight"), params.at("model.transformer_1.norm1.weight"),
                         params.at("model.transformer_1.mlpblock.0.weight"), params.at("model.norm.bias"),
                         params.at("seq_classifer.mlpblock.0.weight")};
    if (v.pooling == "cls") inputs.push_back(params.at("model.cls_embed"));
    if (v.attention == "long_short") inputs.push_back(params.at("model.transformer_0.mha.dconv_fc.weight"));
    // Central differences with eps = 1e-6 on an O(1) loss: truncation O(eps²) ≈ 1e-12, rounding
    // 2^-53/eps ≈ 1e-10; atol 1e-7 / rtol 1e-5 leave a wide margin above both and still catch
    // any wrong gradient term.
    auto r = testing::gradcheck(
        [&](const TensorList&) { return cross_entropy(model.forward(d.tokens, d.mask), labels); }, inputs,
        {.atol = 1e-7, .rtol = 1e-5});
    INFO(r.message);
    CHECK(r.ok);
  }
}

TEST_CASE("LraClassifier learns a tiny synthetic task in 30 AdamW steps", "[lra]") {
  // Label = the first token's id mod 3: the CLS must read position 0 through the attention.
  default_generator().manual_seed(2026);  // a fixed initialisation, whatever ran before
  lra::LraModelOptions o = tiny("long_short", "cls");
  o.dim = 16;
  o.ffn_dim = 32;
  o.head_hidden = 16;
  lra::LraClassifier model(o);
  const auto rows = random_rows({8, 6, 4, 8, 7, 5, 8, 3, 6, 8, 2, 8, 5, 7, 8, 4}, o.vocab_size, 21);
  Docs d = make_docs(rows, 8);
  std::vector<int64_t> y;
  for (const auto& row : rows) y.push_back(row[0] % 3);
  Tensor labels = tensor(y, {int64_t(y.size())});
  optim::AdamW opt(model.named_parameters(), {.lr = 3e-3, .eps = 1e-6, .weight_decay = 0.0});
  std::vector<double> losses;
  for (int step = 0; step < 30; ++step) {
    Tensor loss = cross_entropy(model.forward(d.tokens, d.mask), labels);
    losses.push_back(loss.item<float>());
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  INFO("first loss " << losses.front() << ", last loss " << losses.back());
  const double first = (losses[0] + losses[1] + losses[2]) / 3, last = (losses[27] + losses[28] + losses[29]) / 3;
  CHECK(last < 0.7 * first);
}

TEST_CASE("LraClassifier dropout acts in training mode only, with masks from options.generator", "[lra]") {
  for (const std::string attention : {"long_short", "full"}) {
    INFO(attention);
    Generator gen(3);
    lra::LraModelOptions o = tiny(attention, "cls");
    o.dropout = 0.3;
    o.attention_dropout = 0.2;
    o.generator = &gen;
    lra::LraClassifier noisy(o);
    randomise(noisy, 13);
    lra::LraClassifier clean(tiny(attention, "cls"));
    std::map<std::string, Tensor> state;
    for (const auto& [k, t] : noisy.state_dict()) state[k] = t;
    clean.load_state_dict(state);  // the same parameters, no dropout
    clean.eval();
    Docs d = make_docs(random_rows({8, 6}, 12, 8), 8);
    Tensor reference = clean.forward(d.tokens, d.mask);

    noisy.eval();  // eval mode: every dropout is the identity
    CHECK(noisy.forward(d.tokens, d.mask).to_vector<float>() == reference.to_vector<float>());
    noisy.train();
    gen.manual_seed(4);
    Tensor a = noisy.forward(d.tokens, d.mask);
    gen.manual_seed(4);
    Tensor b = noisy.forward(d.tokens, d.mask);
    CHECK(a.to_vector<float>() == b.to_vector<float>());           // replayed from the generator
    CHECK(amax(abs(sub(a, reference))).item<float>() > 1e-3f);     // and different from eval mode
  }
}

TEST_CASE("LraClassifier rejects bad options and inputs with errors naming them", "[lra]") {
  using Catch::Contains;
  auto with = [](auto edit) {
    lra::LraModelOptions o = tiny("long_short", "cls");
    edit(o);
    return o;
  };
  CHECK_THROWS_WITH(lra::LraClassifier(with([](auto& o) { o.heads = 3; })),
                    Contains("dim = 8") && Contains("heads = 3"));
  // Option names are parsed once (engine/enum_names.h); an enum outside its range is refused too.
  CHECK_THROWS_WITH(attention_kind("sparse"), Contains("attention must be one of long_short, full, linformer") && Contains("sparse"));
  CHECK_THROWS_WITH(pooling_kind("max"), Contains("pooling must be one of cls, mean") && Contains("max"));
  CHECK_THROWS_WITH(lra::LraClassifier(with([](auto& o) { o.attention = lra::AttentionKind(7); })),
                    Contains("attention") && Contains("7"));
  CHECK_THROWS_WITH(lra::LraClassifier(with([](auto& o) { o.pooling = lra::Pooling(5); })), Contains("pooling") && Contains("5"));
  CHECK_THROWS_WITH(lra::LraClassifier(with([](auto& o) { o.window = -1; })), Contains("window"));
  CHECK_THROWS_WITH(lra::LraClassifier(with([](auto& o) { o.window = 0; o.rank = 0; })),
                    Contains("window = 0 and rank = 0") && Contains("layers = 2"));
  CHECK_NOTHROW(lra::LraClassifier(with([](auto& o) { o.window = 0; o.rank = 0; o.layers = 1; })));
  CHECK_THROWS_WITH(lra::LraClassifier(with([](auto& o) { o.attention = lra::AttentionKind::Linformer; })),
                    Contains("linformer") && Contains("mean"));
  CHECK_THROWS_WITH(lra::LraClassifier(with([](auto& o) { o.dropout = 1.0; })), Contains("dropout"));
  CHECK_THROWS_WITH(lra::LraClassifier(with([](auto& o) { o.layers = 0; })), Contains("layers"));
  CHECK_THROWS_WITH(lra::LraClassifier(with([](auto& o) { o.vocab_size = 0; })), Contains("vocab_size"));

  lra::LraClassifier model(tiny("long_short", "cls"));
  Docs d = make_docs(random_rows({8, 4}, 12, 1), 8);
  Docs too_long = make_docs(random_rows({18}, 12, 1), 18);
  CHECK_THROWS_WITH(model.forward(too_long.tokens, too_long.mask),
                    Contains("n = 18") && Contains("max_seq_len = 16"));
  Docs high = make_docs({{1, 2, 12, 3}}, 8), negative = make_docs({{1, -1, 3, 4}}, 8);
  CHECK_THROWS_WITH(model.forward(high.tokens, high.mask), Contains("[0, 12]") && Contains("vocab_size = 12"));
  CHECK_THROWS_WITH(model.forward(negative.tokens, negative.mask), Contains("[-1, 4]") && Contains("vocab_size = 12"));
  CHECK_THROWS_WITH(model.forward(d.tokens, d.mask.narrow(1, 0, 6)),
                    Contains("mask has shape {2, 6}") && Contains("{2, 8}"));
  CHECK_THROWS_WITH(model.forward(d.tokens, d.tokens), Contains("mask must be bool"));
  CHECK_THROWS_WITH(model.forward(d.tokens.to(kF32), d.mask), Contains("tokens must be i64"));
  Docs odd = make_docs(random_rows({5}, 12, 1), 5);
  CHECK_THROWS_WITH(model.forward(odd.tokens, odd.mask), Contains("n = 5") && Contains("window = 2"));
  CHECK_THROWS_WITH(model.forward(d.tokens, d.mask, d.tokens, d.mask), Contains("dual = false"));

  lra::LraModelOptions dual = tiny("full", "mean");
  dual.dual = true;
  lra::LraClassifier two(dual);
  CHECK_THROWS_WITH(two.forward(d.tokens, d.mask), Contains("dual = true"));
  Docs one = make_docs(random_rows({3}, 12, 2), 8);
  CHECK_THROWS_WITH(two.forward(d.tokens, d.mask, one.tokens, one.mask), Contains("batch sizes differ"));

  lra::LraClassifier lin(tiny("linformer", "mean"));
  CHECK_THROWS_WITH(lin.forward(d.tokens, d.mask), Contains("linformer") && Contains("max_seq_len = 16") &&
                                                       Contains("n = 8"));
}
