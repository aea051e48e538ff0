// long_short_attention: argument checks, the dropout counter reservation, the fused kernel call
// and the backward node. The node saves the inputs and the per-row log-sum-exp [B, h, n] only;
// the dropout mask is not saved but regenerated from the generator state it was drawn with.
#include "lsformer/ops/long_short.h"
#include "lsformer/ops/kernels/long_short.h"

#include <cmath>
#include <limits>

#include "lsformer/engine/autocast.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/kernels/binary.h"
#include "lsformer/ops/dropout.h"
#include "lsformer/ops/kernels/dropout.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/flops.h"
#include "lsformer/ops/index.h"
#include "lsformer/ops/kernels/index.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/kernels/matmul.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/kernels/reduce.h"
#include "lsformer/ops/kernels/row_layout.h"
#include "lsformer/ops/shape.h"
#include "lsformer/ops/softmax.h"
#include "lsformer/ops/kernels/softmax.h"

namespace lsf {

LSF_DEFINE_KERNEL(long_short_forward_kernel,
                  void(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& kbar, const Tensor& vbar, const Tensor& mask, LongShortGeometry geo,
                       LongShortDropout drop));
LSF_DEFINE_KERNEL(long_short_backward_kernel,
                  void(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dkbar,
                       const Tensor& dvbar, const Tensor& dout, const Tensor& lse, const Tensor& q,
                       const Tensor& k, const Tensor& v, const Tensor& kbar, const Tensor& vbar,
                       const Tensor& mask, LongShortGeometry geo, LongShortDropout drop));

namespace {

constexpr const char* kName = "long_short_attention";

void check_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kbar, const Tensor& vbar,
                const Tensor& mask, const LongShortAttentionOptions& o) {
  check_defined(kName, {&q, &k, &v});
  LSF_CHECK(q.dim() == 4) << kName << ": q must be [B, h, n, e], got shape " << q.shape();
  LSF_CHECK(k.shape() == q.shape() && v.shape() == q.shape())
      << kName << ": q, k and v must have one shape [B, h, n, e], got " << q.shape() << ", " << k.shape()
      << " and " << v.shape();
  LSF_CHECK(is_floating(q.dtype())) << kName << ": expected floating-point q, got " << q.dtype();
  check_same_dtype(kName, {&q, &k, &v});
  check_same_device(kName, {&q, &k, &v});
  LSF_CHECK(kbar.defined() == vbar.defined())
      << kName << ": pass both kbar and vbar (the projected keys and values) or neither";
  const int64_t B = q.size(0), h = q.size(1), n = q.size(2), e = q.size(3);
  if (kbar.defined()) {
    LSF_CHECK(kbar.dim() == 4 && kbar.size(0) == B && kbar.size(1) == h && kbar.size(3) == e &&
              vbar.shape() == kbar.shape())
        << kName << ": kbar and vbar must be [B, h, R, e] = [" << B << ", " << h << ", R, " << e << "], got "
        << kbar.shape() << " and " << vbar.shape() << " (q " << q.shape() << ")";
    check_same_dtype(kName, {&q, &kbar, &vbar});
    check_same_device(kName, {&q, &kbar, &vbar});
  }
  if (mask.defined()) {
    LSF_CHECK(mask.dtype() == kBool && mask.shape() == Shape({B, n}))
        << kName << ": mask must be a bool tensor of shape [B, n] = {" << B << ", " << n << "}, got "
        << mask.dtype() << " of shape " << mask.shape();
    check_same_device(kName, {&q, &mask});
  }
  LSF_CHECK(o.window >= 0) << kName << ": window must be ≥ 0, got " << o.window;
  LSF_CHECK(o.window == 0 || n % o.window == 0)
      << kName << ": the sequence length n = " << n << " must be a multiple of the window w = " << o.window
      << " (pad the sequence to a multiple of w), q shape " << q.shape();
  LSF_CHECK(!o.self_slot || o.window == 0) << kName << ": self_slot is only meaningful with window 0, got window "
                                           << o.window;
  const int64_t R = kbar.defined() ? kbar.size(2) : 0;
  LSF_CHECK(R > 0 || o.window > 0 || o.self_slot)
      << kName << ": no key slots (no projected keys, window 0 and no self slot); give kbar/vbar or a window";
  LSF_CHECK(o.block_queries >= 0) << kName << ": block_queries must be ≥ 0, got " << o.block_queries;
  LSF_CHECK(o.dropout >= 0.0 && o.dropout <= 1.0)
      << kName << ": dropout probability has to be between 0 and 1, got " << o.dropout;
  LSF_CHECK(std::isfinite(o.q_scale)) << kName << ": q_scale must be finite, got " << o.q_scale;
}

}  // namespace

