// softmax / log_softmax: argument checks, the fused kernel call, and the backward node, which
// saves only the output y (both gradients are functions of y and dy alone).
#include "lsformer/ops/softmax.h"
#include "lsformer/ops/kernels/softmax.h"

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/factory.h"

namespace lsf {

LSF_DEFINE_KERNEL(softmax_forward_kernel, void(bool log, const Tensor& y, const Tensor& x, int64_t dim));
LSF_DEFINE_KERNEL(softmax_backward_kernel, void(bool log, const Tensor& dx, const Tensor& dy, const Tensor& y, int64_t dim));

namespace {

using autograd::NeedsGrad;
using autograd::SavedTensor;

Tensor softmax_impl(bool log, const Tensor& x, int64_t dim) {
  const char* name = log ? "log_softmax" : "softmax";
  check_defined(name, {&x});
  LSF_CHECK(is_floating(x.dtype())) << name << ": expected a floating-point tensor, got " << x.dtype()
                                    << " of shape " << x.shape();
  const int64_t d = wrap_dim(dim, x.dim(), name);
  Tensor y = empty(x.shape(), x.options());
  if (x.numel() > 0) softmax_forward_kernel(x.device(), log, y, x, d);
  if (autograd::any_requires_grad({&x})) {
    SavedTensor saved_y(y.detach());
    autograd::record(name, {x}, {y}, [log, d, saved_y](const TensorList& g, const NeedsGrad&) -> TensorList {
      const Tensor& yv = saved_y.get();
      Tensor dx = empty(yv.shape(), yv.options());
      if (yv.numel() > 0) softmax_backward_kernel(yv.device(), log, dx, g[0], yv, d);
      return {dx};
    });
  }
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(false, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(true, x, dim); }

}  // namespace lsf
