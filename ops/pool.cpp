// avg_pool2d, max_pool2d, adaptive_avg_pool2d: argument checks, the kernel calls and backward
// nodes (average pooling saves nothing but sizes; max pooling saves the argmax indices).
#include "lsformer/ops/pool.h"
#include "lsformer/ops/kernels/pool.h"

#include <ostream>

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/reduce.h"

namespace lsf {

LSF_DEFINE_KERNEL(avg_pool2d_forward_kernel, void(const Tensor& y, const Tensor& x, const Pool2dOptions& options));
LSF_DEFINE_KERNEL(avg_pool2d_backward_kernel, void(const Tensor& dx, const Tensor& dy, const Pool2dOptions& options));
LSF_DEFINE_KERNEL(max_pool2d_forward_kernel,
                  void(const Tensor& y, const Tensor& indices, const Tensor& x, const Pool2dOptions& options));
LSF_DEFINE_KERNEL(max_pool2d_backward_kernel, void(const Tensor& dx, const Tensor& dy, const Tensor& indices));
LSF_DEFINE_KERNEL(adaptive_avg_pool2d_forward_kernel, void(const Tensor& y, const Tensor& x));
LSF_DEFINE_KERNEL(adaptive_avg_pool2d_backward_kernel, void(const Tensor& dx, const Tensor& dy));

namespace {

using autograd::NeedsGrad;

// x as [N, C, H, W] (an unbatched input gains N = 1), checked.
Tensor as_batched(const char* op, const Tensor& x) {
  check_defined(op, {&x});
  LSF_CHECK(x.dtype() == kF32 || x.dtype() == kF64)
      << op << ": expected an f32 or f64 input, got " << x.dtype() << " of shape " << x.shape();
  LSF_CHECK(x.dim() == 3 || x.dim() == 4) << op << ": expected an input [N, C, H, W] or [C, H, W], got shape "
                                          << x.shape();
  LSF_CHECK(x.size(-1) > 0 && x.size(-2) > 0) << op << ": the input of shape " << x.shape() << " has an empty plane";
  return x.dim() == 3 ? x.unsqueeze(0) : x;
}

// The planes [N·C, H, W] of a batched x, contiguous and detached.
Tensor planes_of(const Tensor& x4) {
  NoGradGuard no_grad;
  return x4.contiguous().detach().view({x4.size(0) * x4.size(1), x4.size(2), x4.size(3)});
}

Pool2dOptions resolved(const char* op, const Pool2dOptions& o, const Tensor& x4, int64_t& Ho, int64_t& Wo) {
  Pool2dOptions r = o;
  if (r.stride.h == 0 && r.stride.w == 0) r.stride = r.kernel_size;
  LSF_CHECK(r.kernel_size.h >= 1 && r.kernel_size.w >= 1)
      << op << ": kernel_size must be positive, got " << r.kernel_size << " (input shape " << x4.shape() << ")";
  LSF_CHECK(r.stride.h >= 1 && r.stride.w >= 1)
      << op << ": stride must be positive (or 0 for the kernel size), got " << o.stride;
  Ho = pool_output_size(op, x4.size(2), r.kernel_size.h, r.stride.h, r.padding.h, r.ceil_mode);
  Wo = pool_output_size(op, x4.size(3), r.kernel_size.w, r.stride.w, r.padding.w, r.ceil_mode);
  return r;
}

// The result [N, C, Ho, Wo] back in the caller's rank.
Tensor shaped(const Tensor& y_planes, const Tensor& x, int64_t Ho, int64_t Wo) {
  if (x.dim() == 3) return y_planes.view({x.size(0), Ho, Wo});
  return y_planes.view({x.size(0), x.size(1), Ho, Wo});
}

}  // namespace

int64_t pool_output_size(const char* op, int64_t in, int64_t kernel, int64_t stride, int64_t padding, bool ceil_mode) {
  LSF_CHECK(padding >= 0 && 2 * padding <= kernel)
      << op << ": padding " << padding << " must be non-negative and at most half the kernel size " << kernel;
  const int64_t span = in + 2 * padding - kernel;
  LSF_CHECK(span >= 0) << op << ": the kernel size " << kernel << " is larger than the padded input " << in + 2 * padding;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // A window that would start in the right padding is dropped (PyTorch's ceil_mode rule).
  if (ceil_mode && (out - 1) * stride >= in + padding) --out;
  return out;
}

Tensor avg_pool2d(const Tensor& input, const Pool2dOptions& options) {
  const char* op = "avg_pool2d";
  const Tensor x4 = as_batched(op, input);
  int64_t Ho = 0, Wo = 0;
  const Pool2dOptions o = resolved(op, options, x4, Ho, Wo);
  const Shape plane_shape{x4.size(0) * x4.size(1), x4.size(2), x4.size(3)};
  Tensor y = empty({plane_shape[0], Ho, Wo}, input.options());
  if (y.numel() > 0) avg_pool2d_forward_kernel(input.device(), y, planes_of(x4), o);
  Tensor out = shaped(y, input, Ho, Wo);
  if (autograd::any_requires_grad({&input})) {
    const Shape in_shape = input.shape();
    autograd::record(op, {input}, {out},
                     [o, plane_shape, in_shape, Ho, Wo](const TensorList& g, const NeedsGrad&) -> TensorList {
                       Tensor dx = empty(plane_shape, g[0].options());
                       Tensor dy = g[0].contiguous().view({plane_shape[0], Ho, Wo});
                       if (dx.numel() > 0) avg_pool2d_backward_kernel(dx.device(), dx, dy, o);
                       return {dx.view(in_shape)};
                     });
  }
  return out;
}

Tensor max_pool2d(const Tensor& input, const Pool2dOptions& options) {
  const char* op = "max_pool2d";
  const Tensor x4 = as_batched(op, input);
  int64_t Ho = 0, Wo = 0;
  const Pool2dOptions o = resolved(op, options, x4, Ho, Wo);
  const Shape plane_shape{x4.size(0) * x4.size(1), x4.size(2), x4.size(3)};
  Tensor y = empty({plane_shape[0], Ho, Wo}, input.options());
  Tensor indices = empty({plane_shape[0], Ho, Wo}, input.options().dtype(kI64));
  if (y.numel() > 0) max_pool2d_forward_kernel(input.device(), y, indices, planes_of(x4), o);
  Tensor out = shaped(y, input, Ho, Wo);
  if (autograd::any_requires_grad({&input})) {
    autograd::SavedTensor saved(indices);
    const Shape in_shape = input.shape();
    autograd::record(op, {input}, {out},
                     [saved, plane_shape, in_shape, Ho, Wo](const TensorList& g, const NeedsGrad&) -> TensorList {
                       Tensor dx = empty(plane_shape, g[0].options());
                       Tensor dy = g[0].contiguous().view({plane_shape[0], Ho, Wo});
                       if (dx.numel() > 0) max_pool2d_backward_kernel(dx.device(), dx, dy, saved.get());
                       return {dx.view(in_shape)};
                     });
  }
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& input, Int2 output_size) {
  const char* op = "adaptive_avg_pool2d";
  const Tensor x4 = as_batched(op, input);
  const int64_t Ho = output_size.h, Wo = output_size.w;
  LSF_CHECK(Ho >= 1 && Wo >= 1) << op << ": output_size must be positive, got " << output_size << " (input shape "
                                << input.shape() << ")";
  const Shape plane_shape{x4.size(0) * x4.size(1), x4.size(2), x4.size(3)};
  Tensor y = empty({plane_shape[0], Ho, Wo}, input.options());
  if (y.numel() > 0) adaptive_avg_pool2d_forward_kernel(input.device(), y, planes_of(x4));
  Tensor out = shaped(y, input, Ho, Wo);
  if (autograd::any_requires_grad({&input})) {
    const Shape in_shape = input.shape();
    autograd::record(op, {input}, {out},
                     [plane_shape, in_shape, Ho, Wo](const TensorList& g, const NeedsGrad&) -> TensorList {
                       Tensor dx = empty(plane_shape, g[0].options());
                       Tensor dy = g[0].contiguous().view({plane_shape[0], Ho, Wo});
                       if (dx.numel() > 0) adaptive_avg_pool2d_backward_kernel(dx.device(), dx, dy);
                       return {dx.view(in_shape)};
                     });
  }
  return out;
}

Tensor global_avg_pool2d(const Tensor& x) {
  LSF_CHECK(x.defined() && x.dim() == 4) << "global_avg_pool2d: expected an input [N, C, H, W], got shape "
                                         << (x.defined() ? x.shape() : Shape{});
  return mean(x, {2, 3});
}

}  // namespace lsf
