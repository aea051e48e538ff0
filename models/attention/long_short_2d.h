// nn::LongShortAttention2d: the 2-D long-short attention of ViL-LS (docs/transformer-ls.md §4.1–4.3),
// composed from primitive ops (matmul, softmax, pad, index_select, masked_fill, views).
//
//   LongShortAttention2d attn({.dim = 96, .heads = 3, .window = 7, .rank = 8});
//   Tensor y = attn.forward(x, {.height = 56, .width = 56, .num_global = 1});  // x [B, 1 + 3136, 96]
//
// Each patch query of a w×w group attends, with ONE joint softmax, to the slots
//   [ r projected (dynamic projection, LN_G) | T×T window keys (LN_L, RPE bias, −∞ off-image) | g global ]
// where T = w + 2·max(⌊w/2⌋, 1); the global token (g = 1) attends to itself and to every patch
// output (§4.2 step 10). Memory is linear in N: the largest tensors are the window logits
// [B, h, N/w², w², T²] and the gathered key/value blocks [B, h, N/w², T², e]; no N×N tensor.
//
// Parameters (official PyTorch names, state_dict order): local_relative_position_bias_table
// [2(w+p−1)(2p+w+1)+1, h] with p = ⌊w/2⌋ (only with rpe), the persistent i64 buffer
// relative_position_index [w², T²] (as the official module registers it, so released
// checkpoints load strictly), qkv (Linear C → 3C, bias by qkv_bias), proj (Linear C → C),
// to_dynamic_projection (Linear C → h·r, only when r > 0), dual_ln_dp (LN_G) and dual_ln_full
// (LN_L), both LayerNorm(C, eps 1e-5). Children attn_drop / proj_drop hold no parameters.
// With dual_ln = false (the paper's "w/o DualLN" ablation, not an official setting) the two
// LayerNorms do not exist: keys and values enter both branches unnormalised.
//
// With external_projections the module holds no qkv and no to_dynamic_projection: the caller
// computes q, k, v and the projection logits itself (CvT*-LS's convolutional projections,
// models/vision/cvt_ls_attention.h) and calls forward_projected; everything after the input
// projections (scaling, DualLN, the three slot sets, the global update, proj) is shared.
// With projection_stride s > 1 (also CvT*-LS), K̄ and V̄ compress only the keys and values of
// every s-th row and column, as CvT's stride-s key/value projections would give them.
//
// Recorded under an active nn::CaptureScope (models/nn/capture.h), by name:
//   proj       P [B, h, r, Ns] (softmax over the Ns = ⌈H/s⌉·⌈W/s⌉ compressed patch positions), r > 0
//   attention  [B, h, N, r + T² + g] the joint softmax before dropout, patch queries in row-major
//              patch order; window slot ty·T + tx of the query in group (gy, gx) is the patch
//              (gy·w + ty − p, gx·w + tx − p), p = max(⌊w/2⌋, 1) (0 off the image)
#pragma once

#include <memory>
#include <string>

#include "lsformer/models/attention/attention.h"
#include "lsformer/models/nn/dropout.h"
#include "lsformer/models/nn/layer_norm.h"
#include "lsformer/models/nn/linear.h"

namespace lsf::nn {

struct LongShortAttention2dOptions {
  int64_t dim = 0;         // C = d, divisible by heads
  int64_t heads = 1;       // h
  int64_t window = 7;      // w ≥ 1: w×w query groups; the feature map side must be a multiple of w
  int64_t rank = 8;        // r ≥ 0: dynamic-projection rank (0 = window and global slots only)
  bool rpe = true;         // relative-position bias on the window logits (needs w ≥ 2, §4.3)
  bool qkv_bias = true;    // MsViT's default qkv_bias = True
  double attn_drop = 0.0;  // dropout on the joint attention probabilities (not on the global update)
  double proj_drop = 0.0;  // dropout after proj
  bool external_projections = false;  // no qkv / to_dynamic_projection: use forward_projected
  int64_t projection_stride = 1;      // s ≥ 1: the dynamic projection sees every s-th row and column
  bool dual_ln = true;                // LN_L and LN_G on the keys and values (off: the ablation)
};

class LongShortAttention2d : public Attention {
 public:
  explicit LongShortAttention2d(const LongShortAttention2dOptions& options);

  // x [B, g + H·W, C] with g = args.num_global ∈ {0, 1} global tokens first, then the H·W patch
  // tokens row-major; H = args.height and W = args.width must be equal (square maps only, as the
  // official code uses one side nx) and multiples of w. Returns [B, g + H·W, C].
  // args.mask, args.memory and args.cls are not supported and rejected.
  Tensor forward(const Tensor& x, const AttentionArgs& args = {}) override;
  // The attention from given input projections (args as for forward):
  //   q, k, v [B, g + H·W, C]: the raw projections of every token (global rows first), before
  //     the e^-1/2 query scale and LN_L, which this applies;
  //   projection_logits [B, Ns, h·r]: the dynamic-projection logits of the patch tokens
  //     (column head·r + slot), before the softmax over tokens; undefined when r = 0. With
  //     projection_stride s the tokens are those of every s-th row and column, Ns = ⌈H/s⌉·⌈W/s⌉
  //     (s = 1: all H·W patches, the official layer).
  // forward(x) is forward_projected(qkv(x) split in three, to_dynamic_projection(x patches)).
  Tensor forward_projected(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& projection_logits,
                           const AttentionArgs& args);
  std::string extra_repr() const override;

  const LongShortAttention2dOptions& options() const { return options_; }
  int64_t side() const { return side_; }  // max(⌊w/2⌋, 1)
  int64_t span() const { return span_; }  // T = w + 2·side

  // The RPE index map of §4.3 for window w (w ≥ 2): [w², T²] i64, entry (qy·w + qx, ky'·T + kx')
  // = dy·(w + 2p) + dx with dy = qy − ky + (w+p−1), dx = qx − kx + (w+p−1), ky = ky' − p, etc.
  // Different offsets share rows (the official table's collisions), reproduced exactly.
  static Tensor relative_position_index_for(int64_t window);
  // Rows of the official table for window w: 2(w+p−1)(2p+w+1)+1, p = ⌊w/2⌋.
  static int64_t rpe_table_rows(int64_t window);

  std::shared_ptr<Linear> qkv;                    // null with external_projections
  std::shared_ptr<Linear> proj;
  std::shared_ptr<Linear> to_dynamic_projection;  // null when rank == 0 or external_projections
  std::shared_ptr<LayerNorm> dual_ln_dp;          // LN_G: projected keys and values (null without dual_ln)
  std::shared_ptr<LayerNorm> dual_ln_full;        // LN_L: keys and values of all tokens (null without dual_ln)
  std::shared_ptr<Dropout> attn_drop;
  std::shared_ptr<Dropout> proj_drop;
  Tensor local_relative_position_bias_table;      // [rpe_table_rows(w), h], undefined without rpe
  Tensor relative_position_index;                 // [w², T²] i64 buffer, undefined without rpe

 private:
  // Checks the arguments; returns the map side nx.
  int64_t check_args(const Tensor& x, const AttentionArgs& args) const;

  LongShortAttention2dOptions options_;
  int64_t head_dim_ = 0, side_ = 0, span_ = 0;
  // Index tensors of the last map side / device seen (rebuilt when either changes): query order
  // [N], its inverse [N], each group's key block in the padded map [G·T²], off-image mask [G, 1, T²].
  int64_t cached_side_len_ = 0;
  Tensor query_order_, patch_to_slot_, key_blocks_, off_image_;
};

}  // namespace lsf::nn
