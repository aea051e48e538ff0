// The LRA embeddings, pre-LN block and classifier head (see lra_block.h; docs/transformer-ls.md §2.4).
#include "lsformer/models/lra/lra_block.h"

#include "lsformer/engine/error.h"
#include "lsformer/engine/profiler.h"
#include "lsformer/models/attention/long_short.h"
#include "lsformer/models/nn/activation.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/models/nn/linear.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/index.h"
#include "lsformer/ops/shape.h"

namespace lsf::lra {

LraEmbeddings::LraEmbeddings(int64_t vocab_size, int64_t max_seq_len, int64_t dim, double dropout_p,
                             Generator* generator)
    : Module("Embeddings") {
  word_embeddings = register_module("word_embeddings", std::make_shared<nn::Embedding>(vocab_size, dim));
  position_embeddings = register_module("position_embeddings", std::make_shared<nn::Embedding>(max_seq_len, dim));
  // Both tables N(0, 0.02²) (§2.4, §2.6); no padding row: the LRA code zeroes none, and a padded
  // token's embedding never reaches a real token (keys are masked).
  nn::init::normal_(word_embeddings->weight, 0.0, 0.02);
  nn::init::normal_(position_embeddings->weight, 0.0, 0.02);
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(dropout_p, generator));
}

Tensor LraEmbeddings::forward(const Tensor& tokens) {
  ::lsf::nn::ModuleScope call_site(*this);
  const int64_t n = tokens.size(1);
  LSF_CHECK(n <= position_embeddings->num_embeddings())
      << "LraEmbeddings: sequence length n = " << n << " exceeds max_seq_len = "
      << position_embeddings->num_embeddings() << " (the position table's rows)";
  Tensor positions = arange(n, TensorOptions(kI64).device(tokens.device()));
  // [B, n, d] + [n, d]: the same position rows for every example.
  return dropout->forward(add(word_embeddings->forward(tokens), position_embeddings->forward(positions)));
}

Tensor LraEmbeddings::forward_packed(const Tensor& tokens, const PackedSequences& packed) {
  ::lsf::nn::ModuleScope call_site(*this);
  LSF_CHECK(tokens.dim() == 2 && tokens.size(0) == packed.batch && tokens.size(1) == packed.length)
      << "LraEmbeddings: tokens " << tokens.shape() << " do not match the packed layout's [B, n] = {" << packed.batch
      << ", " << packed.length << "}";
  LSF_CHECK(packed.length <= position_embeddings->num_embeddings())
      << "LraEmbeddings: sequence length n = " << packed.length << " exceeds max_seq_len = "
      << position_embeddings->num_embeddings() << " (the position table's rows)";
  Tensor ids = index_select(tokens.reshape({packed.batch * packed.length}), 0, packed.rows);  // [T]
  return dropout->forward(add(word_embeddings->forward(ids), position_embeddings->forward(packed.positions)));
}

LraBlock::LraBlock(int64_t dim, int64_t ffn_dim, double dropout_p, std::shared_ptr<nn::Attention> attention,
                   Generator* generator)
    : Module("Transformer") {
  LSF_CHECK(attention != nullptr) << "LraBlock: the attention module is null";
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim));
  mha = register_module("mha", std::move(attention));
  dropout1 = register_module("dropout1", std::make_shared<nn::Dropout>(dropout_p, generator));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim));
  // Positions 0..4 as in the official nn.Sequential, so the Linears are "mlpblock.0" and "mlpblock.3".
  mlpblock = register_module("mlpblock", std::make_shared<nn::Sequential>());
  mlpblock->push_back(std::make_shared<nn::Linear>(dim, ffn_dim));
  mlpblock->push_back(std::make_shared<nn::GELU>());
  mlpblock->push_back(std::make_shared<nn::Dropout>(dropout_p, generator));
  mlpblock->push_back(std::make_shared<nn::Linear>(ffn_dim, dim));
  mlpblock->push_back(std::make_shared<nn::Dropout>(dropout_p, generator));
}

Tensor LraBlock::forward(const Tensor& x, const Tensor& mask, const Tensor& cls, bool cls_only) {
  ::lsf::nn::ModuleScope call_site(*this);
  LSF_CHECK(!cls_only || cls.defined()) << "LraBlock: cls_only asks for the CLS row alone, but no cls was passed";
  nn::AttentionArgs args;
  args.mask = mask;
  Tensor h;
  if (!cls.defined()) {
    h = add(x, dropout1->forward(mha->forward(norm1->forward(x), args)));
  } else if (!cls_as_token) {
    // §2.4: norm1 on the tokens only; the attention gets the raw CLS and returns [B, 1 + n, d]
    // (cls_only: [B, 1, d]).
    args.cls = cls;
    args.cls_only = cls_only;
    Tensor attended = mha->forward(norm1->forward(x), args);
    h = add(cls_only ? cls : cat({cls, x}, 1), dropout1->forward(attended));
  } else {
    // The CLS as an extra first token of this layer (un-normalised, always real); with cls_only
    // the attention's output is cut to that token's row before the residual.
    Tensor tokens = cat({cls, norm1->forward(x)}, 1);
    args.mask = cat({ones({x.size(0), 1}, TensorOptions(kBool).device(x.device())), mask}, 1);
    Tensor attended = mha->forward(tokens, args);
    if (cls_only) h = add(cls, dropout1->forward(attended.narrow(1, 0, 1)));
    else h = add(cat({cls, x}, 1), dropout1->forward(attended));
  }
  profiler::PhaseScope phase("ffn");
  return add(h, mlpblock->forward(norm2->forward(h)));
}

Tensor LraBlock::forward_packed(const Tensor& x, const PackedSequences& packed, const Tensor& cls, bool cls_only) {
  ::lsf::nn::ModuleScope call_site(*this);
  auto* long_short = dynamic_cast<nn::LongShortAttention*>(mha.get());
  LSF_CHECK(long_short != nullptr) << "LraBlock: packed sequences need an attention with a packed path "
                                   << "(long-short); this block's is " << mha->type_name();
  LSF_CHECK(!cls_only || cls.defined()) << "LraBlock: cls_only asks for the CLS rows alone, but no cls was passed";
  nn::AttentionArgs args;
  Tensor h;
  if (!cls.defined()) {
    h = add(x, dropout1->forward(long_short->forward_packed(norm1->forward(x), packed, args)));
  } else {
    args.cls = cls;
    args.cls_only = cls_only;
    Tensor attended = long_short->forward_packed(norm1->forward(x), packed, args);  // [B + T, d] (cls_only: [B, d])
    const Tensor cls_rows = cls.reshape({packed.batch, cls.size(2)});
    h = add(cls_only ? cls_rows : cat({cls_rows, x}, 0), dropout1->forward(attended));
  }
  profiler::PhaseScope phase("ffn");
  return add(h, mlpblock->forward(norm2->forward(h)));
}

LraHead::LraHead(int64_t in_features, int64_t hidden, int64_t num_classes) : Layer("SCHead") {
  // Positions 0..2 as in the official nn.Sequential: "mlpblock.0" and "mlpblock.2".
  mlpblock = register_module("mlpblock", std::make_shared<nn::Sequential>());
  mlpblock->push_back(std::make_shared<nn::Linear>(in_features, hidden));
  mlpblock->push_back(std::make_shared<nn::ReLU>());
  mlpblock->push_back(std::make_shared<nn::Linear>(hidden, num_classes));
}

Tensor LraHead::forward(const Tensor& features) {
  ::lsf::nn::ModuleScope call_site(*this);
  return mlpblock->forward(features);
}

}  // namespace lsf::lra
