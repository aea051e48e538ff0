// Tests of the char-level Transformer-LS language model (models/lm, transformer-ls.md §3): the
// official state_dict names and the tied output; log-probabilities, memories and gradients
// against a PyTorch re-implementation (tests/fixtures/gen_lm_model.py) for the long-short model
// (with an evaluation tail), the M ≤ w branch and the full-attention baseline; a converted
// official-style checkpoint; strict causality across blocks; the memory (recorded before LN1,
// carried, reset per stream, saved); §3.7 at model level; the padding rule; the loss; a float64
// gradcheck; the full baseline against a dense oracle; the parameter count; a short training
// run; option errors.
#include <cmath>

#include "lm_helpers.h"
#include "lsformer/models/attention/causal_long_short.h"
#include "lsformer/models/lm/causal_full_attention.h"
#include "lsformer/models/lm/lm_loss.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/models/optim/adam.h"

using namespace lsf;
using namespace lsf::test::lm_tests;

namespace {

bool has_name(const nn::Module& m, const std::string& name) {
  for (const auto& [k, t] : m.state_dict())
    if (k == name) return true;
  return false;
}

// The dense f64 oracle of lm::CausalFullAttention (its header's formula, per query and key):
// x [B, M, d], xm [B, C, d] → [B, M, d] row-major.
std::vector<double> full_attention_oracle(const lm::CausalFullAttention& a, const Tensor& x_t, const Tensor& xm_t) {
  const auto& o = a.options();
  const int64_t B = x_t.size(0), M = x_t.size(1), C = xm_t.size(1), d = o.dim, H = o.heads, e = d / H, P = C + M;
  auto V = [](const Tensor& t) { return t.to_vector<double>(); };
  const auto Wq = V(a.proj_query->weight), Wk = V(a.proj_key->weight), Wv = V(a.proj_val->weight);
  const auto Wo = V(a.proj_out->weight), Wr = V(a.r_net->weight), u = V(a.r_w_bias), vb = V(a.r_r_bias);
  const auto X = V(x_t), XM = V(xm_t);
  auto affine = [&](const std::vector<double>& W, const double* in) {
    std::vector<double> y(static_cast<size_t>(d), 0.0);
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) y[size_t(i)] += W[size_t(i * d + j)] * in[j];
    return y;
  };
  std::vector<double> out(static_cast<size_t>(B * M * d));
  for (int64_t b = 0; b < B; ++b) {
    std::vector<std::vector<double>> keys, values;  // key s of [memory ; block]
    for (int64_t s = 0; s < P; ++s) {
      const double* row = s < C ? &XM[size_t((b * C + s) * d)] : &X[size_t((b * M + s - C) * d)];
      keys.push_back(affine(Wk, row));
      values.push_back(affine(Wv, row));
    }
    for (int64_t t = 0; t < M; ++t) {
      const auto q = affine(Wq, &X[size_t((b * M + t) * d)]);
      std::vector<double> ctx(static_cast<size_t>(d), 0.0);
      for (int64_t hd = 0; hd < H; ++hd) {
        std::vector<double> logits;
        for (int64_t s = 0; s <= C + t; ++s) {
          std::vector<double> sc(static_cast<size_t>(d));
          const double delta = double(C + t - s);
          for (int64_t k = 0; k < d / 2; ++k) {
            const double f = std::pow(10000.0, -2.0 * double(k) / double(d));
            sc[size_t(k)] = std::sin(delta * f);
            sc[size_t(d / 2 + k)] = std::cos(delta * f);
          }
          const auto R = affine(Wr, sc.data());
          double z = 0;
          for (int64_t i = 0; i < e; ++i) {
            const double qi = q[size_t(hd * e + i)] / std::sqrt(double(e));
            z += (qi + u[size_t(hd * e + i)]) * keys[size_t(s)][size_t(hd * e + i)] +
                 (qi + vb[size_t(hd * e + i)]) * R[size_t(hd * e + i)];
          }
          logits.push_back(z);
        }
        double mx = -INFINITY, total = 0;
        for (double z : logits) mx = std::max(mx, z);
        for (double z : logits) total += std::exp(z - mx);
        for (size_t s = 0; s < logits.size(); ++s)
          for (int64_t i = 0; i < e; ++i)
            ctx[size_t(hd * e + i)] += std::exp(logits[s] - mx) / total * values[s][size_t(hd * e + i)];
      }
      const auto y = affine(Wo, ctx.data());
      for (int64_t i = 0; i < d; ++i) out[size_t((b * M + t) * d + i)] = y[size_t(i)];
    }
  }
  return out;
}

}  // namespace

