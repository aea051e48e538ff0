// The LRA classifier: option validation, the encoder (embeddings, blocks with the last-layer CLS,
// final LayerNorm, pooling) and the single / dual heads. See lra_model.h for the model, the
// parameter names and the deviations from the official code.
#include "lsformer/models/lra/lra_model.h"

#include <sstream>
#include <string>

#include "lsformer/engine/error.h"
#include "lsformer/models/attention/full_attention.h"
#include "lsformer/models/attention/linformer.h"
#include "lsformer/models/attention/long_short.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/pack.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/shape.h"
#include "lsformer/ops/unary.h"

namespace lsf::lra {
namespace {

constexpr const char* kName = "LraClassifier";

bool is_long_short(const LraModelOptions& o) { return o.attention == AttentionKind::LongShort; }

// One block's attention module; Linformer layers after the first (`first`) share its E (as the
// LRA code's class-level projection matrix).
std::shared_ptr<nn::Attention> make_attention(const LraModelOptions& o, const nn::Attention* first) {
  if (o.attention == AttentionKind::LongShort) {
    nn::LongShortOptions a;
    a.dim = o.dim;
    a.heads = o.heads;
    a.window = o.window;
    a.rank = o.rank;
    a.dropout = o.attention_dropout;
    a.fused = o.fused;
    a.generator = o.generator;
    return std::make_shared<nn::LongShortAttention>(a);
  }
  if (o.attention == AttentionKind::Full) {
    nn::FullAttentionOptions a;
    a.dim = o.dim;
    a.heads = o.heads;
    a.dropout = o.attention_dropout;
    a.generator = o.generator;
    return std::make_shared<nn::FullAttention>(a);
  }
  nn::LinformerOptions a;
  a.dim = o.dim;
  a.heads = o.heads;
  a.max_seq_len = o.max_seq_len;
  a.k = o.linformer_k;
  a.dropout = o.attention_dropout;
  a.share_projection_with = dynamic_cast<const nn::LinformerAttention*>(first);
  a.generator = o.generator;
  return std::make_shared<nn::LinformerAttention>(a);
}

// tokens [B, n] and mask [B, n] (named `tok` and `msk` in messages, e.g. "tokens2", "mask2"):
// dtypes, shapes, the id range and the length limits of the options.
void check_inputs(const LraModelOptions& o, const Tensor& tokens, const Tensor& mask, const char* tok, const char* msk) {
  LSF_CHECK(tokens.defined()) << kName << ": " << tok << " is undefined";
  LSF_CHECK(mask.defined()) << kName << ": " << msk << " is undefined (it must be true for real tokens)";
  LSF_CHECK(tokens.dtype() == kI64 || tokens.dtype() == kI32)
      << kName << ": " << tok << " must be i64 (or i32) ids, got " << tokens.dtype();
  LSF_CHECK(tokens.dim() == 2) << kName << ": " << tok << " must be [B, n], got shape " << tokens.shape();
  LSF_CHECK(mask.dtype() == kBool) << kName << ": " << msk << " must be bool (true for real tokens), got "
                                   << mask.dtype();
  LSF_CHECK(mask.shape() == tokens.shape())
      << kName << ": " << msk << " has shape " << mask.shape() << " but " << tok << " has shape " << tokens.shape();
  LSF_CHECK(mask.device() == tokens.device())
      << kName << ": " << msk << " is on " << mask.device() << " but " << tok << " is on " << tokens.device();
  const int64_t n = tokens.size(1);
  LSF_CHECK(n >= 1) << kName << ": " << tok << " has no positions (shape " << tokens.shape() << ")";
  LSF_CHECK(n <= o.max_seq_len) << kName << ": the sequence length n = " << n << " of " << tok
                                << " exceeds max_seq_len = " << o.max_seq_len;
  if (is_long_short(o) && o.window > 0) {
    LSF_CHECK(n % o.window == 0) << kName << ": the sequence length n = " << n << " of " << tok
                                 << " is not a multiple of window = " << o.window << " (pad to a multiple of the window)";
  }
  if (o.attention == AttentionKind::Linformer) {
    LSF_CHECK(n == o.max_seq_len) << kName << ": attention \"linformer\" needs n = max_seq_len = " << o.max_seq_len
                                  << " (its projection has one column per position), got n = " << n << " for " << tok;
  }
  // On the CPU the ids are checked here, with a message naming the model's input. On a GPU that
  // would be two synchronisations per forward (issue #19 item 5); the embedding's own range
  // check (one flag read, cuda/embedding.cu) names the bad id and the table size instead.
  if (tokens.numel() > 0 && tokens.device().is_cpu()) {
    const int64_t lo = amin(tokens).to(kI64).item<int64_t>();
    const int64_t hi = amax(tokens).to(kI64).item<int64_t>();
    LSF_CHECK(lo >= 0 && hi < o.vocab_size) << kName << ": " << tok << " ids span [" << lo << ", " << hi
                                            << "], outside [0, vocab_size = " << o.vocab_size << ")";
  }
}

}  // namespace

void validate(const LraModelOptions& o) {
  LSF_CHECK(o.vocab_size >= 1) << kName << ": vocab_size must be ≥ 1, got " << o.vocab_size;
  LSF_CHECK(o.max_seq_len >= 1) << kName << ": max_seq_len must be ≥ 1, got " << o.max_seq_len;
  LSF_CHECK(o.dim >= 1 && o.heads >= 1) << kName << ": dim and heads must be ≥ 1, got dim = " << o.dim
                                        << ", heads = " << o.heads;
  LSF_CHECK(o.dim % o.heads == 0) << kName << ": dim = " << o.dim << " is not divisible by heads = " << o.heads;
  LSF_CHECK(o.layers >= 1) << kName << ": layers must be ≥ 1, got " << o.layers;
  LSF_CHECK(o.ffn_dim >= 1) << kName << ": ffn_dim must be ≥ 1, got " << o.ffn_dim;
  LSF_CHECK(o.num_classes >= 1) << kName << ": num_classes must be ≥ 1, got " << o.num_classes;
  LSF_CHECK(o.head_hidden >= 1) << kName << ": head_hidden must be ≥ 1, got " << o.head_hidden;
  LSF_CHECK(o.dropout >= 0.0 && o.dropout < 1.0) << kName << ": dropout must be in [0, 1), got " << o.dropout;
  LSF_CHECK(o.attention_dropout >= 0.0 && o.attention_dropout < 1.0)
      << kName << ": attention_dropout must be in [0, 1), got " << o.attention_dropout;
  LSF_CHECK(int(o.attention) >= 0 && int(o.attention) <= int(AttentionKind::Linformer))
      << kName << ": attention holds no AttentionKind (" << int(o.attention) << ")";
  LSF_CHECK(o.pooling == Pooling::Cls || o.pooling == Pooling::Mean)
      << kName << ": pooling holds no Pooling (" << int(o.pooling) << ")";
  if (o.attention == AttentionKind::LongShort) {
    LSF_CHECK(o.window >= 0) << kName << ": window must be ≥ 0 (0: no window branch), got " << o.window;
    LSF_CHECK(o.rank >= 0) << kName << ": rank must be ≥ 0 (0: no dynamic projection), got " << o.rank;
    LSF_CHECK(o.window > 0 || o.rank > 0 || (o.layers == 1 && o.pooling == Pooling::Cls))
        << kName << ": window = 0 and rank = 0 leave a layer without a CLS with no key slots; only the last layer "
        << "has a CLS, so this needs layers = 1 and pooling \"cls\" (got layers = " << o.layers << ", pooling \""
        << to_string(o.pooling) << "\")";
  }
  if (o.attention == AttentionKind::Linformer) {
    LSF_CHECK(o.linformer_k >= 1) << kName << ": linformer_k must be ≥ 1, got " << o.linformer_k;
    LSF_CHECK(o.pooling == Pooling::Mean) << kName << ": pooling \"cls\" needs a CLS slot in the last layer, which "
                                   << "attention \"linformer\" (fixed length max_seq_len) cannot add; use pooling \"mean\"";
  }
}

int64_t pad_multiple(const LraModelOptions& o) { return is_long_short(o) && o.window > 0 ? o.window : 1; }

bool fixed_length(const LraModelOptions& o) { return o.attention == AttentionKind::Linformer; }

LraEncoder::LraEncoder(const LraModelOptions& options) : Module("Model"), options_(options) {
  validate(options_);
  const LraModelOptions& o = options_;
  // Registration order = the official state_dict order: the Model's own parameter first.
  if (o.pooling == Pooling::Cls) cls_embed = register_parameter("cls_embed", zeros({1, 1, o.dim}));
  embeddings = register_module(
      "embeddings", std::make_shared<LraEmbeddings>(o.vocab_size, o.max_seq_len, o.dim, o.dropout, o.generator));
  const nn::Attention* first = nullptr;
  for (int64_t i = 0; i < o.layers; ++i) {
    auto attention = make_attention(o, first);
    if (i == 0) first = attention.get();
    auto block = std::make_shared<LraBlock>(o.dim, o.ffn_dim, o.dropout, std::move(attention), o.generator);
    block->cls_as_token = !is_long_short(o);
    blocks.push_back(register_module("transformer_" + std::to_string(i), block));
  }
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(o.dim));
}

