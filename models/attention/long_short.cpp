// nn::LongShortAttention (bidirectional, LRA semantics): docs/transformer-ls.md §2.3 steps 1–14.
//
// The core (steps 7–12: global and window logits, one softmax, zeroed padded rows, dropout,
// context) is the fused op lsf::long_short_attention, or with options.fused = false the same
// computation composed from primitive ops (lsf::long_short_attention_composed). Everything
// around it is composed here from nn layers and ops.
//
// Deviations from / sharpenings of the official code, all on paths the LRA scripts never run:
// * w = 0, r > 0 is "no window branch" (the released code would fail there, §2.7).
// * The optional value convolution (conv_kernel_size, off in every script and broken as
//   released, §2.7) is left out: LongShortOptions has no such option.
// * dconv_fc is registered only when r > 0 (no dead parameters for the window-only ablation).
// * w = 0 and r = 0 without a CLS is rejected (§2.3 step 8: that case requires a CLS).
#include "lsformer/models/attention/long_short.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "lsformer/engine/autograd.h"
#include "lsformer/engine/profiler.h"
#include "lsformer/models/attention/heads.h"
#include "lsformer/models/nn/capture.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/index.h"
#include "lsformer/ops/long_short.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/shape.h"
#include "lsformer/ops/softmax.h"