TEST_CASE("LM: the official state_dict names, the tied output weight is stored once", "[lm]") {
  lm::TransformerLSModel model(tiny());
  for (const char* name :
       {"in_emb.weight", "out_emb.bias", "layers.0.attn.proj_query.weight", "layers.0.attn.proj_key.weight",
        "layers.0.attn.proj_val.weight", "layers.0.attn.proj_out.weight", "layers.0.attn.dconv_1.weight",
        "layers.0.attn.dconv_1.bias", "layers.0.attn.r_net.weight", "layers.0.attn.r_net_chunk.weight",
        "layers.0.attn.r_net_chunk.bias", "layers.0.attn.r_w_bias", "layers.0.attn.r_r_bias",
        "layers.0.attn.dual_ln_win.weight", "layers.0.attn.dual_ln_dproj.bias", "layers.1.norm1.weight",
        "layers.1.ff.fc1.weight", "layers.1.ff.fc2.bias", "layers.1.norm2.bias"}) {
    INFO(name);
    CHECK(has_name(model, name));
  }
  CHECK_FALSE(has_name(model, "out_emb.weight"));
  CHECK_FALSE(has_name(model, "layers.0.attn.proj_query.bias"));  // use_bias false
  CHECK_FALSE(has_name(model, "layers.0.attn.r_net.bias"));
  CHECK(model.state_dict().front().first == "in_emb.weight");
  CHECK(model.layers[0]->attn->state_dict().size() == 15);  // as the official ChunkedLSAttention
  CHECK(model.parameter_count() == lm::parameter_count(model.options()));

  lm::TransformerLSModel full(tiny(lm::LmAttention::Full));
  CHECK(has_name(full, "layers.1.attn.r_net.weight"));
  CHECK(has_name(full, "layers.1.attn.r_w_bias"));
  CHECK_FALSE(has_name(full, "layers.1.attn.dconv_1.weight"));
  CHECK_FALSE(has_name(full, "layers.1.attn.dual_ln_win.weight"));
  CHECK(full.parameter_count() == lm::parameter_count(full.options()));
}

TEST_CASE("LM: initialisation as §6 (AR column)", "[lm]") {
  lm::LmModelOptions o = tiny();
  o.dim = 64;
  o.heads = 4;
  o.ffn_dim = 128;
  o.vocab_size = 64;
  o.bias = true;
  Generator g(5);
  o.generator = &g;
  lm::TransformerLSModel model(o);
  // Sample moments over n values: |mean − μ| ≤ 5σ/√n and |std − σ| ≤ 5σ/√(2n) (5 standard errors).
  auto check_normal = [](const std::vector<double>& xs, double mu, double sigma, const std::string& what) {
    const double n = double(xs.size());
    double mean = 0, var = 0;
    for (double x : xs) mean += x;
    mean /= n;
    for (double x : xs) var += (x - mean) * (x - mean);
    const double sd = std::sqrt(var / n);
    INFO(what << ": mean " << mean << " std " << sd << " over " << xs.size());
    CHECK(std::fabs(mean - mu) <= 5 * sigma / std::sqrt(n));
    CHECK(std::fabs(sd - sigma) <= 5 * sigma / std::sqrt(2 * n));
  };
  std::vector<double> linear_w, ln_w, uv;
  for (const auto& [name, p] : model.named_parameters()) {
    const auto v = p.to_vector<double>();
    const bool norm = name.find("norm") != std::string::npos || name.find("dual_ln") != std::string::npos;
    if (name == "in_emb.weight") check_normal(v, 0.0, 0.02, name);
    else if (name.ends_with("r_w_bias") || name.ends_with("r_r_bias")) uv.insert(uv.end(), v.begin(), v.end());
    else if (norm && name.ends_with("weight")) ln_w.insert(ln_w.end(), v.begin(), v.end());
    else if (name.ends_with("weight")) linear_w.insert(linear_w.end(), v.begin(), v.end());
    else {  // every bias: Linear, LayerNorm and the output bias are zero
      INFO(name);
      CHECK(v == std::vector<double>(v.size(), 0.0));
    }
  }
  check_normal(linear_w, 0.0, 0.02, "Linear weights");
  check_normal(ln_w, 1.0, 0.02, "LayerNorm weights");
  check_normal(uv, 0.0, 0.02, "u, v");
}