Tensor long_short_attention(const Tensor& q_in, const Tensor& k, const Tensor& v, const Tensor& kbar,
                            const Tensor& vbar, const Tensor& mask, const LongShortAttentionOptions& options) {
  if (const autocast::Region region({&q_in, &k, &v, &kbar, &vbar}); region)
    return region.out(long_short_attention(region.in(q_in), region.in(k), region.in(v), region.in(kbar),
                                           region.in(vbar), mask, options));
  check_args(q_in, k, v, kbar, vbar, mask, options);
  LongShortGeometry geo{options.window, options.self_slot, options.block_queries};
  // q's scale inside the kernel where the backend has it (the CPU's), else as an op before it.
  const bool kernel_scales = q_in.device().type == DeviceType::CPU;
  const Tensor q = options.q_scale == 1.0 || kernel_scales ? q_in : mul(q_in, options.q_scale);
  geo.q_scale = kernel_scales ? options.q_scale : 1.0;
  const int64_t B = q.size(0), h = q.size(1), n = q.size(2), e = q.size(3);
  const int64_t R = kbar.defined() ? kbar.size(2) : 0;

  Tensor qc, kc, vc, kbc, vbc, m;
  {
    NoGradGuard no_grad;  // layout copies and the mask conversion are plumbing
    // The kernels read q, k, v (and write out, dq, dk, dv) through their strides with the
    // feature axis contiguous: views such as split_heads(X W) pass without a copy.
    qc = rows_contiguous(q).detach();
    kc = rows_contiguous(k).detach();
    vc = rows_contiguous(v).detach();
    kbc = kbar.defined() ? contiguous_detached(kbar) : empty({B, h, 0, e}, q.options());
    vbc = vbar.defined() ? contiguous_detached(vbar) : empty({B, h, 0, e}, q.options());
    m = mask.defined() ? mask.to(kU8).contiguous() : ones({B, n}, q.options().dtype(kU8));
  }

  // Dropout as lsf::dropout would draw it on the probability tensor [B, h, n, R + s].
  LongShortDropout drop;
  if (options.training && options.dropout > 0.0) {
    if (options.dropout >= 1.0) {
      drop.threshold = 1u << 24;  // no 24-bit uniform reaches it: everything dropped
      drop.scale = 0.0;
    } else {
      Generator& gen = options.generator != nullptr ? *options.generator : default_generator();
      const uint64_t slots = uint64_t(B * h * n * (R + geo.span()));
      drop.state = gen.reserve((slots + 3) / 4);
      drop.threshold = dropout_keep_threshold(options.dropout);
      drop.scale = 1.0 / (1.0 - options.dropout);
    }
  }

  // out in q's layout: for q = split_heads(X W_q), [B, n, h, e] memory, so merging the heads
  // back to [B, n, d] is a view.
  Tensor out = empty_in_layout_of(qc);
  Tensor lse = empty({B, h, n}, q.options());
  count_multiply_adds(kName, 2 * B * h * n * (R + geo.span()) * e);  // logits and weighted sum
  if (B * h * n > 0) long_short_forward_kernel(q.device(), out, lse, qc, kc, vc, kbc, vbc, m, geo, drop);

  const bool grad_kbar = kbar.defined();
  TensorList inputs = grad_kbar ? TensorList{q, k, v, kbar, vbar} : TensorList{q, k, v};
  if (autograd::any_requires_grad(inputs)) {
    using autograd::SavedTensor;
    SavedTensor sq(qc), sk(kc), sv(vc), skb(kbc), svb(vbc), sm(m), slse(lse);
    autograd::record(kName, inputs, {out},
                     [=](const TensorList& g, const autograd::NeedsGrad& needs) -> TensorList {
                       const Tensor& qv = sq.get();
                       // Each gradient in its input's layout (passes back through a head-split
                       // view without a copy).
                       auto grad_if = [&](size_t i, const Tensor& like) {
                         return i < needs.size() && needs[i] ? empty_in_layout_of(like) : Tensor();
                       };
                       Tensor dq = grad_if(0, qv), dk = grad_if(1, sk.get()), dv = grad_if(2, sv.get());
                       Tensor dkb = grad_kbar ? grad_if(3, skb.get()) : Tensor();
                       Tensor dvb = grad_kbar ? grad_if(4, svb.get()) : Tensor();
                       Tensor dout = rows_contiguous(g[0]);  // dout [B, h, n, e], any row layout
                       if (qv.size(0) * qv.size(1) * qv.size(2) > 0)
                         long_short_backward_kernel(qv.device(), dq, dk, dv, dkb, dvb, dout, slse.get(), qv,
                                                            sk.get(), sv.get(), skb.get(), svb.get(), sm.get(), geo,
                                                            drop);
                       if (grad_kbar) return {dq, dk, dv, dkb, dvb};
                       return {dq, dk, dv};
                     });
  }
  return out;
}