Tensor LraEncoder::forward(const Tensor& tokens, const Tensor& mask) { return forward(tokens, mask, nullptr); }

Tensor LraEncoder::forward(const Tensor& tokens, const Tensor& mask, std::vector<Tensor>* hidden) {
  ::lsf::nn::ModuleScope call_site(*this);
  check_inputs(options_, tokens, mask, "tokens", "mask");
  const bool cls = options_.pooling == Pooling::Cls;
  const int64_t B = tokens.size(0);
  if (options_.packed && is_long_short(options_)) return forward_packed(tokens, mask, hidden);
  Tensor x = embeddings->forward(tokens);  // [B, n, d]
  for (size_t i = 0; i < blocks.size(); ++i) {
    const bool last = i + 1 == blocks.size();
    // The CLS joins only the last layer (`--cls_last_layer`), one copy per example: a dense
    // [B, 1, d] tensor rather than a stride-0 view, the layout every attention kernel expects.
    Tensor c = cls && last ? cls_embed.to(x.dtype()).expand({B, 1, options_.dim}).contiguous() : Tensor();
    // Pooled at the CLS, the last layer's token rows are never read: the block forms the CLS row
    // alone, unless the caller asked for every layer's states.
    x = blocks[i]->forward(x, mask, c, /*cls_only=*/c.defined() && !hidden);
    if (hidden) hidden->push_back(x);
  }
  if (cls) return norm->forward(x.select(1, 0));  // the CLS row [B, d]
  // Masked mean over the real tokens: Σ_t m_t·LN(X)_t / max(Σ_t m_t, 1).
  Tensor m = mask.to(x.dtype()).unsqueeze(2);  // [B, n, 1]
  Tensor total = sum(mul(norm->forward(x), m), {1});  // [B, d]
  Tensor count = clamp(sum(m, {1}), 1.0, std::nullopt);  // [B, 1]
  return div(total, count);
}

