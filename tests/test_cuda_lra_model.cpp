// The LRA classifier end to end on the GPU against the CPU (issue #19 item 6): token and
// position embeddings, the packed position-wise layers, the long-short attention (window and
// dynamic projection with its softmax over the tokens, DualLN) or full attention, the CLS
// injected into the last layer or mean pooling, the classifier head, cross-entropy, backward and
// one AdamW update — on a right-padded batch, from the same weights and inputs. Without a GPU it
// skips (never passes).
//
// Written without a GPU at hand (2026-11-30); the next lent GPU runs it first.
#include <cmath>

#include "cuda_compare.h"
#include "helpers.h"

using namespace lsf;

namespace {

constexpr int64_t kVocab = 12, kLength = 32, kDim = 16, kFfn = 32, kClasses = 3;
const std::vector<int64_t> kLengths = {32, 20, 7, 13};  // documents right-padded to kLength

struct Case {
  lra::AttentionKind attention;
  int64_t window, rank;
  lra::Pooling pooling;
};

lra::LraModelOptions options_of(const Case& c) {
  return {.vocab_size = kVocab, .max_seq_len = kLength, .dim = kDim, .heads = 2, .layers = 2, .ffn_dim = kFfn,
          .num_classes = kClasses, .attention = c.attention, .window = c.window, .rank = c.rank,
          .pooling = c.pooling, .head_hidden = kDim};
}

// The same model twice from one seed, parameters moved away from the initialisation (LayerNorm
// affine near (1, 0) rather than exactly, N(0, 1) tables) so that every path shapes the output.
std::shared_ptr<lra::LraClassifier> make_model(const Case& c) {
  manual_seed(19);
  auto model = std::make_shared<lra::LraClassifier>(options_of(c));
  Generator g(6);
  NoGradGuard no_grad;
  for (const auto& [name, t] : model->named_parameters()) {
    const bool norm = name.find("norm") != std::string::npos || name.find("dual_ln") != std::string::npos;
    if (norm) nn::init::normal_(t, name.ends_with("weight") ? 1.0 : 0.0, 0.2, &g);
    else if (name.find("embed") != std::string::npos) nn::init::normal_(t, 0.0, 1.0, &g);
  }
  return model;
}

struct Batch {
  Tensor tokens, mask, labels;
};

Batch make_batch() {
  Generator g(11);
  std::vector<int64_t> ids, labels;
  for (size_t i = 0; i < kLengths.size(); ++i) {
    const Tensor row = (rand({kLengths[i]}, TensorOptions(kF64), &g) * double(kVocab - 1)).to(kI64);
    for (int64_t v : row.to_vector<int64_t>()) ids.push_back(1 + v);  // ids in [1, vocab), 0 pads
    ids.insert(ids.end(), size_t(kLength - kLengths[i]), 0);
    labels.push_back(int64_t(i % kClasses));
  }
  const Tensor tokens = tensor(ids, {int64_t(kLengths.size()), kLength});
  return {tokens, ne(tokens, 0.0), tensor(labels, {int64_t(kLengths.size())})};
}

struct StepResult {
  Tensor logits, loss;
  NamedTensors grads, updated;
};

StepResult train_step(lra::LraClassifier& model, const Batch& b, Device device) {
  model.to(device);
  model.train();  // dropout is 0: training mode only selects the training paths
  optim::AdamW opt(model.named_parameters(), optim::AdamWOptions{.lr = 1e-2, .eps = 1.0, .weight_decay = 1e-2});
  opt.zero_grad();
  StepResult r;
  r.logits = model.forward(b.tokens.to(device), b.mask.to(device));
  r.loss = cross_entropy(r.logits, b.labels.to(device));
  r.loss.backward();
  // A parameter the configuration leaves unused (the projection's with r = 0) gets no gradient.
  for (const auto& [name, p] : model.named_parameters())
    r.grads.emplace_back(name, p.grad().defined() ? p.grad().to(kCPU) : Tensor());
  opt.step();
  for (const auto& [name, p] : model.named_parameters()) r.updated.emplace_back(name, p.detach().to(kCPU));
  return r;
}

}  // namespace