TEST_CASE("LM: log-probabilities, memories and gradients match the PyTorch model", "[lm]") {
  const auto& fixture = test::cached_fixture("lm_model");
  for (const auto& [name, c] : fixture.items()) {
    INFO("case " << name);
    const lm::LmModelOptions o = options_from(c.at("config"));
    lm::TransformerLSModel model(o);
    model.to(kF64);
    model.load_state_dict(test::fixture_state(c.at("state")));  // strict: exactly the official names (minus out_emb.weight)
    const size_t blocks = c.at("blocks").size();
    const int64_t pad = c.at("pad");
    lm::Memory memory = model.initial_memory(c.at("config").at("batch"));
    Tensor loss;
    for (size_t k = 0; k < blocks; ++k) {
      INFO("block " << k);
      Tensor lp = model.forward(test::fixture_tensor(c.at("blocks")[k]), memory);
      // f64: model_tol (16·blocks·L·u ≈ 2e-12 here) bounds the reduction error of every path.
      const double tol = model_tol(o, kF64, int64_t(k) + 1);
      test::check_close(lp, test::fixture_tensor(c.at("log_probs")[k]), tol, tol);
      if (c.contains("memory"))
        for (size_t i = 0; i < memory.layers.size(); ++i) {
          INFO("memory layer " << i);
          CHECK(!memory.layers[i].requires_grad());
          test::check_close(memory.layers[i], test::fixture_tensor(c.at("memory")[k][i]), tol, tol);
        }
      Tensor block_loss = lm::lm_loss(lp, test::fixture_tensor(c.at("targets")[k]), pad);
      loss = k == 0 ? block_loss : add(loss, block_loss);
    }
    const double tol = model_tol(o, kF64, int64_t(blocks));
    CHECK(std::fabs(loss.item<double>() - c.at("loss").get<double>()) <= tol);
    loss.backward();
    std::map<std::string, Tensor> params;
    for (const auto& [k, t] : model.named_parameters()) params[k] = t;
    for (const auto& [k, g] : c.at("grads").items()) {
      INFO("gradient of " << k);
      REQUIRE(params.count(k) == 1);
      REQUIRE(params[k].grad().defined());
      // A gradient sums the per-position paths over B·M positions of every block: ×B·M.
      const double gtol = tol * double(c.at("config").at("batch").get<int64_t>() * o.block_length);
      test::check_close(params[k].grad(), test::fixture_tensor(g), gtol, gtol);
    }

    // The same parameters in f32 (multiples of 2^-8: exact), the first block.
    model.to(kF32);
    lm::Memory m32 = model.initial_memory(c.at("config").at("batch"));
    Tensor lp32 = model.forward(test::fixture_tensor(c.at("blocks")[0]), m32);
    CHECK(lp32.dtype() == kF32);
    const double tol32 = model_tol(o, kF32);
    test::check_close(lp32, test::fixture_tensor(c.at("log_probs")[0]), tol32, tol32);
  }
}

TEST_CASE("LM: a converted official-style checkpoint loads and reproduces PyTorch", "[lm]") {
  // tests/fixtures/lm_model_converted.safetensors: scripts/convert_lm_checkpoint.py run on a
  // fairseq-style checkpoint of the fixture's first case ("decoder.model." names, a tied
  // out_emb.weight, pos_emb.inv_freq), written as f32.
  const auto file = load_safetensors(std::string(LSF_FIXTURE_DIR) + "/lm_model_converted.safetensors");
  REQUIRE(file.metadata.count("lm_options") == 1);
  const auto meta = nlohmann::json::parse(file.metadata.at("lm_options"));
  const auto& c = test::cached_fixture("lm_model").at("long_short");
  for (const char* key : {"vocab_size", "dim", "heads", "layers", "ffn_dim", "rank", "bias", "chunk_length", "window",
                          "memory_length", "block_length"}) {
    INFO(key);
    CHECK(meta.at(key) == c.at("config").at(key));
  }
  CHECK(file.tensors.count("out_emb.weight") == 0);
  CHECK(file.tensors.count("pos_emb.inv_freq") == 0);
  lm::TransformerLSModel model(options_from(c.at("config")));
  model.to(kF64);
  model.load_state_dict(file.tensors);  // strict
  lm::Memory memory = model.initial_memory(c.at("config").at("batch"));
  for (size_t k = 0; k < c.at("blocks").size(); ++k) {
    INFO("block " << k);
    // The parameters are multiples of 2^-8, exact in the f32 file: the f64 tolerance holds.
    const double tol = model_tol(model.options(), kF64, int64_t(k) + 1);
    test::check_close(model.forward(test::fixture_tensor(c.at("blocks")[k]), memory),
                      test::fixture_tensor(c.at("log_probs")[k]), tol, tol);
  }
}

