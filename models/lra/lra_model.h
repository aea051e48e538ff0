// lra::LraClassifier: the Long Range Arena classifier of Transformer-LS (docs/transformer-ls.md §2.4–2.6)
// with any of the attention modules: long-short (incl. the projection-only w = 0 and window-only
// r = 0 ablations), full softmax attention, or Linformer.
//
//   lra::LraClassifier model({.vocab_size = 16, .max_seq_len = 2048, .num_classes = 10});
//   Tensor logits = model.forward(tokens, mask);   // tokens [B, n] i64, mask [B, n] bool → [B, 10]
//   Tensor loss = cross_entropy(logits, labels);
//
// Data: tokens are right-padded with id 0, mask is true for real tokens. An example's logits do
// not depend on how much padding follows it (for long-short as long as n stays a multiple of w;
// Linformer accepts only n = max_seq_len).
//
// Model (as the official Transformer-LS-LRA model.py / model_wrapper.py):
//   X = Drop(word_embeddings[tokens] + position_embeddings[0..n−1])        both N(0, 0.02²)
//   `layers` pre-LN blocks: X ← X + Drop(Attn(LN1(X)));  X ← X + MLP(LN2(X))
//       MLP = Linear(d→ffn_dim) → GELU → Drop → Linear(ffn_dim→d) → Drop
//   pooling "cls": a learned CLS (1×1×d, zeros) is injected into the LAST layer only
//       (`--cls_last_layer`, §2.4); after it the CLS row → final LayerNorm → head.
//   pooling "mean": final LayerNorm on every row, then the mean over the REAL tokens (see below).
//   head: Linear(d→head_hidden) → ReLU → Linear(head_hidden→num_classes)
//   dual (Retrieval): the same encoder on both documents, u and v, then
//       Linear(4d→head_hidden) → ReLU → Linear(head_hidden→num_classes) on [u, v, u⊙v, u−v].
//
// state_dict names (the official PyTorch module's, including its "seq_classifer" spelling):
//   model.cls_embed                                   [1, 1, d]    pooling "cls" only
//   model.embeddings.word_embeddings.weight           [vocab_size, d]
//   model.embeddings.position_embeddings.weight       [max_seq_len, d]
//   model.transformer_{i}.norm1.{weight,bias}         [d]          i = 0 .. layers−1
//   model.transformer_{i}.mha.*                       the attention's names:
//       long_short: W_q, W_k, W_v, W_o (Linear d→d), dual_ln_s, dual_ln_l (LayerNorm d),
//                   dconv_fc (Linear d→h·r, absent when r = 0)
//       full:       W_q, W_k, W_v, W_o            (the LRA code base calls W_o "ff")
//       linformer:  W_q, W_k, W_v, W_o, and E [h, k, max_seq_len] in transformer_0 only: one
//                   projection shared by every layer, as the LRA code's class-level matrix
//                   (the LRA code base nests it as "mha.attn.E" and names W_o "ff")
//   model.transformer_{i}.norm2.{weight,bias}         [d]
//   model.transformer_{i}.mlpblock.0.{weight,bias}    [ffn_dim, d], [ffn_dim]
//   model.transformer_{i}.mlpblock.3.{weight,bias}    [d, ffn_dim], [d]
//   model.norm.{weight,bias}                          [d]          the final LayerNorm
//   seq_classifer.mlpblock.0.{weight,bias}            [head_hidden, d] (dual: [head_hidden, 4d])
//   seq_classifer.mlpblock.2.{weight,bias}            [num_classes, head_hidden]
// Initialisation (§2.6): PyTorch's Linear defaults, LayerNorm (1, 0), embeddings N(0, 0.02²),
// CLS zeros; attention modules as their own headers say.
//
// Execution (options.packed, the default with long-short attention): the embeddings, every
// LayerNorm, Linear, GELU, dropout and residual add run on the [T, d] rows of the T real tokens
// only (ops/pack.h), the last block on [B + T, d] with the CLS rows first; the attention core
// runs on the padded [B, h, n, e] layout (nn::LongShortAttention::forward_packed). A padded
// position's value is never read by a real token, so the features are the padded path's up to
// rounding; dropout masks are drawn over the real rows, so with dropout > 0 a run differs from
// a packed = false one. Other attention kinds always take the padded path.
// Pooled at the CLS (and asked for no hidden states), the last block forms its CLS rows alone
// (LraBlock's cls_only): the tokens' last-layer outputs after the attention (W_o, residual,
// norm2, MLP) are read by nothing, so they are never computed, on either path. The features
// and gradients are the full computation's up to rounding (tests/test_lra_model.cpp); with
// dropout > 0 the masks are drawn over fewer rows, so a run's random numbers differ from one
// that formed them.
//
// Deviations and choices (the official code has no such path, or one we cannot follow):
// * pooling "mean" divides by the number of REAL tokens. The LRA code (Nyströmformer's
//   pooling) takes X.mean(dim=1) over all n rows after zeroing the padded ones, i.e. divides by
//   n, which makes the features depend on the amount of padding. An example with no real
//   token pools to the zero vector (its count is clamped to 1).
// * pooling "cls" with attention "full": the official attention wrapper takes no CLS. Here the
//   raw CLS joins the last layer's attention as one extra, always-real token placed first (its
//   query attends to itself and every real token; every token can attend to it); residual, MLP
//   and readout are as for long-short. Linformer has a fixed sequence length (its E has
//   max_seq_len columns), so "linformer" with "cls" is rejected: use pooling "mean".
// * long_short with window = 0 and rank = 0 needs a CLS in every layer (§2.3 step 8); only the
//   last layer has one, so it is accepted only for layers = 1 with pooling "cls".
// * Padded query rows of every attention are zeroed (nn::Attention's convention); the LRA
//   softmax baseline instead subtracts 1e6 from padded keys. Only padded rows differ.
// * attention_dropout is applied in every attention kind (the LRA Linformer has none; keep it 0
//   there to match).
#pragma once

