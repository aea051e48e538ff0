// cross_entropy and nll_loss: shape/dtype checks shared by both, the fused forward kernels,
// the reduction, and backward nodes that call the fused backward kernels.
//
// cross_entropy saves the logits and each element's logsumexp (N·K values), not the
// log-probabilities (N·C·K): the backward recomputes softmax = exp(x − lse) on the fly.
#include "lsformer/ops/loss.h"
#include "lsformer/ops/kernels/loss.h"

#include <cmath>

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/factory.h"

namespace lsf {

LSF_DEFINE_KERNEL(cross_entropy_forward_kernel, ClassLossStats(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& target, int64_t ignore_index, double label_smoothing));
LSF_DEFINE_KERNEL(cross_entropy_backward_kernel, void(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits, const Tensor& lse, const Tensor& target, int64_t ignore_index, double label_smoothing, double scale));
LSF_DEFINE_KERNEL(nll_loss_forward_kernel, ClassLossStats(const Tensor& loss, const Tensor& log_probs, const Tensor& target, int64_t ignore_index));
LSF_DEFINE_KERNEL(nll_loss_backward_kernel, void(const Tensor& dlog_probs, const Tensor& dloss, const Tensor& target, int64_t ignore_index, double scale));

namespace {

using autograd::NeedsGrad;
using autograd::SavedTensor;

// input viewed as [N, C, K], target as [N, K]; out_shape is the unreduced loss's shape.
struct Layout {
  int64_t N = 1, C = 1, K = 1;
  Shape out_shape;
};

Layout class_layout(const char* op, const Tensor& input, const Tensor& target) {
  check_defined(op, {&input, &target});
  check_same_device(op, {&input, &target});
  LSF_CHECK(is_floating(input.dtype())) << op << ": expected a floating-point input, got " << input.dtype()
                                        << " of shape " << input.shape();
  LSF_CHECK(target.dtype() == kI64 || target.dtype() == kI32)
      << op << ": expected a target of class indices with dtype i64 or i32, got " << target.dtype()
      << " of shape " << target.shape();
  LSF_CHECK(input.dim() >= 1) << op << ": expected input of shape [C], [N, C] or [N, C, d1, ...], got shape "
                              << input.shape();
  const Shape& s = input.shape();
  Layout L;
  if (input.dim() == 1) {
    L.C = s[0];  // a single sample: 0-d target, 0-d loss
  } else {
    L.N = s[0];
    L.C = s[1];
    L.out_shape.push_back(s[0]);
    for (int64_t d = 2; d < input.dim(); ++d) {
      L.K *= s[d];
      L.out_shape.push_back(s[d]);
    }
  }
  LSF_CHECK(target.shape() == L.out_shape)
      << op << ": target of shape " << target.shape() << " does not match input of shape " << s
      << " (expected target shape " << L.out_shape << ")";
  return L;
}

void check_targets(const char* op, const ClassLossStats& st, const Layout& L, int64_t ignore_index,
                   const Tensor& target) {
  LSF_CHECK(st.bad_index < 0) << op << ": target " << st.bad_value << " is out of bounds for " << L.C
                              << " classes (expected a class in [0, " << L.C - 1 << "] or ignore_index "
                              << ignore_index << "; at flat position " << st.bad_index
                              << " of target shape " << target.shape() << ")";
}

Tensor reduce(Reduction reduction, const Tensor& per_element, const ClassLossStats& st, const Layout& L,
              const TensorOptions& options) {
  switch (reduction) {
    case Reduction::None: return per_element.view(L.out_shape);
    case Reduction::Sum: return scalar_tensor(st.sum, options);
    case Reduction::Mean: break;
  }
  // Every element ignored (or none at all): 0/0 = nan, as in PyTorch.
  return scalar_tensor(st.count > 0 ? st.sum / double(st.count) : std::nan(""), options);
}

// Gradient scale of each element's loss: 1 / (number counted) for Mean. When nothing is
// counted every element is ignored and gets a zero gradient whatever the scale.
double element_scale(Reduction reduction, int64_t count) {
  return reduction == Reduction::Mean && count > 0 ? 1.0 / double(count) : 1.0;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options) {
  const char* op = "cross_entropy";
  const Layout L = class_layout(op, logits, target);
  const double eps = options.label_smoothing;
  LSF_CHECK(eps >= 0.0 && eps <= 1.0) << op << ": label_smoothing must be in [0, 1], got " << eps
                                      << " (input shape " << logits.shape() << ")";
  const Tensor x = contiguous_detached(logits).view({L.N, L.C, L.K});
  const Tensor t = contiguous_detached(target).view({L.N, L.K});
  // lse stays in f32 for 16-bit logits: the backward's exp(x − lse) turns an error δ in lse into
  // a relative error δ in every softmax value, and a bf16 lse near 10 is off by up to 2^-5.
  const DType lse_dtype = logits.dtype() == kBF16 || logits.dtype() == kF16 ? kF32 : logits.dtype();
  Tensor lse = empty({L.N, L.K}, logits.options().dtype(lse_dtype));
  Tensor per_element = options.reduction == Reduction::None ? empty({L.N, L.K}, logits.options()) : Tensor();
  ClassLossStats st;
  if (L.N * L.K > 0) st = cross_entropy_forward_kernel(logits.device(), per_element, lse, x, t, options.ignore_index, eps);
  check_targets(op, st, L, options.ignore_index, target);
  Tensor out = reduce(options.reduction, per_element, st, L, logits.options());

  if (autograd::any_requires_grad({&logits})) {
    SavedTensor sx(x), slse(lse), st_target(t);
    const Shape in_shape = logits.shape();
    const double scale = element_scale(options.reduction, st.count);
    const CrossEntropyOptions o = options;
    autograd::record(op, {logits}, {out}, [sx, slse, st_target, in_shape, scale, o](const TensorList& g, const NeedsGrad&) -> TensorList {
      const Tensor& xv = sx.get();
      Tensor dx = empty(xv.shape(), xv.options());
      if (xv.numel() > 0)
        cross_entropy_backward_kernel(xv.device(), dx, g[0].contiguous(), xv, slse.get(), st_target.get(),
                                      o.ignore_index, o.label_smoothing, scale);
      return {dx.view(in_shape)};
    });
  }
  return out;
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& options) {
  const char* op = "nll_loss";
  const Layout L = class_layout(op, log_probs, target);
  const Tensor x = contiguous_detached(log_probs).view({L.N, L.C, L.K});
  const Tensor t = contiguous_detached(target).view({L.N, L.K});
  Tensor per_element = options.reduction == Reduction::None ? empty({L.N, L.K}, log_probs.options()) : Tensor();
  ClassLossStats st;
  if (L.N * L.K > 0) st = nll_loss_forward_kernel(log_probs.device(), per_element, x, t, options.ignore_index);
  check_targets(op, st, L, options.ignore_index, target);
  Tensor out = reduce(options.reduction, per_element, st, L, log_probs.options());

  if (autograd::any_requires_grad({&log_probs})) {
    SavedTensor st_target(t);
    const Shape in_shape = log_probs.shape();
    const Shape shape3 = x.shape();
    const double scale = element_scale(options.reduction, st.count);
    const int64_t ignore_index = options.ignore_index;
    const TensorOptions opts = log_probs.options();
    autograd::record(op, {log_probs}, {out}, [st_target, in_shape, shape3, scale, ignore_index, opts](const TensorList& g, const NeedsGrad&) -> TensorList {
      Tensor dx = empty(shape3, opts);
      if (dx.numel() > 0)
        nll_loss_backward_kernel(dx.device(), dx, g[0].contiguous(), st_target.get(), ignore_index, scale);
      return {dx.view(in_shape)};
    });
  }
  return out;
}

}  // namespace lsf