TEST_CASE("LM: strict causality across chunks, blocks and the memory", "[lm]") {
  for (auto attention : {lm::LmAttention::LongShort, lm::LmAttention::Full}) {
    INFO("attention " << lm::to_string(attention));
    lm::TransformerLSModel model(tiny(attention));
    randomise(model, 7);
    model.eval();
    NoGradGuard ng;
    const int64_t M = 8, V = 11;
    const Tensor stream = random_tokens(2, 2 * M, V, 3);  // two consecutive blocks per stream
    auto run = [&](const Tensor& tokens) {
      lm::Memory memory = model.initial_memory(2);
      std::vector<float> out = model.forward(tokens.narrow(1, 0, M).contiguous(), memory).to_vector<float>();
      const auto second = model.forward(tokens.narrow(1, M, M).contiguous(), memory).to_vector<float>();
      // Interleave per stream: [stream][position][V] over both blocks.
      std::vector<float> merged;
      for (int64_t b = 0; b < 2; ++b) {
        merged.insert(merged.end(), out.begin() + b * M * V, out.begin() + (b + 1) * M * V);
        merged.insert(merged.end(), second.begin() + b * M * V, second.begin() + (b + 1) * M * V);
      }
      return merged;
    };
    const auto base = run(stream);
    // t' = 1 (chunk 0), 3 (the second token of chunk 1), 6, 8 (the second block's first), 11, 15.
    for (int64_t tp : {1, 3, 6, 8, 11, 15}) {
      std::vector<int64_t> ids = stream.to_vector<int64_t>();
      ids[size_t(tp)] = (ids[size_t(tp)] + 5) % V;  // stream 0 only
      const auto out = run(tensor(ids, {2, 2 * M}));
      INFO("changed token t' = " << tp);
      for (int64_t i = 0; i < tp * V; ++i) REQUIRE(out[size_t(i)] == base[size_t(i)]);  // bit-identical before t'
      bool changed = false;
      for (int64_t i = tp * V; i < 2 * M * V; ++i) changed |= out[size_t(i)] != base[size_t(i)];
      CHECK(changed);  // the next positions see it
      for (size_t i = size_t(2 * M * V); i < out.size(); ++i) REQUIRE(out[i] == base[i]);  // stream 1 untouched
    }
  }
}

TEST_CASE("LM: embedding dropout hits H0, the window table and the final hidden states, not the chunk table",
          "[lm]") {
  lm::LmModelOptions o = tiny();
  o.emb_dropout = 0.3;
  Generator g(61);
  o.generator = &g;
  lm::TransformerLSModel model(o);  // training mode
  randomise(model, 67);
  const Tensor tokens = random_tokens(2, 8, 11, 71);
  const GeneratorState before = g.state();
  lm::Memory memory = model.initial_memory(2);
  const auto got = model.forward(tokens, memory).to_vector<float>();
  // The same forward by hand from the same generator state, the masks drawn in §3.4's order;
  // `drop_chunk` also drops the chunk table, `drop_window` = false leaves the window table.
  auto by_hand = [&](bool drop_window, bool drop_chunk, Tensor* h0) {
    g.set_state(before);
    Tensor h = dropout(mul(model.in_emb->forward(tokens), std::sqrt(8.0)), 0.3, true, &g);
    if (h0) *h0 = h;
    nn::AttentionArgs tables;
    tables.relative_positions = nn::ar_window_table(4, 8, TensorOptions());
    if (drop_window) tables.relative_positions = dropout(tables.relative_positions, 0.3, true, &g);
    tables.chunk_positions = nn::ar_chunk_table((8 / 2 + 8 / 2) * 2, 8, TensorOptions());
    if (drop_chunk) tables.chunk_positions = dropout(tables.chunk_positions, 0.3, true, &g);
    const lm::Memory zero = model.initial_memory(2);
    for (size_t i = 0; i < model.layers.size(); ++i) h = model.layers[i]->forward(h, zero.layers[i], tables);
    h = dropout(h, 0.3, true, &g);
    return log_softmax(add(matmul(h, model.in_emb->weight.t()), model.out_emb->bias), -1).to_vector<float>();
  };
  Tensor h0;
  CHECK(by_hand(true, false, &h0) == got);
  CHECK(by_hand(true, true, nullptr) != got);
  CHECK(by_hand(false, false, nullptr) != got);
  // Layer 0's memory is the dropped-out H0 (recorded after the embedding dropout, as the official code).
  CHECK(memory.layers[0].to_vector<float>() == h0.to_vector<float>());
}

