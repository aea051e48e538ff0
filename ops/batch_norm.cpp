// batch_norm: argument checks, the forward kernel, the in-place running-statistics update and a
// backward node saving x, the statistics used and the weight.
#include "lsformer/ops/batch_norm.h"
#include "lsformer/ops/kernels/batch_norm.h"

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"

namespace lsf {

LSF_DEFINE_KERNEL(batch_norm_forward_kernel,
                  void(const Tensor& y, const Tensor& mean, const Tensor& invstd, const Tensor& var, const Tensor& x,
                       const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, bool training, double eps));
LSF_DEFINE_KERNEL(batch_norm_backward_kernel,
                  void(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x,
                       const Tensor& mean, const Tensor& invstd, const Tensor& weight, bool training));

namespace {

constexpr const char* kOp = "batch_norm";

void check_channel_vector(const char* what, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  LSF_CHECK(t.shape() == Shape{x.size(1)}) << kOp << ": " << what << " of shape " << t.shape()
                                            << " does not match the " << x.size(1) << " channels of input "
                                            << x.shape();
  LSF_CHECK(t.dtype() == x.dtype()) << kOp << ": " << what << " has dtype " << t.dtype() << " but input has dtype "
                                    << x.dtype();
  LSF_CHECK(t.device() == x.device()) << kOp << ": " << what << " is on " << t.device() << " but input is on "
                                      << x.device();
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, const BatchNormOptions& options) {
  check_defined(kOp, {&x});
  LSF_CHECK(x.dtype() == kF32 || x.dtype() == kF64) << kOp << ": expected an f32 or f64 input, got " << x.dtype()
                                                    << " of shape " << x.shape();
  LSF_CHECK(x.dim() >= 2) << kOp << ": expected an input [N, C, *] of at least 2 dimensions, got shape " << x.shape();
  LSF_CHECK(running_mean.defined() == running_var.defined())
      << kOp << ": give both running_mean and running_var or neither";
  check_channel_vector("running_mean", running_mean, x);
  check_channel_vector("running_var", running_var, x);
  check_channel_vector("weight", weight, x);
  check_channel_vector("bias", bias, x);
  LSF_CHECK(options.momentum >= 0.0 && options.momentum <= 1.0)
      << kOp << ": momentum must lie in [0, 1], got " << options.momentum;
  LSF_CHECK(options.eps >= 0.0) << kOp << ": eps must be non-negative, got " << options.eps;

  const int64_t N = x.size(0), C = x.size(1), S = C > 0 && N > 0 ? x.numel() / (N * C) : 0, M = N * S;
  const bool batch_stats = options.training || !running_mean.defined();
  LSF_CHECK(!batch_stats || M > 1) << kOp << ": expected more than 1 value per channel when using batch statistics, got input of shape "
                                   << x.shape();

  const Tensor xc = contiguous_detached(x), wc = contiguous_detached(weight), bc = contiguous_detached(bias);
  Tensor y = empty(x.shape(), x.options());
  Tensor mean = empty({C}, x.options()), invstd = empty({C}, x.options());
  Tensor var = batch_stats ? empty({C}, x.options()) : Tensor();
  if (x.numel() > 0) {
    batch_norm_forward_kernel(x.device(), y.view({N, C, S}), mean, invstd, var, xc.view({N, C, S}), wc, bc,
                              batch_stats ? Tensor() : contiguous_detached(running_mean),
                              batch_stats ? Tensor() : contiguous_detached(running_var), batch_stats, options.eps);
  }
  if (options.training && running_mean.defined() && M > 0) {
    NoGradGuard no_grad;  // buffers, updated in place (PyTorch's unbiased running variance)
    const double m = options.momentum;
    running_mean.copy_(add(mul(running_mean, 1.0 - m), mul(mean, m)));
    running_var.copy_(add(mul(running_var, 1.0 - m), mul(var, m * double(M) / double(M - 1))));
  }

  if (autograd::any_requires_grad({&x, &weight, &bias})) {
    autograd::SavedTensor sx(xc), smean(mean), sinvstd(invstd), sw(wc);
    const Shape x_shape = x.shape();
    autograd::record(kOp, {x, weight, bias}, {y},
                     [sx, smean, sinvstd, sw, x_shape, N, C, S, batch_stats](const TensorList& g,
                                                                             const autograd::NeedsGrad& needs) -> TensorList {
                       const Tensor& xv = sx.get();
                       Tensor dx = needs[0] ? empty(x_shape, xv.options()) : Tensor();
                       Tensor dweight = needs[1] ? empty({C}, xv.options()) : Tensor();
                       Tensor dbias = needs[2] ? empty({C}, xv.options()) : Tensor();
                       const Tensor dy = g[0].is_contiguous() ? g[0] : g[0].contiguous();
                       if (dy.numel() > 0) {
                         batch_norm_backward_kernel(xv.device(), dx.defined() ? dx.view({N, C, S}) : Tensor(), dweight,
                                                    dbias, dy.view({N, C, S}), xv.view({N, C, S}), smean.get(),
                                                    sinvstd.get(), sw.get(), batch_stats);
                       } else {
                         if (dweight.defined()) dweight.zero_();
                         if (dbias.defined()) dbias.zero_();
                       }
                       return {dx, dweight, dbias};
                     });
  }
  return y;
}

}  // namespace lsf
