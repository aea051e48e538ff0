// nn::LongShortAttention: the bidirectional long-short attention of Transformer-LS with LRA
// semantics (docs/transformer-ls.md §2.1–2.3, §2.7): a segment window of w tokens with span
// w + 2·max(⌊w/2⌋, 1), a dynamic projection of rank r computed from the layer input, DualLN,
// one joint softmax, and the optional last-layer CLS with its context-as-keys update.
//
//   nn::LongShortAttention attn({.dim = 64, .heads = 2, .window = 8, .rank = 32});
//   Tensor y = attn.forward(x, {.mask = real});            // x [B, n, d] → [B, n, d]
//   Tensor z = attn.forward(x, {.mask = real, .cls = c});  // → [B, 1 + n, d], CLS output first
//   Tensor y0 = attn.forward(x, {.mask = real, .cls = c, .cls_only = true});  // → [B, 1, d], the CLS row alone
//
// Parameters (the official LRA module's names, registration order W_q, W_k, W_v, W_o,
// dual_ln_s, dual_ln_l, dconv_fc):
//   W_q, W_k, W_v   Linear d → d (h·e), with bias
//   W_o             Linear d → d, with bias
//   dual_ln_s       LayerNorm(d), eps 1e-5: LN_G, on the projected (and CLS) keys and values
//   dual_ln_l       LayerNorm(d), eps 1e-5: LN_L, on the full-resolution keys and values
//   dconv_fc        Linear d → h·r, with bias (columns head·r + slot); absent when r = 0
// Ablations: w = 0 is "no window branch" (pure dynamic projection, §2.7); r = 0 is window only;
// w = 0 and r = 0 needs a CLS and gives each token the CLS slot plus its own key (§2.3 step 8).
//
// Recorded under an active nn::CaptureScope (models/nn/capture.h), by name:
//   q              [B, h, n, e] queries, scaled by e^{-1/2}
//   k, v           [B, h, n, e] after LN_L
//   proj           P [B, h, r, n] (softmax over tokens; 0 on padding), only when r > 0
//   kbar_raw, vbar_raw  P·K, P·V [B, h, r, e] before LN_G (no CLS slot), only when r > 0
//   kbar, vbar     [B, h, R, e] after LN_G, R = r (+1 with a CLS, its slot first); absent when R = 0
//   attention      [B, h, n, R + s] the joint softmax before dropout, slots [global R | window s],
//                  window slot u ↔ key ⌊t/w⌋·w − ext + u (ops/long_short.h); computed only then
//   context        C [B, h, n, e] of the tokens (before the CLS row is prepended)
#pragma once

#include <memory>

#include "lsformer/models/attention/attention.h"
#include "lsformer/models/nn/layer_norm.h"
#include "lsformer/models/nn/linear.h"
#include "lsformer/ops/pack.h"

namespace lsf::nn {

struct LongShortOptions {
  int64_t dim = 64;       // d (model width), a multiple of heads
  int64_t heads = 2;      // h; head width e = d / h
  int64_t window = 8;     // w ≥ 0 (segment length; n must be a multiple of it)
  int64_t rank = 32;      // r ≥ 0 (dynamic projection slots per head)
  double dropout = 0.0;   // attention dropout on the joint probabilities (training only)
  bool fused = true;      // the fused op (CPU and CUDA kernels); false: the same computation from primitive ops
  int64_t block_queries = 0;       // fused kernel task size (0: automatic), see ops/long_short.h
  Generator* generator = nullptr;  // dropout's generator (null: the default one)
};

class LongShortAttention : public Attention {
 public:
  explicit LongShortAttention(const LongShortOptions& options);
  Tensor forward(const Tensor& x, const AttentionArgs& args = {}) override;
  // The same layer on packed sequences (ops/pack.h): x [T, d], the real tokens of the batch
  // whose layout is `packed`, → [T, d]; with args.cls [B, 1, d] → [B + T, d], the B updated
  // CLS rows first, or with args.cls_only → [B, d], those rows alone. The projections and
  // LayerNorms run on the T real rows only; the core runs on the [B, h, n, e] layout (padding
  // zero, masked by packed.mask). args.mask must be left undefined (the layout carries it). The
  // real tokens' outputs are forward's on the padded batch.
  Tensor forward_packed(const Tensor& x, const PackedSequences& packed, const AttentionArgs& args = {});
  std::string extra_repr() const override;

  const LongShortOptions& options() const { return options_; }
  void set_fused(bool fused) { options_.fused = fused; }

  std::shared_ptr<Linear> W_q, W_k, W_v, W_o, dconv_fc;
  std::shared_ptr<LayerNorm> dual_ln_s, dual_ln_l;

 private:
  // x's projections by W_q, W_k, W_v and (r > 0) dconv_fc, as one op (nn::forward_linears).
  TensorList project(const Tensor& x);
  // Steps 3–13 from the projected tensors: q, k, v [B, h, n, e] (q scaled, k and v after LN_L,
  // zero or anything at padding), proj_logits [B, n, h·r] (padding −∞) or undefined (r = 0),
  // mask [B, n] or undefined, cls [B, 1, d] or undefined → context [B, h, n, e]; with a CLS,
  // *cls_out = its update [B, h, 1, e].
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& proj_logits, const Tensor& mask,
                const Tensor& cls, Tensor* cls_out);
  void check_args(const Tensor& x, const AttentionArgs& args, int64_t n) const;

  LongShortOptions options_;
};

}  // namespace lsf::nn