TEST_CASE("LM: the memory holds the layer inputs before LN1, persists and is reset per stream", "[lm]") {
  lm::TransformerLSModel model(tiny());
  randomise(model, 11);
  model.eval();
  NoGradGuard ng;
  const Tensor block1 = random_tokens(2, 8, 11, 5), block2 = random_tokens(2, 8, 11, 6);

  SECTION("the next memory is the last C rows of [memory ; layer input], detached") {
    lm::LmModelOptions o = tiny();
    o.memory_length = 12;  // C > M: the old memory's last 4 rows stay in front
    lm::TransformerLSModel m(o);
    randomise(m, 12);
    m.eval();
    lm::Memory memory = m.initial_memory(2);
    std::vector<Tensor> inputs1, inputs2;
    m.forward(block1, memory, &inputs1);
    const lm::Memory after1 = memory;
    m.forward(block2, memory, &inputs2);
    REQUIRE(inputs1.size() == 2);
    for (size_t i = 0; i < 2; ++i) {
      INFO("layer " << i);
      CHECK(after1.layers[i].narrow(1, 0, 4).to_vector<float>() == std::vector<float>(2 * 4 * 8, 0.0f));
      CHECK(after1.layers[i].narrow(1, 4, 8).contiguous().to_vector<float>() == inputs1[i].contiguous().to_vector<float>());
      CHECK(memory.layers[i].narrow(1, 0, 4).contiguous().to_vector<float>() ==
            inputs1[i].narrow(1, 4, 4).contiguous().to_vector<float>());
      CHECK(memory.layers[i].narrow(1, 4, 8).contiguous().to_vector<float>() == inputs2[i].contiguous().to_vector<float>());
    }
    // Layer 0's input is the scaled embedding E[x]·√d (no dropout in eval).
    const Tensor emb = mul(m.in_emb->forward(block2), std::sqrt(8.0));
    CHECK(inputs2[0].to_vector<float>() == emb.to_vector<float>());
  }
  SECTION("the memory changes the next block; the initial memory is zeros and attended") {
    lm::Memory carried = model.initial_memory(2);
    model.forward(block1, carried);
    lm::Memory fresh = model.initial_memory(2);
    const auto with_memory = model.forward(block2, carried).to_vector<float>();
    const auto without = model.forward(block2, fresh).to_vector<float>();
    CHECK(with_memory != without);
    for (const Tensor& t : model.initial_memory(2).layers) CHECK(t.to_vector<float>() == std::vector<float>(2 * 8 * 8, 0.0f));
    // The zero memory is attended (as LN1(0) = LN1's beta), not masked: any constant row gives
    // the same LN1 output, so a memory of ones changes nothing, a random one changes block 1.
    lm::Memory zero = model.initial_memory(2), ones = model.initial_memory(2), noise = model.initial_memory(2);
    for (Tensor& t : ones.layers) t = add(t, 1.0);
    for (Tensor& t : noise.layers) t = randn(t.shape());
    const auto with_zero = model.forward(block1, zero).to_vector<float>();
    test::check_close(model.forward(block1, ones), std::vector<double>(with_zero.begin(), with_zero.end()), 1e-5, 1e-5);
    CHECK(model.forward(block1, noise).to_vector<float>() != with_zero);
  }
  SECTION("resetting a stream equals starting that stream from the zero memory") {
    lm::Memory memory = model.initial_memory(2);
    model.forward(block1, memory);
    lm::Memory kept = memory;
    memory.reset_streams({1});
    const auto reset = model.forward(block2, memory).to_vector<float>();
    const auto carried = model.forward(block2, kept).to_vector<float>();
    lm::Memory fresh = model.initial_memory(2);
    const auto restarted = model.forward(block2, fresh).to_vector<float>();
    const size_t half = reset.size() / 2;
    CHECK(std::vector<float>(reset.begin(), reset.begin() + half) == std::vector<float>(carried.begin(), carried.begin() + half));
    CHECK(std::vector<float>(reset.begin() + half, reset.end()) == std::vector<float>(restarted.begin() + half, restarted.end()));
    CHECK(std::vector<float>(reset.begin() + half, reset.end()) != std::vector<float>(carried.begin() + half, carried.end()));
    // The mask form and reset() agree; the kept copy was not changed (no in-place writes).
    lm::Memory masked = kept;
    masked.reset_streams(tensor(std::vector<bool>{false, true}, {2}));
    lm::Memory by_index = kept;
    by_index.reset_streams({1});
    for (size_t i = 0; i < 2; ++i) CHECK(masked.layers[i].to_vector<float>() == by_index.layers[i].to_vector<float>());
    CHECK(kept.layers[0].narrow(0, 1, 1).contiguous().to_vector<float>() != std::vector<float>(8 * 8, 0.0f));
    by_index.reset();
    for (const Tensor& t : by_index.layers) CHECK(t.to_vector<float>() == std::vector<float>(2 * 8 * 8, 0.0f));
    CHECK_THROWS_WITH(kept.reset_streams({2}), Catch::Contains("stream 2") && Catch::Contains("B = 2"));
  }
  SECTION("checkpoint entries round-trip; bad entries are named") {
    lm::Memory memory = model.initial_memory(2);
    model.forward(block1, memory);
    const NamedTensors named = lm::memory_tensors(memory);
    REQUIRE(named.size() == 2);
    CHECK(named[0].first == "lm.memory.0");
    const auto file = parse_safetensors(serialize_safetensors(named));
    const lm::Memory back = lm::memory_from_tensors(file.tensors, model.options());
    for (size_t i = 0; i < 2; ++i) CHECK(back.layers[i].to_vector<float>() == memory.layers[i].to_vector<float>());
    const lm::Memory back64 = back.to(TensorOptions(kF64));
    CHECK(back64.layers[1].dtype() == kF64);
    CHECK(back64.layers[1].to_vector<float>() == memory.layers[1].to_vector<float>());
    auto without = file.tensors;
    without.erase("lm.memory.1");
    CHECK_THROWS_WITH(lm::memory_from_tensors(without, model.options()), Catch::Contains("\"lm.memory.1\" is missing"));
    auto extra = file.tensors;
    extra["lm.memory.2"] = extra["lm.memory.0"];
    CHECK_THROWS_WITH(lm::memory_from_tensors(extra, model.options()), Catch::Contains("unexpected entry \"lm.memory.2\""));
    auto wrong = file.tensors;
    wrong["lm.memory.0"] = zeros({2, 6, 8});
    CHECK_THROWS_WITH(lm::memory_from_tensors(wrong, model.options()), Catch::Contains("lm.memory.0") && Catch::Contains("C = 8"));
  }
}