TEST_CASE("cuda: the LRA classifier's logits, gradients and AdamW step equal the CPU's", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  const std::vector<Case> cases = {
      {lra::AttentionKind::LongShort, 4, 4, lra::Pooling::Cls},   // window + dynamic projection, CLS path
      {lra::AttentionKind::LongShort, 4, 4, lra::Pooling::Mean},
      {lra::AttentionKind::LongShort, 0, 3, lra::Pooling::Cls},   // projection only
      {lra::AttentionKind::LongShort, 4, 0, lra::Pooling::Cls},   // window only
      {lra::AttentionKind::Full, 0, 0, lra::Pooling::Cls},
  };
  const Batch batch = make_batch();
  // Tolerance. Both devices compute in f32 (u = 2^-24) and differ in summation order only; a sum
  // of L terms is then off by ≤ L·u relative to the sum of its terms' magnitudes. The longest
  // sums are the weight gradients over the B·n = 128 token rows (the packed path sums only the 72
  // real ones); a value passes through at most ~16 such ops between the input and a gradient
  // (two layers of attention, LayerNorm, FFN, forward and backward), and LayerNorm and softmax
  // can each amplify a relative error by a small factor (8 covers both, as in
  // test_cuda_training.cpp). rel = 16 · 128 · 2^-24 · 8 ≈ 9.8e-4, scaled by each tensor's
  // largest magnitude (test::check_gpu_scaled), since cancelling sums have absolute, not
  // relative, error.
  const double rel = 16.0 * double(kLengths.size() * size_t(kLength)) * 0x1p-24 * 8.0;
  for (const Case& c : cases) {
    INFO("attention " << (c.attention == lra::AttentionKind::Full ? "full" : "long_short") << ", w " << c.window
                      << ", r " << c.rank << ", pooling " << (c.pooling == lra::Pooling::Cls ? "cls" : "mean"));
    auto cpu_model = make_model(c);
    auto gpu_model = make_model(c);
    const StepResult cpu = train_step(*cpu_model, batch, kCPU);
    const StepResult gpu = train_step(*gpu_model, batch, kCUDA);
    test::check_gpu_scaled(gpu.logits, cpu.logits, rel);
    test::check_gpu_scaled(gpu.loss, cpu.loss, rel);
    REQUIRE(cpu.grads.size() == gpu.grads.size());
    for (size_t i = 0; i < cpu.grads.size(); ++i) {
      INFO("gradient of " << cpu.grads[i].first);
      REQUIRE(gpu.grads[i].first == cpu.grads[i].first);
      REQUIRE(gpu.grads[i].second.defined() == cpu.grads[i].second.defined());
      if (!cpu.grads[i].second.defined()) continue;
      double scale = test::max_abs(cpu.grads[i].second);
      // The dynamic projection's bias has a gradient of exactly 0: its softmax runs over the
      // tokens, and a bias is the same for every token. Both devices return rounding noise of
      // the cancelling sum Σ_t dS_t, whose terms are those of the weight's gradient Σ_t x_t·dS_t
      // with LayerNorm'd x of magnitude ~1: scaled by that gradient instead of its own.
      const std::string& name = cpu.grads[i].first;
      if (name.ends_with("dconv_fc.bias")) {
        const std::string weight = name.substr(0, name.size() - 4) + "weight";
        for (const auto& [other, g] : cpu.grads)
          if (other == weight) scale = test::max_abs(g);
      }
      test::check_close(gpu.grads[i].second.to(kF64), cpu.grads[i].second.to(kF64), rel * std::max(scale, 1e-30), rel);
    }
    // AdamW's first step with eps = 1 is lr·(g/(|g| + 1) + wd·p): smooth in g, so a gradient
    // difference δ moves a parameter by ≤ lr·δ (with the default eps a gradient near 0 could
    // turn a rounding difference into a whole ±lr step and nothing would be learnt from it).
    for (size_t i = 0; i < cpu.updated.size(); ++i) {
      INFO("parameter " << cpu.updated[i].first << " after the update");
      const Tensor& g = cpu.grads[i].second;
      const double g_atol = g.defined() ? rel * std::max(test::max_abs(g), 1e-30) : 0.0;
      test::check_close(gpu.updated[i].second.to(kF64), cpu.updated[i].second.to(kF64), 1e-2 * g_atol + 4.0 * 0x1p-24, 0x1p-22);
    }
  }
}