// The encoder on packed sequences (options.packed, long-short attention): embeddings, blocks and
// the final LayerNorm run on the T real tokens ([T, d]; the last block's [B + T, d] with the CLS
// rows first), the attention core on the padded layout; the same features as the padded path.
Tensor LraEncoder::forward_packed(const Tensor& tokens, const Tensor& mask, std::vector<Tensor>* hidden) {
  const bool cls = options_.pooling == Pooling::Cls;
  const int64_t B = tokens.size(0), d = options_.dim;
  const PackedSequences packed = packed_sequences(mask);
  Tensor x = embeddings->forward_packed(tokens, packed);  // [T, d]
  for (size_t i = 0; i < blocks.size(); ++i) {
    const bool last = i + 1 == blocks.size();
    Tensor c = cls && last ? cls_embed.to(x.dtype()).expand({B, 1, d}).contiguous() : Tensor();
    x = blocks[i]->forward_packed(x, packed, c, /*cls_only=*/c.defined() && !hidden);  // as forward
    if (hidden) {  // as the padded path returns them: [B, n, d] (padding 0), the CLS row first
      Tensor tokens_rows = c.defined() ? x.narrow(0, B, packed.total) : x;
      Tensor padded = unpack_sequences(tokens_rows, packed);
      hidden->push_back(c.defined() ? cat({x.narrow(0, 0, B).view({B, 1, d}), padded}, 1) : padded);
    }
  }
  if (cls) return norm->forward(x.narrow(0, 0, B));  // the CLS rows [B, d] (all of x without hidden)
  // Masked mean over the real tokens: Σ_t LN(X)_t / max(count, 1).
  Tensor total = sum(unpack_sequences(norm->forward(x), packed), {1});             // [B, d]
  Tensor count = clamp(sum(mask.to(x.dtype()), {1}, /*keepdim=*/true), 1.0, std::nullopt);  // [B, 1]
  return div(total, count);
}