TEST_CASE("LM: §3.7 at model level — a block's chunks as the next block's memory", "[lm]") {
  // With C = M, the next block's memory is exactly this block's layer inputs H. The memory path
  // compresses LN1(H) and then projects; the block path (what this block's queries saw) projects
  // LN1(H) and then compresses: equal for h = 1, different for h = 2.
  for (int64_t heads : {1, 2}) {
    lm::LmModelOptions o = tiny();
    o.heads = heads;
    lm::TransformerLSModel model(o);
    randomise(model, 13);
    model.to(kF64);
    model.eval();
    NoGradGuard ng;
    lm::Memory memory = model.initial_memory(2);
    std::vector<Tensor> inputs;
    model.forward(random_tokens(2, 8, 11, 9), memory, &inputs);
    double max_diff = 0;
    for (size_t i = 0; i < model.layers.size(); ++i) {
      auto& attn = dynamic_cast<nn::CausalLongShortAttention&>(*model.layers[i]->attn);
      const Tensor xm = model.layers[i]->norm1->forward(memory.layers[i]);  // the next block's Xm
      const Tensor x = model.layers[i]->norm1->forward(inputs[i]);          // this block's X
      REQUIRE(xm.to_vector<double>() == x.to_vector<double>());
      const auto mem = attn.compress_memory(xm), blk = attn.compress_block(x);
      const auto a = mem.k.contiguous().to_vector<double>(), b = blk.k.contiguous().to_vector<double>();
      for (size_t j = 0; j < a.size(); ++j) max_diff = std::max(max_diff, std::fabs(a[j] - b[j]));
    }
    INFO("heads " << heads << " max |memory path − block path| " << max_diff);
    // f64, a projection (d), a compression (l) and LN_G (d): 16·(2d + l)·u, times LN_G's output
    // scale (|γ|·√d ≲ 10 with these parameters).
    if (heads == 1) CHECK(max_diff <= 10 * 16 * (2 * 8 + 2) * 0x1p-53);
    else CHECK(max_diff > 1e-3);
  }
}

TEST_CASE("LM: a short block is padded to a multiple of lcm(l, w) and truncated back", "[lm]") {
  lm::LmModelOptions o = tiny();
  CHECK(lm::padded_length(o, 8) == 8);
  CHECK(lm::padded_length(o, 4) == 4);   // n ≤ w, n % l = 0: as is
  CHECK(lm::padded_length(o, 2) == 2);
  CHECK(lm::padded_length(o, 5) == 8);   // 5 % l ≠ 0 → next multiple of lcm(2, 4) = 4
  CHECK(lm::padded_length(o, 1) == 4);
  CHECK(lm::padded_length(o, 6) == 8);   // 6 > w and 6 % w ≠ 0 (the official tiling would fail)
  CHECK(lm::padded_length(tiny(lm::LmAttention::Full), 5) == 5);
  lm::TransformerLSModel model(o);
  randomise(model, 17);
  model.eval();
  NoGradGuard ng;
  const Tensor block = random_tokens(2, 8, 11, 19);
  lm::Memory short_memory = model.initial_memory(2), padded_memory = model.initial_memory(2);
  const Tensor lp = model.forward(block.narrow(1, 0, 5).contiguous(), short_memory);
  REQUIRE(lp.shape() == Shape({2, 5, 11}));
  // The padded run = the same five tokens followed by three token-0 pads.
  std::vector<int64_t> ids = block.to_vector<int64_t>();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 5; t < 8; ++t) ids[size_t(b * 8 + t)] = 0;
  const Tensor full = model.forward(tensor(ids, {2, 8}), padded_memory);
  CHECK(lp.contiguous().to_vector<float>() == full.narrow(1, 0, 5).contiguous().to_vector<float>());
  for (size_t i = 0; i < 2; ++i) CHECK(short_memory.layers[i].to_vector<float>() == padded_memory.layers[i].to_vector<float>());
}

TEST_CASE("LM: the §3.6 loss sums the NLL of non-pad targets over B·M positions", "[lm]") {
  const Tensor lp = log_softmax(randn({2, 3, 5}, TensorOptions(kF64)), -1);
  const Tensor targets = tensor(std::vector<int64_t>{1, 4, 9, 0, 9, 2}, {2, 3});
  const auto v = lp.to_vector<double>();
  const double want = -(v[0 * 5 + 1] + v[1 * 5 + 4] + v[3 * 5 + 0] + v[5 * 5 + 2]) / 6.0;
  const Tensor loss = lm::lm_loss(lp, targets, /*pad_index=*/9);
  CHECK(std::fabs(loss.item<double>() - want) <= 1e-15);
  CHECK(std::fabs(lm::bits_per_character(std::log(2.0) * 1.25) - 1.25) <= 1e-15);
  CHECK_THROWS_WITH(lm::lm_loss(lp, zeros({2, 4}, kI64), 9), Catch::Contains("[2, 3]"));
}

