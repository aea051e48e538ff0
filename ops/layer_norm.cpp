// layer_norm: argument checks, the fused forward kernel (which also returns each row's mean
// and rstd), and a backward node that saves x, mean, rstd and weight and produces dx,
// dweight and dbias in one fused kernel, computing only the ones asked for.
#include "lsformer/ops/layer_norm.h"
#include "lsformer/ops/kernels/layer_norm.h"

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/factory.h"

namespace lsf {

LSF_DEFINE_KERNEL(layer_norm_forward_kernel, void(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps));
LSF_DEFINE_KERNEL(layer_norm_backward_kernel, void(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight));

namespace {

using autograd::NeedsGrad;
using autograd::SavedTensor;

void check_affine(const char* what, const Tensor& p, const Tensor& x, const Shape& normalized_shape) {
  if (!p.defined()) return;
  LSF_CHECK(p.shape() == normalized_shape)
      << "layer_norm: " << what << " of shape " << p.shape() << " does not match normalized_shape "
      << normalized_shape;
  LSF_CHECK(p.dtype() == x.dtype()) << "layer_norm: " << what << " has dtype " << p.dtype()
                                    << " but input has dtype " << x.dtype();
  LSF_CHECK(p.device() == x.device()) << "layer_norm: " << what << " is on " << p.device()
                                      << " but input is on " << x.device();
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  check_defined("layer_norm", {&x});
  LSF_CHECK(is_floating(x.dtype())) << "layer_norm: expected a floating-point input, got " << x.dtype()
                                    << " of shape " << x.shape();
  const int64_t k = int64_t(normalized_shape.size());
  LSF_CHECK(k >= 1) << "layer_norm: normalized_shape must have at least one dimension (input shape "
                    << x.shape() << ")";
  bool matches = x.dim() >= k;
  for (int64_t i = 0; i < k && matches; ++i) matches = x.shape()[x.dim() - k + i] == normalized_shape[i];
  LSF_CHECK(matches) << "layer_norm: normalized_shape " << normalized_shape
                     << " does not match the trailing dimensions of input of shape " << x.shape();
  check_affine("weight", weight, x, normalized_shape);
  check_affine("bias", bias, x, normalized_shape);
  LSF_CHECK(eps >= 0) << "layer_norm: eps must be non-negative, got " << eps;

  const int64_t n = shape_numel(normalized_shape);
  const int64_t rows = n > 0 ? x.numel() / n : shape_numel(Shape(x.shape().begin(), x.shape().end() - k));
  const Tensor xc = contiguous_detached(x), wc = contiguous_detached(weight), bc = contiguous_detached(bias);
  Tensor y = empty(x.shape(), x.options());
  // Row statistics in f32 for 16-bit x (the kernels compute them in float): stored in bf16 they
  // would reach the backward rounded to 2^-8 relative (issue #19 item 4).
  const DType stats_dtype = x.dtype() == kBF16 || x.dtype() == kF16 ? kF32 : x.dtype();
  const TensorOptions stats = TensorOptions(stats_dtype).device(x.device());
  Tensor mean = empty({rows}, stats), rstd = empty({rows}, stats);
  if (x.numel() > 0) layer_norm_forward_kernel(x.device(), y, mean, rstd, xc, wc, bc, eps);

  if (autograd::any_requires_grad({&x, &weight, &bias})) {
    SavedTensor sx(xc), smean(mean), srstd(rstd), sw(wc);
    const Shape x_shape = x.shape();
    autograd::record("layer_norm", {x, weight, bias}, {y},
                     [sx, smean, srstd, sw, x_shape, normalized_shape](const TensorList& g, const NeedsGrad& needs) -> TensorList {
      const Tensor& xv = sx.get();
      Tensor dx = needs[0] ? empty(x_shape, xv.options()) : Tensor();
      Tensor dweight = needs[1] ? empty(normalized_shape, xv.options()) : Tensor();
      Tensor dbias = needs[2] ? empty(normalized_shape, xv.options()) : Tensor();
      const Tensor dy = g[0].is_contiguous() ? g[0] : g[0].contiguous();
      layer_norm_backward_kernel(xv.device(), dx, dweight, dbias, dy, xv, smean.get(), srstd.get(), sw.get());
      return {dx, dweight, dbias};
    });
  }
  return y;
}

}  // namespace lsf
