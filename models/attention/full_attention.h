// nn::FullAttention: standard multi-head scaled dot-product softmax attention — the O(n²)
// baseline of the LRA experiments (the "softmax" attention of the Nyströmformer LRA code base
// that Transformer-LS builds on), behind the common nn::Attention interface.
//
//   auto attn = std::make_shared<nn::FullAttention>(nn::FullAttentionOptions{.dim = 64, .heads = 2});
//   Tensor y = attn->forward(x, {.mask = real_tokens});   // x [B, n, d] → y [B, n, d]
//
// Parameters (state_dict names, PyTorch layouts), with e = dim / heads:
//   W_q.weight [d, d], W_q.bias [d]   queries,  head-major columns (feature head·e + i)
//   W_k.weight [d, d], W_k.bias [d]   keys
//   W_v.weight [d, d], W_v.bias [d]   values
//   W_o.weight [d, d], W_o.bias [d]   output projection (the LRA code base calls it "ff")
// The names are those of docs/transformer-ls.md §2.1, so the baseline and the long-short module
// share their W_q/W_k/W_v/W_o names. Biases are present unless qkv_bias / out_bias say otherwise.
// Default initialisation: PyTorch's Linear defaults (the LRA setting, docs/transformer-ls.md §2.6).
//
// Semantics, per head: Q = x W_q·e^{-1/2} (the query is scaled before the dot product, as in
// the long-short modules), logits = Q Kᵀ, keys that are padding (mask false) and, when causal,
// keys j > t get −∞, one softmax per query row over the keys, attention dropout on the
// probabilities (training mode only), context = P V, heads merged, W_o.
//
// Padding (args.mask [B, n] bool, true for real tokens) masks keys, and the probability rows of
// padded queries are set to zero — exactly as the long-short attention does (§2.3 step 10), so
// the modules are interchangeable in a model: a padded token's output is W_o's bias, and
// nothing about padded tokens (their values, their count) reaches a real token's output.
// Deviation from the LRA code base: it subtracts 1e6 from padded keys' logits and leaves
// padded queries' rows as they are; −∞ gives exact zeros, and the zeroed rows only change
// outputs of padded tokens, which no LRA head reads.
//
// Memory: the logits and probabilities of every head are materialised ([B, h, n, n]); this
// module is the quadratic reference the long-short attention is benchmarked against.
// Recorded under an active nn::CaptureScope (models/nn/capture.h): attention [B, h, n, n], the
// probabilities before dropout (padded keys 0, padded queries' rows 0, future keys 0 when causal).
#pragma once

#include <memory>
#include <string>

#include "lsformer/engine/random.h"
#include "lsformer/models/attention/attention.h"
#include "lsformer/models/nn/linear.h"

namespace lsf::nn {

struct FullAttentionOptions {
  int64_t dim = 0;         // model width d (input and output features); must be divisible by heads
  int64_t heads = 1;       // h; head width e = dim / heads
  double dropout = 0.0;    // attention-probability dropout (training mode only)
  bool causal = false;     // mask keys j > t (autoregressive)
  bool qkv_bias = true;    // biases of W_q, W_k, W_v
  bool out_bias = true;    // bias of W_o
  Generator* generator = nullptr;  // dropout masks (null: the default generator)
};

class FullAttention : public Attention {
 public:
  explicit FullAttention(const FullAttentionOptions& options);
  // x [B, n, d] → [B, n, d]. Accepts args.mask only; memory, cls, the causal position tables and the 2-D arguments are
  // rejected with an error naming them.
  Tensor forward(const Tensor& x, const AttentionArgs& args = {}) override;
  std::string extra_repr() const override;

  const FullAttentionOptions& options() const { return options_; }
  int64_t head_dim() const { return options_.dim / options_.heads; }

  std::shared_ptr<Linear> W_q, W_k, W_v, W_o;

 private:
  FullAttentionOptions options_;
};

// Shared by the baseline attention modules: rejects the AttentionArgs a self-attention over
// [B, n, d] cannot honour (memory, cls, 2-D sizes) and checks x and the mask, naming `op`.
void check_self_attention_args(const char* op, const Tensor& x, int64_t dim, const AttentionArgs& args);

}  // namespace lsf::nn
