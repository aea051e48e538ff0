// nn::FullAttention, composed from primitive ops (Linear, views, matmul, masked_softmax,
// dropout); autograd comes from those ops. See the header for the semantics and the deviations
// from the LRA code base.
#include "lsformer/models/attention/full_attention.h"
#include "lsformer/models/nn/capture.h"

#include <cmath>
#include <sstream>

#include "lsformer/engine/profiler.h"
#include "lsformer/models/attention/heads.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/dropout.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/softmax.h"

namespace lsf::nn {

void check_self_attention_args(const char* op, const Tensor& x, int64_t dim, const AttentionArgs& args) {
  LSF_CHECK(x.defined()) << op << ": the input x is undefined";
  LSF_CHECK(x.dim() == 3 && x.size(2) == dim)
      << op << ": expected x of shape [B, n, " << dim << "], got " << x.shape();
  LSF_CHECK(is_floating(x.dtype())) << op << ": expected a floating-point x, got " << x.dtype()
                                    << " (shape " << x.shape() << ")";
  LSF_CHECK(!args.memory.defined())
      << op << ": a memory (shape " << args.memory.shape()
      << ") was passed, but only the causal long-short attention uses one; leave AttentionArgs::memory undefined";
  LSF_CHECK(!args.relative_positions.defined() && !args.chunk_positions.defined())
      << op << ": relative_positions / chunk_positions were passed, but only the causal (char-LM) attentions use "
         "them; leave them undefined";
  LSF_CHECK(!args.cls_only)
      << op << ": AttentionArgs::cls_only needs a CLS slot, which only the bidirectional long-short attention "
         "has; leave it false";
  LSF_CHECK(!args.cls.defined())
      << op << ": a CLS vector (shape " << args.cls.shape()
      << ") was passed, but only the bidirectional long-short attention injects one; leave AttentionArgs::cls "
         "undefined (or prepend the CLS to x as an ordinary token)";
  LSF_CHECK(args.height == 0 && args.width == 0 && args.num_global == 0)
      << op << ": height/width/num_global (" << args.height << ", " << args.width << ", " << args.num_global
      << ") are for the 2-D long-short attention only; leave them 0";
  if (args.mask.defined()) {
    const Shape want{x.size(0), x.size(1)};
    LSF_CHECK(args.mask.shape() == want && args.mask.dtype() == kBool)
        << op << ": the mask must be a bool tensor of shape [B, n] = " << want << " (true for real tokens), got "
        << args.mask.dtype() << " of shape " << args.mask.shape();
    check_same_device(op, {&x, &args.mask});
  }
}

FullAttention::FullAttention(const FullAttentionOptions& options) : Attention("FullAttention"), options_(options) {
  LSF_CHECK(options.dim > 0 && options.heads > 0)
      << "FullAttention: dim and heads must be positive, got dim=" << options.dim << ", heads=" << options.heads;
  LSF_CHECK(options.dim % options.heads == 0)
      << "FullAttention: dim=" << options.dim << " is not divisible by heads=" << options.heads
      << "; choose heads dividing dim (head width e = dim / heads)";
  LSF_CHECK(options.dropout >= 0.0 && options.dropout <= 1.0)
      << "FullAttention: dropout must lie in [0, 1], got " << options.dropout;
  const int64_t d = options.dim;
  W_q = register_module("W_q", std::make_shared<Linear>(d, d, options.qkv_bias));
  W_k = register_module("W_k", std::make_shared<Linear>(d, d, options.qkv_bias));
  W_v = register_module("W_v", std::make_shared<Linear>(d, d, options.qkv_bias));
  W_o = register_module("W_o", std::make_shared<Linear>(d, d, options.out_bias));
}

std::string FullAttention::extra_repr() const {
  std::ostringstream s;
  s << "dim=" << options_.dim << ", heads=" << options_.heads << ", dropout=" << options_.dropout
    << ", causal=" << (options_.causal ? "true" : "false");
  return s.str();
}

Tensor FullAttention::forward(const Tensor& x, const AttentionArgs& args) {
  ::lsf::nn::ModuleScope call_site(*this);
  profiler::PhaseScope phase("attention");
  check_self_attention_args("FullAttention", x, options_.dim, args);
  const int64_t B = x.size(0), n = x.size(1), h = options_.heads, e = head_dim();

  // One op for the three projections of x: their gradients for x sum in one buffer.
  const TensorList qkv = forward_linears(x, {W_q.get(), W_k.get(), W_v.get()});
  Tensor q = split_heads(mul(qkv[0], 1.0 / std::sqrt(double(e))), h);  // [B, h, n, e]
  Tensor k = split_heads(qkv[1], h);                                     // [B, h, n, e]
  Tensor v = split_heads(qkv[2], h);                                     // [B, h, n, e]

  Tensor logits = matmul(q, k.transpose(2, 3));  // [B, h, n, n]
  // Which (query t, key j) pairs take part: both real (padding), and j ≤ t (causal). A padded
  // query's row keeps nothing, so masked_softmax makes it 0 (its output is W_o's bias). For
  // bools, a < b ⇔ (!a ∧ b).
  Tensor keep;  // bool, broadcastable to [B, h, n, n]
  if (args.mask.defined()) {
    const Tensor& real = args.mask;
    keep = lt(eq(real, 0.0).view({B, 1, n, 1}), real.view({B, 1, 1, n}));  // [B, 1, n, n]
  }
  if (options_.causal) {
    Tensor pos = arange(n, TensorOptions(kI64).device(x.device()));
    Tensor future = gt(pos.view({1, n}), pos.view({n, 1}));  // [n, n]: key j > query t
    keep = keep.defined() ? lt(future, keep) : eq(future, 0.0);
  }
  // One pass over the [B, h, n, n] logits (no masked copies of them or of the probabilities).
  Tensor probs = keep.defined() ? masked_softmax(logits, keep) : softmax(logits, -1);  // [B, h, n, n]
  capture(this, "attention", probs);
  probs = dropout(probs, options_.dropout, is_training(), options_.generator);

  Tensor context = matmul(probs, v);  // [B, h, n, e]
  return W_o->forward(merge_heads(context));
}

}  // namespace lsf::nn
