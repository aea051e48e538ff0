// nn::LinformerAttention: Linformer (Wang et al. 2020) — keys and values are projected along
// the sequence axis from n to k rows by learned fixed matrices, so every query attends to k
// slots: O(n·k) time and memory. The LRA baseline (docs/transformer-ls.md §2.5 compares against it)
// uses k = 256.
//
//   auto attn = std::make_shared<nn::LinformerAttention>(
//       nn::LinformerOptions{.dim = 64, .heads = 2, .max_seq_len = 4096, .k = 256});
//   Tensor y = attn->forward(x, {.mask = real_tokens});   // x [B, 4096, 64] → [B, 4096, 64]
//
// Per head, with e = dim / heads and E, F the projections of keys and values:
//   Q = x W_q·e^{-1/2},  K̄ = E·(m ⊙ x W_k),  V̄ = F·(m ⊙ x W_v)   (m: 1 for real tokens, 0 for padding)
//   y = W_o( merge_heads( softmax(Q K̄ᵀ) V̄ ) )
// Padding is applied as the LRA code base does, by zeroing padded tokens' keys and values
// before the projection (the k slots are never masked). The probability rows of padded queries
// are zeroed as in every lsformer attention (see nn::Attention), so a padded token's output is
// W_o's bias; the LRA code leaves those rows, which changes only padded tokens' outputs.
//
// Parameters (state_dict names):
//   W_q, W_k, W_v, W_o   Linear d → d (.weight [d, d], .bias [d]), as nn::FullAttention
//   E                    [h, k, n] with per_head (the LRA layout), else [k, n] shared by the heads
//   F                    as E, only when share_kv = false (the LRA code uses E for both)
// E and F are initialised N(0, 0.02²) as in the LRA code base; the Linears with PyTorch's
// defaults.
//
// Layer-wise sharing (the LRA code shares one E by all layers): pass the first layer in
// options.share_projection_with; the new layer then uses that layer's E (and F) and registers
// none itself, so the optimizer sees each shared matrix once and only the owning layer's
// state_dict holds it. (PyTorch's state_dict would repeat the shared tensor under every
// layer's name; loading such a file needs the duplicates dropped first.)
//
// The sequence length is fixed at construction (max_seq_len): E has one column per position,
// and an input of any other length is rejected with an error saying so.
// Recorded under an active nn::CaptureScope (models/nn/capture.h): attention [B, h, n, k], the
// probabilities over the k projected slots before dropout (slot i pools token j with weight E[i, j]).
#pragma once

#include <memory>
#include <string>

#include "lsformer/engine/random.h"
#include "lsformer/models/attention/attention.h"
#include "lsformer/models/nn/linear.h"

namespace lsf::nn {

class LinformerAttention;

struct LinformerOptions {
  int64_t dim = 0;           // model width d; divisible by heads
  int64_t heads = 1;         // h; head width e = dim / heads
  int64_t max_seq_len = 0;   // n: the one sequence length this layer accepts
  int64_t k = 256;           // projected length (the LRA setting)
  bool share_kv = true;      // one projection E for keys and values (LRA); false: E for keys, F for values
  bool per_head = true;      // E [h, k, n], one projection per head (LRA); false: [k, n] shared by the heads
  double dropout = 0.0;      // attention-probability dropout (training mode only; 0 in the LRA code)
  bool qkv_bias = true;      // biases of W_q, W_k, W_v
  bool out_bias = true;      // bias of W_o
  // Use this layer's E (and F) instead of owning new ones; its configuration (heads, k,
  // max_seq_len, share_kv, per_head) must equal this one's.
  const LinformerAttention* share_projection_with = nullptr;
  Generator* generator = nullptr;  // dropout masks (null: the default generator)
};

class LinformerAttention : public Attention {
 public:
  explicit LinformerAttention(const LinformerOptions& options);
  // x [B, max_seq_len, d] → [B, max_seq_len, d]. Accepts args.mask only.
  Tensor forward(const Tensor& x, const AttentionArgs& args = {}) override;
  std::string extra_repr() const override;

  const LinformerOptions& options() const { return options_; }
  int64_t head_dim() const { return options_.dim / options_.heads; }
  // True when E (and F) belong to another layer (share_projection_with).
  bool shares_projection() const { return options_.share_projection_with != nullptr; }

  std::shared_ptr<Linear> W_q, W_k, W_v, W_o;
  Tensor E;  // [h, k, n] (per_head) or [k, n]: projects keys (and values when share_kv)
  Tensor F;  // as E, values' projection; undefined when share_kv

 private:
  LinformerOptions options_;
};

}  // namespace lsf::nn