namespace {

// The rows of the zero-padded sequence (ext rows of zeros each side) that the window tiles
// gather: key j = g·w − ext + u of query group g is padded row g·w + u. [n/w · s] i64.
Tensor window_rows(int64_t n, int64_t w, int64_t s) {
  std::vector<int64_t> rows;
  for (int64_t g = 0; g < n / w; ++g)
    for (int64_t u = 0; u < s; ++u) rows.push_back(g * w + u);
  return tensor(rows, {int64_t(rows.size())});
}

}  // namespace

Tensor long_short_attention_probabilities(const Tensor& q_in, const Tensor& k, const Tensor& kbar, const Tensor& mask,
                                          const LongShortAttentionOptions& options) {
  check_args(q_in, k, k, kbar, kbar, mask, options);
  const Tensor q = options.q_scale == 1.0 ? q_in : mul(q_in, options.q_scale);
  const LongShortGeometry geo{options.window, options.self_slot, options.block_queries};
  const int64_t B = q.size(0), h = q.size(1), n = q.size(2), e = q.size(3);
  const int64_t R = kbar.defined() ? kbar.size(2) : 0, w = geo.window, ext = geo.ext(), s = geo.span();
  const double inf = std::numeric_limits<double>::infinity();
  Tensor real = mask.defined() ? mask : ones({B, n}, q.options().dtype(kBool));  // real [B, n]

  TensorList logits;  // pieces of [B, h, n, R + s]
  if (R > 0) logits.push_back(matmul(q, kbar.transpose(2, 3)));  // G [B, h, n, R]
  if (w > 0) {
    Tensor index = window_rows(n, w, s).to(q.device());  // on the inputs' device (CUDA too)
    Tensor kt = index_select(pad(k, {0, 0, ext, ext}), 2, index).view({B, h, n / w, s, e});
    Tensor wl = matmul(q.reshape({B, h, n / w, w, e}), kt.transpose(3, 4));  // [B, h, n/w, w, s]
    Tensor key_real = index_select(pad(real.to(q.dtype()), {ext, ext}), 1, index).view({B, 1, n / w, 1, s});
    wl = masked_fill(wl, eq(key_real, 0.0), -inf);
    logits.push_back(wl.reshape({B, h, n, s}));
  } else if (geo.self_slot) {
    logits.push_back(sum(mul(q, k), {3}, /*keepdim=*/true));  // [B, h, n, 1]
  }
  Tensor all = logits.size() == 1 ? logits[0] : cat(logits, 3);
  // Padded queries: finite logits before the softmax (a row of −∞ would give NaN, and NaN
  // gradients), zero rows after it.
  Tensor pad_q = eq(real.to(q.dtype()), 0.0).view({B, 1, n, 1});
  return masked_fill(softmax(masked_fill(all, pad_q, 0.0), 3), pad_q, 0.0);
}

Tensor long_short_attention_composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kbar,
                                     const Tensor& vbar, const Tensor& mask,
                                     const LongShortAttentionOptions& options) {
  check_args(q, k, v, kbar, vbar, mask, options);
  const LongShortGeometry geo{options.window, options.self_slot, options.block_queries};
  const int64_t B = q.size(0), h = q.size(1), n = q.size(2), e = q.size(3);
  const int64_t R = kbar.defined() ? kbar.size(2) : 0, w = geo.window, ext = geo.ext(), s = geo.span();
  Tensor p = long_short_attention_probabilities(q, k, kbar, mask, options);  // [B, h, n, R + s]
  p = dropout(p.contiguous(), options.dropout, options.training, options.generator);

  Tensor out;
  if (R > 0) out = matmul(p.narrow(3, 0, R), vbar);
  if (s > 0) {
    Tensor pw = p.narrow(3, R, s);
    Tensor ctx;
    if (w > 0) {
      const Tensor rows = window_rows(n, w, s).to(q.device());
      Tensor vt = index_select(pad(v, {0, 0, ext, ext}), 2, rows).view({B, h, n / w, s, e});
      ctx = matmul(pw.reshape({B, h, n / w, w, s}), vt).reshape({B, h, n, e});
    } else {
      ctx = mul(pw, v);
    }
    out = out.defined() ? add(out, ctx) : ctx;
  }
  return out;
}

}  // namespace lsf
