// vision::ViLFullAttention: the full-attention layer of ViL / MsViT stages with s0
// (transformer-ls.md §4.4; the official models/layers/full_attention.py `Attention`).
//
//   ViLFullAttention attn({.dim = 384, .heads = 6, .rpe = true, .map_height = 14, .map_width = 14, .num_global = 1});
//   Tensor y = attn.forward(x, {.height = 14, .width = 14, .num_global = 1});  // x [B, 1 + 196, 384]
//
// Multi-head softmax attention over all g + N tokens (g global tokens first, then the N = H·W
// patches row-major): logits = (q·e^{-1/2})·kᵀ + bias, softmax, attn_drop, ·v, heads merged,
// proj, proj_drop. With rpe, the bias [h, g+N, g+N] is
//   patch → patch: a Swin-style table [(2H−1)(2W−1), h] indexed by
//                  (Δy + H − 1)·(2W − 1) + (Δx + W − 1) (the persistent i64 buffer
//                  relative_position_index [N, N], registered as the official module does);
//   global → global: g2g_relative_position_bias [h, g, g];
//   global → patch:  g2l_relative_position_bias[0] [h, g] (one value per global query, all keys);
//   patch → global:  g2l_relative_position_bias[1] [h, g] (one value per global key, all queries).
// Parameters (official names, state_dict order): local_relative_position_bias_table,
// g2l_relative_position_bias [2, h, g], g2g_relative_position_bias (the last two only when
// g ≥ 1; all three only with rpe), buffer relative_position_index, then qkv (Linear C → 3C,
// bias by qkv_bias), proj (Linear C → C). Init as ViL: tables trunc-normal 0.02, Linear weights
// trunc-normal 0.02, biases 0.
// Differences from the official code: the query is scaled before the product (the official
// scales the logits; equal up to rounding), and the map size is fixed at construction when rpe
// is on (as there) but any H×W is accepted without it. Softmax in the activation dtype.
// Recorded under an active nn::CaptureScope (models/nn/capture.h): attention [B, h, g+N, g+N],
// the probabilities before attn_drop (global tokens first, then the patches row-major).
#pragma once

#include <memory>
#include <string>

#include "lsformer/models/attention/attention.h"
#include "lsformer/models/nn/dropout.h"
#include "lsformer/models/nn/linear.h"

namespace lsf::vision {

struct ViLFullAttentionOptions {
  int64_t dim = 0;         // C, divisible by heads
  int64_t heads = 1;       // h
  bool qkv_bias = true;    // MsViT's default
  double attn_drop = 0.0;  // on the attention probabilities
  double proj_drop = 0.0;  // after proj
  bool rpe = false;        // relative position biases (ViL uses them when there is no absolute embedding)
  int64_t map_height = 0;  // with rpe: the patch map H (the official wx)
  int64_t map_width = 0;   // with rpe: the patch map W (the official wy)
  int64_t num_global = 0;  // with rpe: g, the global tokens the bias tables are made for
};

class ViLFullAttention : public nn::Attention {
 public:
  explicit ViLFullAttention(const ViLFullAttentionOptions& options);
  // x [B, g + H·W, C] → [B, g + H·W, C]; args.height/width/num_global describe x (with rpe they
  // must equal the construction's map and g). args.mask, memory and cls are rejected.
  Tensor forward(const Tensor& x, const nn::AttentionArgs& args = {}) override;
  std::string extra_repr() const override;
  const ViLFullAttentionOptions& options() const { return options_; }

  // The official index map for an H×W map: [H·W, H·W] i64 with entry (i, j) =
  // (y_i − y_j + H − 1)·(2W − 1) + (x_i − x_j + W − 1).
  static Tensor relative_position_index_for(int64_t height, int64_t width);

  std::shared_ptr<nn::Linear> qkv;
  std::shared_ptr<nn::Dropout> attn_drop;
  std::shared_ptr<nn::Linear> proj;
  std::shared_ptr<nn::Dropout> proj_drop;
  Tensor local_relative_position_bias_table;  // [(2H−1)(2W−1), h] with rpe
  Tensor g2l_relative_position_bias;          // [2, h, g] with rpe and g ≥ 1
  Tensor g2g_relative_position_bias;          // [h, g, g] with rpe and g ≥ 1
  Tensor relative_position_index;             // [H·W, H·W] i64 buffer with rpe

 private:
  // The bias [h, g+N, g+N] of the current tables (differentiable in them).
  Tensor position_bias(const Tensor& like) const;
  ViLFullAttentionOptions options_;
  int64_t head_dim_ = 0;
};

}  // namespace lsf::vision