#include <memory>

#include "lsformer/engine/enum_names.h"
#include "lsformer/engine/random.h"
#include "lsformer/models/lra/lra_block.h"
#include "lsformer/models/nn/layer_norm.h"

namespace lsf::lra {

// The attention of every block, and how the encoder reads out one vector per example.
enum class AttentionKind { LongShort, Full, Linformer };
inline constexpr const char* kAttentionKindNames[] = {"long_short", "full", "linformer"};
enum class Pooling { Cls, Mean };
inline constexpr const char* kPoolingNames[] = {"cls", "mean"};
inline const char* to_string(AttentionKind kind) { return enum_name(kind, kAttentionKindNames); }
inline const char* to_string(Pooling pooling) { return enum_name(pooling, kPoolingNames); }

struct LraModelOptions {
  int64_t vocab_size = 512;          // token table rows (the official default 512; must be ≥ data vocab)
  int64_t max_seq_len = 2048;        // position table rows (n ≤ max_seq_len)
  int64_t dim = 64, heads = 2, layers = 2, ffn_dim = 128;
  int64_t num_classes = 10;
  AttentionKind attention = AttentionKind::LongShort;
  int64_t window = 8, rank = 32;         // long_short: w = 0 projection only, r = 0 window only
  int64_t linformer_k = 256;             // linformer: projected length (needs fixed n = max_seq_len)
  double dropout = 0.0, attention_dropout = 0.0;
  Pooling pooling = Pooling::Cls;        // Cls: CLS injected in the last layer (§2.4); Mean
  bool dual = false;                     // Retrieval: two documents, head on [u, v, u⊙v, u−v]
  int64_t head_hidden = 128;
  bool fused = true;                     // long_short: the fused op (false: composed ops)
  bool packed = true;                    // long_short: position-wise layers on the real tokens only
                                         // (ops/pack.h); false: on every padded position, as the
                                         // official code (the same results; dropout draws differ)
  Generator* generator = nullptr;        // dropout masks (null: the default generator); parameters are
                                         // always initialised from the default generator
};

// Throws an lsf::Error naming the offending option (also done by the constructor).
void validate(const LraModelOptions& options);

// What the data pipeline must do for these options: pad every batch to a multiple of
// pad_multiple() positions (the long-short window w, else 1), and, when fixed_length() is true
// (Linformer), to exactly max_seq_len positions.
int64_t pad_multiple(const LraModelOptions& options);
bool fixed_length(const LraModelOptions& options);

// The encoder ("model" in the official wrapper): embeddings, blocks, final LayerNorm, pooling.
class LraEncoder : public nn::Module {
 public:
  explicit LraEncoder(const LraModelOptions& options);
  // tokens [B, n], mask [B, n] bool → pooled features [B, d] (after the final LayerNorm).
  Tensor forward(const Tensor& tokens, const Tensor& mask);
  // As forward, also returning every block's output in `hidden` (layers entries: [B, n, d], the
  // last [B, 1 + n, d] with the CLS row first under pooling "cls"), for tests and inspection.
  Tensor forward(const Tensor& tokens, const Tensor& mask, std::vector<Tensor>* hidden);

  Tensor cls_embed;  // [1, 1, d] (pooling "cls"), else undefined
  std::shared_ptr<LraEmbeddings> embeddings;
  std::vector<std::shared_ptr<LraBlock>> blocks;  // registered as transformer_0, transformer_1, ...
  std::shared_ptr<nn::LayerNorm> norm;

 private:
  Tensor forward_packed(const Tensor& tokens, const Tensor& mask, std::vector<Tensor>* hidden);

  LraModelOptions options_;
};

class LraClassifier : public nn::Module {
 public:
  explicit LraClassifier(const LraModelOptions& options);
  // tokens [B, n] i64, mask [B, n] bool → logits [B, num_classes]
  Tensor forward(const Tensor& tokens, const Tensor& mask);
  // dual encoder: both documents through the same encoder → logits [B, num_classes]
  Tensor forward(const Tensor& tokens, const Tensor& mask, const Tensor& tokens2, const Tensor& mask2);
  const LraModelOptions& options() const { return options_; }
  std::string extra_repr() const override;

  std::shared_ptr<LraEncoder> model;        // "model"
  std::shared_ptr<LraHead> seq_classifer;   // "seq_classifer" (sic, the official name)

 private:
  LraModelOptions options_;
};

}  // namespace lsf::lra