TEST_CASE("LM: float64 gradcheck of a tiny model with a carried memory", "[lm]") {
  for (auto attention : {lm::LmAttention::LongShort, lm::LmAttention::Full}) {
    INFO("attention " << lm::to_string(attention));
    lm::LmModelOptions o = tiny(attention);
    o.layers = 1;
    o.block_length = 4;
    o.window = 4;
    o.memory_length = 4;
    o.vocab_size = 6;
    lm::TransformerLSModel model(o);
    randomise(model, 23);
    model.to(kF64);
    lm::Memory memory = model.initial_memory(1);
    {
      NoGradGuard ng;
      model.forward(random_tokens(1, 4, 6, 1), memory);  // a non-zero memory
    }
    const Tensor tokens = random_tokens(1, 4, 6, 2);
    const lm::Memory start = memory;
    std::map<std::string, Tensor> p;
    for (const auto& [k, t] : model.named_parameters()) p[k] = t;
    TensorList inputs = {p["in_emb.weight"], p["out_emb.bias"], p["layers.0.attn.r_w_bias"],
                         p["layers.0.attn.proj_key.weight"], p["layers.0.norm1.weight"], p["layers.0.ff.fc1.bias"]};
    if (attention == lm::LmAttention::LongShort) {
      inputs.push_back(p["layers.0.attn.dconv_1.bias"]);
      inputs.push_back(p["layers.0.attn.r_net_chunk.weight"]);
      inputs.push_back(p["layers.0.attn.dual_ln_dproj.weight"]);
    } else {
      inputs.push_back(p["layers.0.attn.r_net.weight"]);
    }
    auto result = testing::gradcheck(
        [&](const TensorList&) {
          lm::Memory m = start;
          return model.forward(tokens, m);
        },
        inputs);
    INFO(result.message);
    CHECK(result.ok);
  }
}

TEST_CASE("LM: the full-attention baseline equals its dense oracle", "[lm]") {
  lm::CausalFullAttention attn({.dim = 8, .heads = 2, .bias = false});
  attn.to(kF64);
  randomise(attn, 29);
  NoGradGuard ng;
  Generator g(31);
  const Tensor x = randn({2, 5, 8}, TensorOptions(kF64), &g), xm = randn({2, 3, 8}, TensorOptions(kF64), &g);
  // f64: projections (d), e-wide logits, a softmax over ≤ C + M = 8 keys, W_o (d): L = 3d + e + 8.
  const double tol = 16.0 * (3 * 8 + 4 + 8) * 0x1p-53 * 10;  // ×10: values up to ~10
  test::check_close(attn.forward(x, {.memory = xm}), full_attention_oracle(attn, x, xm), tol, tol);
  // The same with a passed table (the model's path) gives the same values.
  const Tensor table = lm::relative_distance_table(8, 8, TensorOptions(kF64));
  CHECK(attn.forward(x, {.memory = xm, .relative_positions = table}).to_vector<double>() ==
        attn.forward(x, {.memory = xm}).to_vector<double>());
  CHECK_THROWS_WITH(attn.forward(x), Catch::Contains("memory") && Catch::Contains("required"));
  CHECK_THROWS_WITH(attn.forward(x, {.memory = xm, .relative_positions = zeros({7, 8}, kF64)}),
                    Catch::Contains("[C + M, d] = [8, 8]"));
}

TEST_CASE("LM: ≈ 3.682M parameters per layer at d = 512, h = 8, FFN 2048, r = 1 (§9.4)", "[lm]") {
  lm::LmModelOptions o;  // the enwik8 base model (§3.8)
  o.vocab_size = 205;
  CHECK(lm::layer_parameter_count(o) == 3682312);
  lm::TransformerLSLayer layer(o);  // one layer (not 12): 3.7M parameters, fast to build
  CHECK(layer.parameter_count() == 3682312);
  // 12 layers ≈ 44.2M (the paper's 44M) plus the tied table and the output bias.
  CHECK(lm::parameter_count(o) == 12 * 3682312 + 205 * 512 + 205);
  o.layers = 30;
  CHECK(std::fabs(double(lm::parameter_count(o)) / 1e6 - 110.6) < 0.1);  // the paper's 110M
  // The full baseline's layer, built small: the count formula holds too.
  lm::LmModelOptions f = tiny(lm::LmAttention::Full);
  f.bias = true;
  CHECK(lm::TransformerLSLayer(f).parameter_count() == lm::layer_parameter_count(f));
}

