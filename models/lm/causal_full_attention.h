// lm::CausalFullAttention: the full-attention baseline of the char-level LM — every query
// attends to the whole memory and to the block up to itself, with Transformer-XL relative
// positions (Dai et al. 2019), behind the same nn::Attention interface and the same layer
// wiring as the causal long-short attention (transformer-ls.md §3.2), so that the two differ in
// the attention only.
//
//   lm::CausalFullAttention attn({.dim = 512, .heads = 8});
//   Tensor a = attn.forward(ln1(h), {.memory = ln1(h_cache), .relative_positions = drop(table)});
//
// Why Transformer-XL positions: the LS model has no absolute position embedding; it sees order
// only through relative terms (u, v and W_R on its window; W_Rc on its chunks). A baseline
// without positions would be handicapped, one with absolute positions would not survive the
// memory; XL's relative scheme is the one the LS window uses, extended to every key, and is the
// paper's own point of comparison (Transformer-XL in the char-LM tables).
//
// Semantics, per head (X = LN1(H) [B, M, d], Xm = LN1(Hm) [B, C, d], S = [Xm ; X] (C + M rows),
// query t at absolute position C + t, key s ∈ [0, C + M)):
//   q̂_t = (X W_q)_t · e^{-1/2},  k_s = (S W_k)_s,  v_s = (S W_v)_s       (no DualLN: plain XL)
//   logit(t, s) = (q̂_t + u)·k_s + (q̂_t + v)·(R_{C+t−s} W_R)   for s ≤ C + t, −∞ for s > C + t
//   out_t = Σ_s softmax(logit(t, ·))_s v_s;  heads merged; W_o; dropout.
// R_δ is the sinusoid of §3.5 of the distance δ. The memory is always visible (the initial zero
// memory is attended as LN1(0), as in the long-short model). args.relative_positions is the
// table [C + M, d] with row j ↔ distance C + M − 1 − j (XL's order, the model applies its
// embedding dropout to it); undefined → built here without dropout.
//
// Parameters (names shared with the long-short module so the two read alike): proj_query,
// proj_key, proj_val, proj_out (Linear d → d, bias only with options.bias), r_net (W_R, Linear
// d → d, no bias), r_w_bias (u) [1, h, 1, 1, e], r_r_bias (v) [1, h, 1, e].
//
// This is a dense reference: the logits [B, h, M, C + M] are materialised (the relative term
// through one [M, C + M] gather of XL's "relative shift"). It is a baseline, not a fast path.
// Recorded under an active nn::CaptureScope (models/nn/capture.h): attention [B, h, M, C + M],
// the probabilities over [memory ; block] keys (0 for future keys).
#pragma once

#include <memory>
#include <string>

#include "lsformer/engine/random.h"
#include "lsformer/models/attention/attention.h"
#include "lsformer/models/nn/dropout.h"
#include "lsformer/models/nn/linear.h"

namespace lsf::lm {

struct CausalFullAttentionOptions {
  int64_t dim = 512;    // d
  int64_t heads = 8;    // h (e = d / h)
  bool bias = false;    // biases of proj_query/key/val/out
  double dropout = 0.0; // on the output, after proj_out
  Generator* generator = nullptr;  // initialisation and dropout (default generator when null)
};

class CausalFullAttention : public nn::Attention {
 public:
  explicit CausalFullAttention(const CausalFullAttentionOptions& options);
  // x [B, M, d] (= LN1(H)), args.memory [B, C, d] (= LN1(Hm), required, C ≥ 1),
  // args.relative_positions [C + M, d] or undefined → [B, M, d].
  Tensor forward(const Tensor& x, const nn::AttentionArgs& args = {}) override;
  std::string extra_repr() const override;
  const CausalFullAttentionOptions& options() const { return options_; }

  std::shared_ptr<nn::Linear> proj_query, proj_key, proj_val, proj_out, r_net;
  Tensor r_w_bias;  // u [1, h, 1, 1, e]
  Tensor r_r_bias;  // v [1, h, 1, e]
  std::shared_ptr<nn::Dropout> dropout;

 private:
  CausalFullAttentionOptions options_;
};

// The relative-distance table [P, d]: row j is the sinusoid of the distance P−1−j.
Tensor relative_distance_table(int64_t length, int64_t d, const TensorOptions& options);

}  // namespace lsf::lm
