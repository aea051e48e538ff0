// softmax / log_softmax: argument checks, the fused kernel call, and the backward node, which
// saves only the output y (both gradients are functions of y and dy alone).
#include "lsformer/ops/softmax.h"
#include "lsformer/ops/kernels/softmax.h"

#include <limits>

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/index.h"

namespace lsf {

LSF_DEFINE_KERNEL(softmax_forward_kernel, void(bool log, const Tensor& y, const Tensor& x, int64_t dim));
LSF_DEFINE_KERNEL(softmax_backward_kernel, void(bool log, const Tensor& dx, const Tensor& dy, const Tensor& y, int64_t dim));
LSF_DEFINE_KERNEL(masked_softmax_forward_kernel, void(const Tensor& y, const Tensor& x, const Tensor& keep));

namespace {

using autograd::NeedsGrad;
using autograd::SavedTensor;

// The backward node of softmax and masked_softmax: dx from the saved output alone.
void record_softmax_backward(const char* name, bool log, int64_t dim, const Tensor& x, const Tensor& y) {
  SavedTensor saved_y(y);  // SavedTensor detaches
  autograd::record(name, {x}, {y}, [log, dim, saved_y](const TensorList& g, const NeedsGrad&) -> TensorList {
    const Tensor& yv = saved_y.get();
    Tensor dx = empty(yv.shape(), yv.options());
    if (yv.numel() > 0) softmax_backward_kernel(yv.device(), log, dx, g[0], yv, dim);
    return {dx};
  });
}

Tensor softmax_impl(bool log, const Tensor& x, int64_t dim) {
  const char* name = log ? "log_softmax" : "softmax";
  check_defined(name, {&x});
  LSF_CHECK(is_floating(x.dtype())) << name << ": expected a floating-point tensor, got " << x.dtype()
                                    << " of shape " << x.shape();
  const int64_t d = wrap_dim(dim, x.dim(), name);
  Tensor y = empty(x.shape(), x.options());
  if (x.numel() > 0) softmax_forward_kernel(x.device(), log, y, x, d);
  if (autograd::any_requires_grad({&x})) record_softmax_backward(name, log, d, x, y);
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(false, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(true, x, dim); }

Tensor masked_softmax(const Tensor& x, const Tensor& keep) {
  const char* name = "masked_softmax";
  check_defined(name, {&x, &keep});
  check_same_device(name, {&x, &keep});
  LSF_CHECK(is_floating(x.dtype())) << name << ": expected a floating-point tensor, got " << x.dtype()
                                    << " of shape " << x.shape();
  LSF_CHECK(x.dim() >= 1) << name << ": x must have at least one dimension (the softmax runs over the last)";
  LSF_CHECK(keep.dtype() == kBool) << name << ": keep must be a bool tensor, got " << keep.dtype() << " (shape "
                                   << keep.shape() << ")";
  LSF_CHECK(broadcast_shapes(x.shape(), keep.shape(), name) == x.shape())
      << name << ": keep of shape " << keep.shape() << " does not broadcast to x's shape " << x.shape();
  const int64_t last = x.dim() - 1;
  if (!masked_softmax_forward_kernel.implemented(x.device().type)) {
    // The composition: dropped entries at the dtype's lowest finite value, not −inf, so that a row
    // with nothing kept is a finite (uniform) softmax, zeroed afterwards, and its gradient is 0,
    // not NaN; exp(lowest − max) underflows to exactly 0 in every other row.
    const Tensor drop = eq(keep, 0.0);
    // (f16's lowest, −65504, is finite in bf16 too.)
    const double lowest = x.dtype() == kF64   ? -std::numeric_limits<double>::max()
                          : x.dtype() == kF32 ? -double(std::numeric_limits<float>::max())
                                              : -65504.0;
    return masked_fill(softmax(masked_fill(x, drop, lowest), last), drop, 0.0);
  }
  Tensor y = empty(x.shape(), x.options());
  if (x.numel() > 0) {
    NoGradGuard no_grad;  // the expand is plumbing
    masked_softmax_forward_kernel(x.device(), y, x, keep.expand(x.shape()));
  }
  if (autograd::any_requires_grad({&x})) record_softmax_backward(name, false, last, x, y);
  return y;
}

}  // namespace lsf
