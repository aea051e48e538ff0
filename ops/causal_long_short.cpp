// Causal long-short attention core (docs/transformer-ls.md §3.3 steps 8–11): argument checks, the
// fused op with its backward node, and the composed reference built from primitive ops.
//
// The fused backward saves only the inputs (as given: the kernels read strided rows), the output
// and one log-sum-exp per query; the kernel recomputes every probability it needs from them
// (see ops/cpu/causal_long_short.cpp). The output and the input gradients are laid out like q
// and the inputs, so that views in (split_heads) give views out.
#include "lsformer/ops/causal_long_short.h"
#include "lsformer/ops/kernels/causal_long_short.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lsformer/engine/autocast.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/kernels/binary.h"
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

LSF_DEFINE_KERNEL(causal_long_short_forward_kernel,
                  void(const Tensor& out, const Tensor& lse, const CausalLongShortInputs& in,
                       const CausalLongShortGeometry& g));
LSF_DEFINE_KERNEL(causal_long_short_backward_kernel,
                  void(const CausalLongShortInputs& grads, const Tensor& dout, const Tensor& out,
                       const Tensor& lse, const CausalLongShortInputs& in, const CausalLongShortGeometry& g));

namespace {

using autograd::NeedsGrad;
using autograd::SavedTensor;

struct Sizes {
  int64_t B, h, M, e, w, Nc;
};

// Validates every shape against q's and the geometry; names the op and the offending shapes.
Sizes check_inputs(const char* op, const CausalLongShortInputs& in, const CausalLongShortGeometry& g) {
  check_defined(op, {&in.q, &in.kw, &in.vw, &in.u, &in.v, &in.rw, &in.kc, &in.vc, &in.rc});
  check_same_device(op, {&in.q, &in.kw, &in.vw, &in.u, &in.v, &in.rw, &in.kc, &in.vc, &in.rc});
  check_same_dtype(op, {&in.q, &in.kw, &in.vw, &in.u, &in.v, &in.rw, &in.kc, &in.vc, &in.rc});
  LSF_CHECK(is_floating(in.q.dtype())) << op << ": expected f32 or f64 tensors, got " << in.q.dtype();
  LSF_CHECK(g.chunk_length >= 1 && g.rank >= 1 && g.memory_chunks >= 0)
      << op << ": chunk length " << g.chunk_length << " and rank " << g.rank
      << " must be ≥ 1 and memory chunks " << g.memory_chunks << " ≥ 0";
  LSF_CHECK(std::isfinite(g.q_scale) && g.q_scale > 0)
      << op << ": q_scale must be finite and > 0, got " << g.q_scale;
  LSF_CHECK(in.q.dim() == 4) << op << ": q must be [B, h, M, e], got shape " << in.q.shape();
  Sizes s{in.q.size(0), in.q.size(1), in.q.size(2), in.q.size(3), 0, 0};
  LSF_CHECK(in.rw.dim() == 3 && in.rw.size(0) == s.h && in.rw.size(2) == s.e && in.rw.size(1) >= 1)
      << op << ": rw must be [h, w, e] = [" << s.h << ", w ≥ 1, " << s.e << "], got shape " << in.rw.shape();
  s.w = in.rw.size(1);
  LSF_CHECK(s.M % g.chunk_length == 0)
      << op << ": the block length M = " << s.M << " (q shape " << in.q.shape()
      << ") must be a multiple of the chunk length " << g.chunk_length;
  s.Nc = (g.memory_chunks + s.M / g.chunk_length) * g.rank;
  const Shape window{s.B, s.h, s.w + s.M, s.e}, comp{s.B, s.h, s.Nc, s.e}, bias{s.h, s.e}, table{s.h, s.Nc, s.e};
  LSF_CHECK(in.kw.shape() == window && in.vw.shape() == window)
      << op << ": kw and vw must be [B, h, w+M, e] = " << window << ", got " << in.kw.shape() << " and " << in.vw.shape();
  LSF_CHECK(in.u.shape() == bias && in.v.shape() == bias)
      << op << ": u and v must be [h, e] = " << bias << ", got " << in.u.shape() << " and " << in.v.shape();
  LSF_CHECK(in.kc.shape() == comp && in.vc.shape() == comp)
      << op << ": kc and vc must be [B, h, Nc, e] = " << comp << " (Nc = (memory chunks " << g.memory_chunks
      << " + M/l " << s.M / g.chunk_length << ")·r " << g.rank << "), got " << in.kc.shape() << " and " << in.vc.shape();
  LSF_CHECK(in.rc.shape() == table) << op << ": rc must be [h, Nc, e] = " << table << ", got " << in.rc.shape();
  return s;
}

// The kernels read every tensor through its strides (rows_contiguous: ops/kernels/row_layout.h).
CausalLongShortInputs row_contiguous_inputs(const CausalLongShortInputs& in) {
  return {rows_contiguous(in.q),  rows_contiguous(in.kw), rows_contiguous(in.vw),
          rows_contiguous(in.u),  rows_contiguous(in.v),  rows_contiguous(in.rw),
          rows_contiguous(in.kc), rows_contiguous(in.vc), rows_contiguous(in.rc)};
}

TensorList as_list(const CausalLongShortInputs& in) {
  return {in.q, in.kw, in.vw, in.u, in.v, in.rw, in.kc, in.vc, in.rc};
}

}  // namespace

