// One char-LM layer: the feed-forward block and the §3.2 wiring (see lm_layer.h).
#include "lsformer/models/lm/lm_layer.h"

#include "lsformer/engine/profiler.h"
#include "lsformer/models/attention/causal_long_short.h"
#include "lsformer/models/lm/causal_full_attention.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/unary.h"

namespace lsf::lm {

FeedForwardLayer::FeedForwardLayer(int64_t dim, int64_t ffn_dim, double p, Generator* generator)
    : Module("FeedForwardLayer") {
  fc1 = register_module("fc1", std::make_shared<nn::Linear>(dim, ffn_dim));
  fc2 = register_module("fc2", std::make_shared<nn::Linear>(ffn_dim, dim));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p, generator));
}

Tensor FeedForwardLayer::forward(const Tensor& y) {
  ::lsf::nn::ModuleScope call_site(*this);
  profiler::PhaseScope phase("ffn");
  // One Dropout module, used twice (the official FeedForwardLayer has one nn.Dropout too).
  // fc1's bias is added inside the GELU (Linear::forward_gelu): the same values, one pass less.
  return dropout->forward(fc2->forward(dropout->forward(fc1->forward_gelu(y))));
}

namespace {

std::shared_ptr<nn::Attention> make_attention(const LmModelOptions& o) {
  if (o.attention == LmAttention::LongShort) {
    nn::CausalLongShortAttentionOptions a;
    a.dim = o.dim;
    a.heads = o.heads;
    a.chunk_length = o.chunk_length;
    a.rank = o.rank;
    a.window = o.window;
    a.memory_length = o.memory_length;
    a.bias = o.bias;
    a.dropout = o.dropout;
    a.fused = o.fused;
    a.generator = o.generator;
    return std::make_shared<nn::CausalLongShortAttention>(a);
  }
  return std::make_shared<CausalFullAttention>(CausalFullAttentionOptions{
      .dim = o.dim, .heads = o.heads, .bias = o.bias, .dropout = o.dropout, .generator = o.generator});
}

}  // namespace

TransformerLSLayer::TransformerLSLayer(const LmModelOptions& o) : Module("TransformerLSLayer") {
  attn = register_module("attn", make_attention(o));
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(o.dim));
  ff = register_module("ff", std::make_shared<FeedForwardLayer>(o.dim, o.ffn_dim, o.dropout, o.generator));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(o.dim));
}

Tensor TransformerLSLayer::forward(const Tensor& h, const Tensor& h_cache, const nn::AttentionArgs& positions) {
  ::lsf::nn::ModuleScope call_site(*this);
  const Tensor x = norm1->forward(h);
  nn::AttentionArgs args = positions;
  args.memory = norm1->forward(h_cache);
  const Tensor y = norm2->forward(add(x, attn->forward(x, args)));
  return add(y, ff->forward(y));
}

}  // namespace lsf::lm