LraClassifier::LraClassifier(const LraModelOptions& options) : Module("LraClassifier"), options_(options) {
  model = register_module("model", std::make_shared<LraEncoder>(options_));
  const int64_t features = options_.dual ? 4 * options_.dim : options_.dim;
  seq_classifer = register_module("seq_classifer",
                                  std::make_shared<LraHead>(features, options_.head_hidden, options_.num_classes));
}

Tensor LraClassifier::forward(const Tensor& tokens, const Tensor& mask) {
  ::lsf::nn::ModuleScope call_site(*this);
  LSF_CHECK(!options_.dual) << kName << ": the model was built with dual = true (two documents); call "
                            << "forward(tokens, mask, tokens2, mask2)";
  return seq_classifer->forward(model->forward(tokens, mask));
}

Tensor LraClassifier::forward(const Tensor& tokens, const Tensor& mask, const Tensor& tokens2, const Tensor& mask2) {
  ::lsf::nn::ModuleScope call_site(*this);
  LSF_CHECK(options_.dual) << kName << ": two documents were passed but the model was built with dual = false";
  check_inputs(options_, tokens, mask, "tokens", "mask");
  check_inputs(options_, tokens2, mask2, "tokens2", "mask2");
  LSF_CHECK(tokens2.size(0) == tokens.size(0)) << kName << ": the two documents' batch sizes differ (tokens "
                                               << tokens.shape() << ", tokens2 " << tokens2.shape() << ")";
  Tensor u = model->forward(tokens, mask);    // [B, d]
  Tensor v = model->forward(tokens2, mask2);  // [B, d]
  return seq_classifer->forward(cat({u, v, mul(u, v), sub(u, v)}, 1));  // [B, 4d] → [B, classes]
}

std::string LraClassifier::extra_repr() const {
  const LraModelOptions& o = options_;
  std::ostringstream os;
  os << "attention=" << to_string(o.attention);
  if (o.attention == AttentionKind::LongShort) os << ", window=" << o.window << ", rank=" << o.rank;
  if (o.attention == AttentionKind::Linformer) os << ", k=" << o.linformer_k;
  os << ", pooling=" << to_string(o.pooling) << ", dual=" << (o.dual ? "true" : "false") << ", layers=" << o.layers
     << ", dim=" << o.dim << ", heads=" << o.heads;
  return os.str();
}

}  // namespace lsf::lra