Tensor causal_long_short_attention(const CausalLongShortInputs& inputs, const CausalLongShortGeometry& g) {
  const CausalLongShortInputs& i = inputs;
  if (const autocast::Region region({&i.q, &i.kw, &i.vw, &i.u, &i.v, &i.rw, &i.kc, &i.vc, &i.rc}); region) {
    const CausalLongShortInputs low{region.in(i.q),  region.in(i.kw), region.in(i.vw), region.in(i.u), region.in(i.v),
                                    region.in(i.rw), region.in(i.kc), region.in(i.vc), region.in(i.rc)};
    return region.out(causal_long_short_attention(low, g));
  }
  const char* op = "causal_long_short_attention";
  const Sizes s = check_inputs(op, inputs, g);
  const CausalLongShortInputs in = row_contiguous_inputs(inputs);
  // out in q's layout: for q = split_heads(X W_q), [B, M, h, e] memory, so merging the heads
  // back to [B, M, d] is a view.
  Tensor out = empty_in_layout_of(in.q);
  Tensor lse = empty({s.B, s.h, s.M}, in.q.options());
  count_multiply_adds(op, 3 * s.B * s.h * s.M * (s.Nc + s.w) * s.e);  // content + position logits, weighted sum
  if (out.numel() > 0) causal_long_short_forward_kernel(in.q.device(), out, lse, in, g);
  const TensorList list = as_list(in);
  if (autograd::any_requires_grad(list)) {
    std::vector<SavedTensor> saved(list.begin(), list.end());
    SavedTensor saved_out(out), saved_lse(lse);  // SavedTensor detaches
    autograd::record(op, list, {out}, [saved, saved_out, saved_lse, g](const TensorList& grads, const NeedsGrad& needs) -> TensorList {
      CausalLongShortInputs x{saved[0].get(), saved[1].get(), saved[2].get(), saved[3].get(), saved[4].get(),
                              saved[5].get(), saved[6].get(), saved[7].get(), saved[8].get()};
      TensorList xs = as_list(x);
      TensorList d(xs.size());
      for (size_t i = 0; i < xs.size(); ++i)
        if (needs[i]) d[i] = empty_in_layout_of(xs[i]);
      CausalLongShortInputs dg{d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8]};
      const Tensor dout = rows_contiguous(grads[0]);
      if (dout.numel() > 0) {
        causal_long_short_backward_kernel(dout.device(), dg, dout, saved_out.get(), saved_lse.get(), x, g);
      } else {
        for (Tensor& t : d)
          if (t.defined()) t.zero_();
      }
      return d;
    });
  }
  return out;
}

namespace {

// Band rows: query t reads window rows t+1 … t+w (absolute positions t−w+1 … t). [M·w] i64.
Tensor band_rows(int64_t M, int64_t w, Device device) {
  std::vector<int64_t> band(static_cast<size_t>(M * w));
  for (int64_t t = 0; t < M; ++t)
    for (int64_t j = 0; j < w; ++j) band[size_t(t * w + j)] = t + 1 + j;
  return tensor(band, {M * w}).to(device);
}

}  // namespace

Tensor causal_long_short_attention_probabilities(const CausalLongShortInputs& in, const CausalLongShortGeometry& g) {
  const Sizes s = check_inputs("causal_long_short_attention_probabilities", in, g);
  const auto [B, h, M, e, w, Nc] = s;
  // Chunk positions: slot σ of query t has table row nvis(t) − 1 − σ; hidden slots are masked
  // (for them row 0 is gathered, any valid row would do, and masked_fill then replaces the logit).
  std::vector<int64_t> position(size_t(M * Nc), 0);
  std::vector<bool> hidden(size_t(M * Nc), false);
  for (int64_t t = 0; t < M; ++t) {
    const int64_t nvis = (g.memory_chunks + t / g.chunk_length) * g.rank;
    for (int64_t sigma = 0; sigma < Nc; ++sigma) {
      if (sigma < nvis) position[size_t(t * Nc + sigma)] = nvis - 1 - sigma;
      else hidden[size_t(t * Nc + sigma)] = true;
    }
  }
  const Device device = in.q.device();
  Tensor position_index = tensor(position, {1, 1, M, Nc}).to(device).expand({B, h, M, Nc});
  Tensor hidden_mask = tensor(hidden, {M, Nc}).to(device);

  Tensor k_band = index_select(in.kw, 2, band_rows(M, w, device)).view({B, h, M, w, e});
  const Tensor q = g.q_scale == 1.0 ? in.q : mul(in.q, g.q_scale);  // q̂
  Tensor qu = add(q, in.u.view({1, h, 1, e}));
  Tensor qv = add(q, in.v.view({1, h, 1, e}));
  Tensor window = add(sum(mul(qu.unsqueeze(3), k_band), {-1}),                 // [B, h, M, w]
                      matmul(qv, in.rw.transpose(1, 2).unsqueeze(0)));
  Tensor content = matmul(q, in.kc.transpose(2, 3));                            // [B, h, M, Nc]
  Tensor positions = gather(matmul(q, in.rc.transpose(1, 2).unsqueeze(0)), 3, position_index);
  Tensor compressed = masked_fill(add(content, positions), hidden_mask, -std::numeric_limits<double>::infinity());
  return softmax(cat({compressed, window}, 3), 3);
}

Tensor causal_long_short_attention_composed(const CausalLongShortInputs& in, const CausalLongShortGeometry& g) {
  const Sizes s = check_inputs("causal_long_short_attention_composed", in, g);
  const auto [B, h, M, e, w, Nc] = s;
  Tensor p = causal_long_short_attention_probabilities(in, g);  // [B, h, M, Nc + w]
  Tensor v_band = index_select(in.vw, 2, band_rows(M, w, in.q.device())).view({B, h, M, w, e});
  Tensor out = matmul(p.narrow(3, 0, Nc), in.vc);
  return add(out, sum(mul(p.narrow(3, Nc, w).unsqueeze(4), v_band), {3}));
}

}  // namespace lsf