namespace lsf::nn {

namespace {
constexpr const char* kName = "LongShortAttention";
}

LongShortAttention::LongShortAttention(const LongShortOptions& o) : Attention(kName), options_(o) {
  LSF_CHECK(o.dim > 0 && o.heads > 0 && o.dim % o.heads == 0)
      << kName << ": dim = " << o.dim << " must be a positive multiple of heads = " << o.heads
      << " (choose dim = heads · head width)";
  LSF_CHECK(o.window >= 0) << kName << ": window must be ≥ 0 (0 disables the window branch), got " << o.window;
  LSF_CHECK(o.rank >= 0) << kName << ": rank must be ≥ 0 (0 disables the dynamic projection), got " << o.rank;
  LSF_CHECK(o.dropout >= 0.0 && o.dropout <= 1.0)
      << kName << ": attention dropout has to be between 0 and 1, got " << o.dropout;
  LSF_CHECK(o.block_queries >= 0) << kName << ": block_queries must be ≥ 0, got " << o.block_queries;
  W_q = register_module("W_q", std::make_shared<Linear>(o.dim, o.dim));
  W_k = register_module("W_k", std::make_shared<Linear>(o.dim, o.dim));
  W_v = register_module("W_v", std::make_shared<Linear>(o.dim, o.dim));
  W_o = register_module("W_o", std::make_shared<Linear>(o.dim, o.dim));
  dual_ln_s = register_module("dual_ln_s", std::make_shared<LayerNorm>(o.dim, 1e-5));
  dual_ln_l = register_module("dual_ln_l", std::make_shared<LayerNorm>(o.dim, 1e-5));
  if (o.rank > 0) dconv_fc = register_module("dconv_fc", std::make_shared<Linear>(o.dim, o.heads * o.rank));
}

void LongShortAttention::check_args(const Tensor& x, const AttentionArgs& args, int64_t n) const {
  const LongShortOptions& o = options_;
  const int64_t w = o.window, r = o.rank;
  LSF_CHECK(!args.memory.defined()) << kName << ": a memory was passed, but the bidirectional attention has none "
                                    << "(memory shape " << args.memory.shape() << "); use the causal attention";
  LSF_CHECK(!args.relative_positions.defined() && !args.chunk_positions.defined())
      << kName << ": relative_positions / chunk_positions are for the causal attention; leave them undefined";
  LSF_CHECK(args.height == 0 && args.width == 0 && args.num_global == 0)
      << kName << ": height/width/num_global are for the 2-D attention; leave them 0 (got " << args.height << ", "
      << args.width << ", " << args.num_global << ")";
  LSF_CHECK(w == 0 || n % w == 0) << kName << ": the sequence length n = " << n
                                  << " must be a multiple of the window w = " << w
                                  << " (pad the input to a multiple of w), x shape " << x.shape();
  LSF_CHECK(w > 0 || r > 0 || args.cls.defined())
      << kName << ": window = 0 and rank = 0 leave no key slots without a CLS; pass args.cls or set window or rank > 0";
  LSF_CHECK(!args.cls_only || args.cls.defined())
      << kName << ": cls_only asks for the CLS row alone, but no CLS was passed (args.cls is undefined)";
  if (args.cls.defined()) {
    LSF_CHECK(args.cls.dim() == 3 && args.cls.size(1) == 1 && args.cls.size(2) == o.dim)
        << kName << ": cls must be [B, 1, d] with d = " << o.dim << ", got " << args.cls.shape();
  }
}

Tensor LongShortAttention::forward(const Tensor& x, const AttentionArgs& args) {
  ::lsf::nn::ModuleScope call_site(*this);
  profiler::PhaseScope phase("attention");
  const LongShortOptions& o = options_;
  LSF_CHECK(x.defined()) << kName << ": the input x is undefined";
  LSF_CHECK(x.dim() == 3 && x.size(2) == o.dim)
      << kName << ": x must be [B, n, d] with d = " << o.dim << ", got shape " << x.shape();
  const int64_t B = x.size(0), n = x.size(1), h = o.heads;
  check_args(x, args, n);
  if (args.cls.defined()) {
    LSF_CHECK(args.cls.size(0) == B) << kName << ": cls must be [B, 1, d] = {" << B << ", 1, " << o.dim << "}, got "
                                     << args.cls.shape();
  }
  const Tensor& mask = args.mask;
  if (mask.defined()) {
    LSF_CHECK(mask.dtype() == kBool && mask.shape() == Shape({B, n}))
        << kName << ": mask must be a bool tensor [B, n] = {" << B << ", " << n << "} (true for real tokens), got "
        << mask.dtype() << " of shape " << mask.shape();
  }

  // Steps 1–3's projections of x as one op: their gradients for x are summed in one buffer.
  const TensorList proj = project(x);
  // Steps 1–2: queries (their e^{-1/2} is the core's q_scale); LN_L-normalised keys and values,
  // as head views of the token-major [B, n, d] outputs (no copies). The fused core reads them in
  // place and writes the context in q's layout, so merge_heads(context) below is a view too, and
  // their gradients come back in the same layouts and pass to the Linears and LN_L without
  // transposing copies.
  Tensor q = split_heads(proj[0], h);
  Tensor k = split_heads(dual_ln_l->forward(proj[1]), h);
  Tensor v = split_heads(dual_ln_l->forward(proj[2]), h);
  // Step 3's logits [B, n, h·r], padding −∞.
  Tensor logits;
  if (o.rank > 0) {
    logits = proj[3];
    if (mask.defined()) {
      // Padding as an additive [B, n, 1] bias of 0 / −∞ (x + 0 = x exactly): unlike masked_fill
      // on the [B, n, h·r] logits, its backward is the identity, no pass over the gradient (the
      // softmax already gives the padded tokens p = 0 and so zero gradient).
      Tensor pad_bias = masked_fill(zeros({B, n, 1}, x.options()), eq(mask.to(x.dtype()), 0.0).view({B, n, 1}),
                                    -std::numeric_limits<double>::infinity());
      logits = add(logits, pad_bias);
    }
  }
  Tensor oc;
  Tensor context = attend(q, k, v, logits, mask, args.cls, &oc);  // [B, h, n, e]
  // Step 14: the CLS row first; only it with cls_only (the token rows' projection is never formed).
  if (args.cls_only) return W_o->forward(merge_heads(oc));  // [B, 1, d]
  return W_o->forward(merge_heads(args.cls.defined() ? cat({oc, context}, 2) : context));
}

Tensor LongShortAttention::forward_packed(const Tensor& x, const PackedSequences& packed, const AttentionArgs& args) {
  ::lsf::nn::ModuleScope call_site(*this);
  profiler::PhaseScope phase("attention");
  const LongShortOptions& o = options_;
  LSF_CHECK(x.defined()) << kName << ": the input x is undefined";
  LSF_CHECK(x.dim() == 2 && x.size(0) == packed.total && x.size(1) == o.dim)
      << kName << ": packed x must be [T, d] with T = " << packed.total << " (the layout's real tokens) and d = "
      << o.dim << ", got shape " << x.shape();
  LSF_CHECK(!args.mask.defined()) << kName << ": forward_packed takes the mask from the packed layout; leave "
                                  << "args.mask undefined";
  const int64_t B = packed.batch, h = o.heads;
  check_args(x, args, packed.length);
  if (args.cls.defined()) {
    LSF_CHECK(args.cls.size(0) == B) << kName << ": cls must be [B, 1, d] = {" << B << ", 1, " << o.dim << "}, got "
                                     << args.cls.shape();
  }
  // Steps 1–2 on the T real rows, then into the head layout (one copy each, as the padded path's
  // .contiguous()), padding zero; q's e^{-1/2} is the core's q_scale.
  const TensorList proj = project(x);
  Tensor q = unpack_sequences(proj[0], packed, h);
  Tensor k = unpack_sequences(dual_ln_l->forward(proj[1]), packed, h);
  Tensor v = unpack_sequences(dual_ln_l->forward(proj[2]), packed, h);
  // Step 3's logits: −∞ at padding, so its softmax over the tokens gives padding p = 0.
  Tensor logits;
  if (o.rank > 0) logits = unpack_sequences(proj[3], packed, 0, -std::numeric_limits<double>::infinity());
  Tensor oc;
  Tensor context = attend(q, k, v, logits, packed.mask, args.cls, &oc);  // [B, h, n, e]
  if (args.cls_only) return W_o->forward(merge_heads(oc).view({B, o.dim}));  // [B, d]: the token rows not packed
  Tensor rows = pack_sequences(context, packed, h);                      // [T, d]
  if (args.cls.defined()) rows = cat({merge_heads(oc).view({B, o.dim}), rows}, 0);  // [B + T, d]
  return W_o->forward(rows);
}

TensorList LongShortAttention::project(const Tensor& x) {
  if (dconv_fc) return forward_linears(x, {W_q.get(), W_k.get(), W_v.get(), dconv_fc.get()});
  return forward_linears(x, {W_q.get(), W_k.get(), W_v.get()});
}

Tensor LongShortAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& proj_logits,
                                  const Tensor& mask, const Tensor& cls, Tensor* cls_out) {
  const LongShortOptions& o = options_;
  // q [B, h, n, e] unscaled: the core scales it by e^{-1/2} (q_scale).
  const int64_t B = q.size(0), n = q.size(2), h = o.heads, e = o.dim / o.heads, r = o.rank, w = o.window;
  const double scale = 1.0 / std::sqrt(double(e));

  // Steps 3–4: projection weights (softmax over tokens, padding masked) and compressed K̄, V̄.
  TensorList kbar_parts, vbar_parts;
  Tensor qc, kc, vc;
  if (cls.defined()) {  // step 5: the CLS's raw key and value (no LN_L) join the global slots, first
    qc = mul(split_heads(W_q->forward(cls), h), scale);
    kc = split_heads(W_k->forward(cls), h);
    vc = split_heads(W_v->forward(cls), h);
    kbar_parts.push_back(kc);
    vbar_parts.push_back(vc);
  }
  if (r > 0) {
    Tensor p = softmax(proj_logits, 1).view({B, n, h, r}).permute({0, 2, 3, 1});  // P [B, h, r, n]
    // P·K and P·V as one product of P with [K | V], a head's keys and values side by side: dP is
    // then one GEMM over 2e columns written straight in P's memory layout (no autograd sum of two
    // dP's, no transposing copy before the softmax backward), and the products are 2e wide. The
    // stack keeps k's layout: for head views of token-major [B, n, d] tensors (the padded path)
    // it is [B, n, h, 2, e] memory, so the gradient slices it hands back to k and v are
    // token-major like the fused core's dk, dv, and autograd sums them without transposing.
    const bool token_major = k.stride(1) < k.stride(2) && v.stride(1) < v.stride(2);
    Tensor kv = token_major ? stack({k.transpose(1, 2), v.transpose(1, 2)}, 3).view({B, n, h, 2 * e}).transpose(1, 2)
                            : stack({k, v}, 3).view({B, h, n, 2 * e});  // [B, h, n, 2e]
    Tensor kvb = matmul(p, kv);                                           // [B, h, r, 2e]
    Tensor kb = kvb.narrow(3, 0, e), vb = kvb.narrow(3, e, e);            // [B, h, r, e]
    kbar_parts.push_back(kb);
    vbar_parts.push_back(vb);
    if (capturing(this)) {
      capture(this, "proj", p);
      capture(this, "kbar_raw", kb);
      capture(this, "vbar_raw", vb);
    }
  }
  // Step 6: LN_G over the full width of every global slot (the CLS slot included).
  Tensor kbar, vbar;
  if (!kbar_parts.empty()) {
    Tensor kcat = kbar_parts.size() == 1 ? kbar_parts[0] : cat(kbar_parts, 2);
    Tensor vcat = vbar_parts.size() == 1 ? vbar_parts[0] : cat(vbar_parts, 2);
    kbar = split_heads(dual_ln_s->forward(merge_heads(kcat)), h);
    vbar = split_heads(dual_ln_s->forward(merge_heads(vcat)), h);
  }

  // Steps 7–12: the joint softmax over [global | window] and the context.
  LongShortAttentionOptions core{.window = w,
                                 .self_slot = (w == 0 && r == 0),
                                 .dropout = o.dropout,
                                 .training = is_training(),
                                 .generator = o.generator,
                                 .block_queries = o.block_queries,
                                 .q_scale = scale};
  Tensor context = o.fused ? long_short_attention(q, k, v, kbar, vbar, mask, core)
                           : long_short_attention_composed(q, k, v, kbar, vbar, mask, core);  // [B, h, n, e]
  if (capturing(this)) {
    {
      NoGradGuard no_grad;
      capture(this, "q", mul(q, scale));  // the scaled queries the logits are formed from
    }
    capture(this, "k", k);
    capture(this, "v", v);
    if (kbar.defined()) {
      capture(this, "kbar", kbar);
      capture(this, "vbar", vbar);
    }
    NoGradGuard no_grad;  // for looking at, not for training: no graph behind it
    capture(this, "attention", long_short_attention_probabilities(q, k, kbar, mask, core));
    capture(this, "context", context);
  }
  // Step 13: the CLS query attends over [k_c] ∪ {C_j : j real}, keys = values = C, no dropout.
  if (cls.defined()) *cls_out = global_token_update(qc, kc, vc, context, mask);  // [B, h, 1, e]
  return context;
}

std::string LongShortAttention::extra_repr() const {
  std::ostringstream os;
  os << "dim=" << options_.dim << ", heads=" << options_.heads << ", window=" << options_.window
     << ", rank=" << options_.rank << ", dropout=" << options_.dropout << ", fused=" << (options_.fused ? "true" : "false");
  return os.str();
}

}  // namespace lsf::nn