TEST_CASE("LM: a few training steps reduce the loss", "[lm]") {
  lm::LmModelOptions o = tiny();
  o.dropout = 0.1;
  o.emb_dropout = 0.1;
  Generator g(37);
  o.generator = &g;
  lm::TransformerLSModel model(o);
  optim::Adam adam(model.named_parameters(), {.lr = 3e-3});
  // A periodic text: 0 1 2 … 6 0 1 …, two streams offset by 3; targets = the next token.
  auto block = [](int64_t k, int64_t offset) {
    std::vector<int64_t> x;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 9; ++t) x.push_back((k * 8 + t + b * 3 + offset) % 7);
    return tensor(x, {2, 9});
  };
  lm::Memory memory = model.initial_memory(2);
  double first = 0, last = 0;
  for (int64_t step = 0; step < 60; ++step) {
    const Tensor seq = block(step, 0);
    const Tensor lp = model.forward(seq.narrow(1, 0, 8).contiguous(), memory);
    const Tensor loss = lm::lm_loss(lp, seq.narrow(1, 1, 8).contiguous(), /*pad_index=*/-100);
    adam.zero_grad();
    loss.backward();
    adam.step();
    if (step < 5) first += loss.item<double>() / 5;
    if (step >= 55) last += loss.item<double>() / 5;
  }
  INFO("mean loss of the first 5 steps " << first << ", of the last 5 " << last);
  CHECK(last < 0.5 * first);
}

TEST_CASE("LM: bad options and inputs are errors naming the problem", "[lm]") {
  using Catch::Contains;
  auto make = [](auto edit) {
    lm::LmModelOptions o = tiny();
    edit(o);
    lm::validate(o);
  };
  CHECK_THROWS_WITH(make([](auto& o) { o.block_length = 7; }), Contains("block_length = 7") && Contains("chunk_length = 2"));
  CHECK_THROWS_WITH(make([](auto& o) { o.block_length = 6; }), Contains("block_length = 6") && Contains("window = 4"));
  CHECK_THROWS_WITH(make([](auto& o) { o.memory_length = 2; }), Contains("memory_length = 2") && Contains("window = 4"));
  CHECK_THROWS_WITH(make([](auto& o) { o.memory_length = 9; }), Contains("memory_length = 9") && Contains("chunk_length"));
  CHECK_THROWS_WITH(make([](auto& o) { o.heads = 3; }), Contains("dim = 8") && Contains("heads = 3"));
  CHECK_THROWS_WITH(make([](auto& o) { o.dim = 7; o.heads = 1; }), Contains("option dim") && Contains("even"));
  CHECK_THROWS_WITH(make([](auto& o) { o.vocab_size = 0; }), Contains("vocab_size"));
  CHECK_THROWS_WITH(make([](auto& o) { o.layers = 0; }), Contains("layers"));
  CHECK_THROWS_WITH(make([](auto& o) { o.dropout = 1.0; }), Contains("option dropout"));
  CHECK_THROWS_WITH(make([](auto& o) { o.emb_dropout = -0.1; }), Contains("emb_dropout"));
  CHECK_THROWS_WITH(make([](auto& o) { o.rank = 0; }), Contains("option rank"));
  CHECK_THROWS_WITH(make([](auto& o) { o.window = 0; }), Contains("option window"));
  CHECK_NOTHROW(make([](auto& o) { o.attention = lm::LmAttention::Full; o.block_length = 7; o.memory_length = 3; }));
  CHECK_THROWS_WITH(lm::parse_lm_attention("sparse"), Contains("\"sparse\"") && Contains("long_short"));
  CHECK(lm::parse_lm_attention("full") == lm::LmAttention::Full);

  lm::TransformerLSModel model(tiny());
  NoGradGuard ng;
  lm::Memory memory = model.initial_memory(2);
  CHECK_THROWS_WITH(model.forward(tensor(std::vector<int64_t>{0, 11}, {1, 2}), memory), Contains("[0, 11]") && Contains("vocab_size = 11"));
  CHECK_THROWS_WITH(model.forward(zeros({2, 8}), memory), Contains("i64"));
  CHECK_THROWS_WITH(model.forward(zeros({8}, kI64), memory), Contains("[B, n]"));
  CHECK_THROWS_WITH(model.forward(zeros({3, 8}, kI64), memory), Contains("memory layer 0") && Contains("{3, 8, 8}"));
  lm::Memory short_memory = model.initial_memory(2);
  short_memory.layers.pop_back();
  CHECK_THROWS_WITH(model.forward(zeros({2, 8}, kI64), short_memory), Contains("1 layers") && Contains("2"));
  lm::Memory f64_memory = model.initial_memory(2);
  f64_memory.layers[1] = f64_memory.layers[1].to(kF64);
  CHECK_THROWS_WITH(model.forward(zeros({2, 8}, kI64), f64_memory), Contains("memory layer 1") && Contains("f64"));
}
