// nn::LinformerAttention, composed from primitive ops (Linear, views, matmul with a broadcast
// projection, masked_softmax, dropout). See the header for the semantics, the layout of E
// and F, and the deviations from the LRA code base.
#include "lsformer/models/attention/linformer.h"
#include "lsformer/models/nn/capture.h"

#include <cmath>
#include <sstream>

#include "lsformer/engine/profiler.h"
#include "lsformer/models/attention/heads.h"
#include "lsformer/models/attention/full_attention.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/dropout.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/softmax.h"

namespace lsf::nn {

LinformerAttention::LinformerAttention(const LinformerOptions& options)
    : Attention("LinformerAttention"), options_(options) {
  const char* op = "LinformerAttention";
  LSF_CHECK(options.dim > 0 && options.heads > 0)
      << op << ": dim and heads must be positive, got dim=" << options.dim << ", heads=" << options.heads;
  LSF_CHECK(options.dim % options.heads == 0)
      << op << ": dim=" << options.dim << " is not divisible by heads=" << options.heads
      << "; choose heads dividing dim (head width e = dim / heads)";
  LSF_CHECK(options.max_seq_len > 0 && options.k > 0)
      << op << ": max_seq_len and k must be positive, got max_seq_len=" << options.max_seq_len
      << ", k=" << options.k;
  LSF_CHECK(options.dropout >= 0.0 && options.dropout <= 1.0)
      << op << ": dropout must lie in [0, 1], got " << options.dropout;
  const int64_t d = options.dim;
  W_q = register_module("W_q", std::make_shared<Linear>(d, d, options.qkv_bias));
  W_k = register_module("W_k", std::make_shared<Linear>(d, d, options.qkv_bias));
  W_v = register_module("W_v", std::make_shared<Linear>(d, d, options.qkv_bias));
  W_o = register_module("W_o", std::make_shared<Linear>(d, d, options.out_bias));

  const Shape proj_shape = options.per_head ? Shape{options.heads, options.k, options.max_seq_len}
                                            : Shape{options.k, options.max_seq_len};
  if (const LinformerAttention* owner = options.share_projection_with) {
    const LinformerOptions& o = owner->options();
    LSF_CHECK(o.heads == options.heads && o.k == options.k && o.max_seq_len == options.max_seq_len &&
              o.share_kv == options.share_kv && o.per_head == options.per_head)
        << op << ": cannot share the projection of a layer with heads=" << o.heads << ", k=" << o.k
        << ", max_seq_len=" << o.max_seq_len << ", share_kv=" << o.share_kv << ", per_head=" << o.per_head
        << " with a layer configured heads=" << options.heads << ", k=" << options.k
        << ", max_seq_len=" << options.max_seq_len << ", share_kv=" << options.share_kv
        << ", per_head=" << options.per_head << "; the configurations must match";
    // The handles alias the owner's tensors (to(device) and load_state_dict update them in place).
    E = owner->E;
    F = owner->F;
  } else {
    E = register_parameter("E", init::normal_(empty(proj_shape), 0.0, 0.02));
    if (!options.share_kv) F = register_parameter("F", init::normal_(empty(proj_shape), 0.0, 0.02));
  }
}

std::string LinformerAttention::extra_repr() const {
  std::ostringstream s;
  s << "dim=" << options_.dim << ", heads=" << options_.heads << ", max_seq_len=" << options_.max_seq_len
    << ", k=" << options_.k << ", share_kv=" << (options_.share_kv ? "true" : "false")
    << ", per_head=" << (options_.per_head ? "true" : "false") << ", dropout=" << options_.dropout;
  if (shares_projection()) s << ", shared projection";
  return s.str();
}

Tensor LinformerAttention::forward(const Tensor& x, const AttentionArgs& args) {
  ::lsf::nn::ModuleScope call_site(*this);
  profiler::PhaseScope phase("attention");
  const char* op = "LinformerAttention";
  check_self_attention_args(op, x, options_.dim, args);
  LSF_CHECK(x.size(1) == options_.max_seq_len)
      << op << ": x of shape " << x.shape() << " has " << x.size(1) << " tokens, but this layer was built for "
      << "max_seq_len=" << options_.max_seq_len << " (its projection E is " << E.shape()
      << "); pad the input to " << options_.max_seq_len << " tokens (with a mask) or build the layer for "
      << x.size(1);
  const int64_t B = x.size(0), n = x.size(1), h = options_.heads, e = head_dim();

  // One op for the three projections of x: their gradients for x sum in one buffer.
  const TensorList qkv = forward_linears(x, {W_q.get(), W_k.get(), W_v.get()});
  Tensor q = split_heads(mul(qkv[0], 1.0 / std::sqrt(double(e))), h);  // [B, h, n, e]
  Tensor k = split_heads(qkv[1], h);                                     // [B, h, n, e]
  Tensor v = split_heads(qkv[2], h);                                     // [B, h, n, e]
  Tensor query_real;  // [B, 1, n, 1] bool, true for real queries
  if (args.mask.defined()) {
    // Padded tokens contribute nothing to the projected keys and values.
    Tensor keep = args.mask.to(x.dtype()).view({B, 1, n, 1});
    k = mul(k, keep);
    v = mul(v, keep);
    query_real = args.mask.view({B, 1, n, 1});
  }
  // E [h, k, n] or [k, n] broadcasts over the batch (and the heads): [B, h, k, e].
  Tensor k_proj = matmul(E, k);
  Tensor v_proj = matmul(options_.share_kv ? E : F, v);

  // [B, h, n, k]; a padded query's row is 0 (its output is W_o's bias), in the softmax's pass.
  Tensor logits = matmul(q, k_proj.transpose(2, 3));
  Tensor probs = query_real.defined() ? masked_softmax(logits, query_real) : softmax(logits, -1);
  capture(this, "attention", probs);
  probs = dropout(probs, options_.dropout, is_training(), options_.generator);

  Tensor context = matmul(probs, v_proj);  // [B, h, n, e]
  return W_o->forward(merge_heads(context));
}

}  // namespace lsf::nn
