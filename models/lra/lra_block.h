// The parts of the LRA classifier (docs/transformer-ls.md §2.4), as the official LRA code
// (Transformer-LS-LRA/model.py and model_wrapper.py, from the Nyströmformer code base) builds them:
//
//   LraEmbeddings  word_embeddings (token table) + position_embeddings (learned absolute
//                  positions), both N(0, 0.02²); sum; dropout
// (`generator` everywhere: the dropout masks' generator, null for the default one.)
//   LraBlock       the pre-LN block ("Transformer" in model.py):
//                    X ← X + dropout1(mha(norm1(X)))       (with a CLS c: [c; X] + dropout1(mha(norm1(X), c)))
//                    X ← X + mlpblock(norm2(X))            mlpblock = Linear(d→ffn), GELU, Dropout,
//                                                                     Linear(ffn→d), Dropout
//   LraHead        mlpblock = Linear(in→hidden), ReLU, Linear(hidden→classes)  (SCHead / SCHeadDual)
//
// state_dict names (PyTorch's, relative to each module):
//   LraEmbeddings  word_embeddings.weight [vocab_size, d], position_embeddings.weight [max_seq_len, d]
//   LraBlock       norm1.{weight,bias} [d], mha.* (the attention module's own names), norm2.{weight,bias},
//                  mlpblock.0.{weight [ffn, d], bias [ffn]}, mlpblock.3.{weight [d, ffn], bias [d]}
//   LraHead        mlpblock.0.{weight [hidden, in], bias}, mlpblock.2.{weight [classes, hidden], bias}
#pragma once

#include <memory>
#include <string>

#include "lsformer/engine/random.h"
#include "lsformer/models/attention/attention.h"
#include "lsformer/models/nn/dropout.h"
#include "lsformer/models/nn/embedding.h"
#include "lsformer/models/nn/layer_norm.h"
#include "lsformer/models/nn/sequential.h"
#include "lsformer/ops/pack.h"

namespace lsf::lra {

class LraEmbeddings : public nn::Module {
 public:
  LraEmbeddings(int64_t vocab_size, int64_t max_seq_len, int64_t dim, double dropout, Generator* generator = nullptr);
  // tokens [B, n] (i64/i32, each < vocab_size, n ≤ max_seq_len) → [B, n, d]: token row + position row t.
  Tensor forward(const Tensor& tokens);
  // The same for the real tokens only (ops/pack.h) → [T, d].
  Tensor forward_packed(const Tensor& tokens, const PackedSequences& packed);

  std::shared_ptr<nn::Embedding> word_embeddings, position_embeddings;
  std::shared_ptr<nn::Dropout> dropout;
};

class LraBlock : public nn::Module {
 public:
  LraBlock(int64_t dim, int64_t ffn_dim, double dropout, std::shared_ptr<nn::Attention> attention,
           Generator* generator = nullptr);
  // x [B, n, d], mask [B, n] bool → [B, n, d]. With cls [B, 1, d] → [B, 1 + n, d], the CLS row first:
  // norm1 runs on the tokens only, the attention receives the raw CLS (args.cls when the module
  // takes one, see `cls_as_token`), the CLS row's residual is the raw CLS, and the MLP sublayer
  // runs on all 1 + n rows (§2.4).
  // cls_only (with cls): → [B, 1, d], the CLS row alone, for a last layer whose output is pooled
  // at its CLS. The tokens still reach the CLS through the attention, but the token rows' output
  // projection, residual and MLP, whose results nothing reads, are never computed: the CLS row
  // and every gradient are those of the full block (the discarded rows' gradients are zero), up
  // to rounding (a product over fewer rows may run another GEMM kernel or register tile).
  Tensor forward(const Tensor& x, const Tensor& mask, const Tensor& cls = Tensor(), bool cls_only = false);
  // The same block on packed sequences (ops/pack.h): x [T, d] (the real tokens) → [T, d], or
  // with cls → [B + T, d] (the B CLS rows first), or with cls_only → [B, d]. Needs an attention
  // with a packed path (nn::LongShortAttention); every position-wise layer then runs on the
  // real rows only.
  Tensor forward_packed(const Tensor& x, const PackedSequences& packed, const Tensor& cls = Tensor(),
                        bool cls_only = false);

  // The attention has no CLS slot of its own (full softmax attention): a CLS is then prepended to
  // the (normalised) tokens as one more, always real, token of this layer's attention, so it
  // attends to every real token and every token attends to it.
  bool cls_as_token = false;

  std::shared_ptr<nn::LayerNorm> norm1;
  std::shared_ptr<nn::Attention> mha;
  std::shared_ptr<nn::Dropout> dropout1;
  std::shared_ptr<nn::LayerNorm> norm2;
  std::shared_ptr<nn::Sequential> mlpblock;
};

class LraHead : public nn::Layer {
 public:
  LraHead(int64_t in_features, int64_t hidden, int64_t num_classes);
  Tensor forward(const Tensor& features) override;  // [B, in] → logits [B, classes]

  std::shared_ptr<nn::Sequential> mlpblock;
};

}  // namespace lsf::lra
