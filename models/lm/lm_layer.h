// One layer of the char-level LM (transformer-ls.md §3.2, the "pre_ln" path of every official
// script), as the official TransformerLSLayer / FeedForwardLayer (autoregressive/model_lib/model.py):
//
//   X  = LN1(H);   Xm = LN1(Hm)          the same LayerNorm for the block and its memory
//   H2 = X + Attn(X, Xm)                 the residual adds to the NORMALISED input
//   Y  = LN2(H2)
//   H' = Y + FFN(Y)                      FFN = fc1 (d → ffn) → GELU (exact erf) → Drop → fc2 → Drop
//
// (not a textbook pre-LN block: the residual stream carries LN(x), and the model has no final
// LayerNorm). The attention is the causal long-short attention or the full-attention baseline.
//
// state_dict names (relative to the layer, official order): attn.* (the attention's own names),
// norm1.{weight, bias} [d], ff.fc1.{weight [ffn, d], bias [ffn]}, ff.fc2.{weight [d, ffn], bias [d]},
// norm2.{weight, bias} [d]. LayerNorm eps 1e-5 (fairseq's LayerNorm default).
#pragma once

#include <memory>

#include "lsformer/engine/random.h"
#include "lsformer/models/attention/attention.h"
#include "lsformer/models/nn/dropout.h"
#include "lsformer/models/nn/layer_norm.h"
#include "lsformer/models/nn/linear.h"
#include "lsformer/models/lm/lm_options.h"

namespace lsf::lm {

class FeedForwardLayer : public nn::Module {
 public:
  FeedForwardLayer(int64_t dim, int64_t ffn_dim, double dropout, Generator* generator = nullptr);
  Tensor forward(const Tensor& y);  // [B, M, d] → [B, M, d]

  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::Dropout> dropout;
};

class TransformerLSLayer : public nn::Module {
 public:
  explicit TransformerLSLayer(const LmModelOptions& options);
  // h [B, M, d] (the layer input H), h_cache [B, C, d] (this layer's memory Hm, before LN1);
  // positions carries the model's shared tables (relative_positions, chunk_positions) → H' [B, M, d].
  Tensor forward(const Tensor& h, const Tensor& h_cache, const nn::AttentionArgs& positions);

  std::shared_ptr<nn::Attention> attn;  // nn::CausalLongShortAttention or lm::CausalFullAttention
  std::shared_ptr<nn::LayerNorm> norm1;
  std::shared_ptr<FeedForwardLayer> ff;
  std::shared_ptr<nn::LayerNorm> norm2;
};

}  // namespace lsf::lm
