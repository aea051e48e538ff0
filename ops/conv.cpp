// conv2d: argument checks, the forward kernel, and a backward node that saves x and weight
// (the im2col matrix is recomputed in backward rather than kept: it is kH·kW times larger
// than x) and computes only the gradients asked for, in one backward kernel call.
#include "lsformer/ops/conv.h"
#include "lsformer/ops/kernels/conv.h"

#include <climits>
#include <ostream>

#include "lsformer/engine/autocast.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/flops.h"

namespace lsf {

LSF_DEFINE_KERNEL(conv2d_forward_kernel, void(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options));
LSF_DEFINE_KERNEL(conv2d_backward_kernel, void(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x, const Tensor& weight, const Conv2dOptions& options));

namespace {

using autograd::NeedsGrad;
using autograd::SavedTensor;

}  // namespace

std::ostream& operator<<(std::ostream& os, const Int2& p) { return os << "(" << p.h << ", " << p.w << ")"; }

Shape conv2d_output_shape(const Shape& xs, const Shape& ws, const Conv2dOptions& o) {
  LSF_CHECK(xs.size() == 4) << "conv2d: expected a 4-D input [N, C, H, W], got shape " << xs;
  LSF_CHECK(ws.size() == 4) << "conv2d: expected a 4-D weight [O, C/groups, kH, kW], got shape " << ws;
  LSF_CHECK(o.stride.h >= 1 && o.stride.w >= 1) << "conv2d: stride must be positive, got " << o.stride
                                                << " (input shape " << xs << ", weight shape " << ws << ")";
  LSF_CHECK(o.dilation.h >= 1 && o.dilation.w >= 1)
      << "conv2d: dilation must be positive, got " << o.dilation << " (input shape " << xs << ", weight shape "
      << ws << ")";
  LSF_CHECK(o.padding.h >= 0 && o.padding.w >= 0)
      << "conv2d: padding must be non-negative, got " << o.padding << " (input shape " << xs
      << ", weight shape " << ws << ")";
  LSF_CHECK(o.groups >= 1) << "conv2d: groups must be positive, got " << o.groups;
  const int64_t C = xs[1], O = ws[0];
  LSF_CHECK(ws[0] > 0 && ws[1] > 0 && ws[2] > 0 && ws[3] > 0)
      << "conv2d: weight of shape " << ws << " has an empty dimension";
  LSF_CHECK(O % o.groups == 0) << "conv2d: weight of shape " << ws << " has " << O
                               << " output channels, not divisible by groups=" << o.groups;
  LSF_CHECK(ws[1] * o.groups == C) << "conv2d: input of shape " << xs << " has " << C
                                   << " channels, but weight of shape " << ws << " with groups=" << o.groups
                                   << " expects " << ws[1] * o.groups;
  const int64_t eff_h = o.dilation.h * (ws[2] - 1) + 1, eff_w = o.dilation.w * (ws[3] - 1) + 1;
  const int64_t ph = xs[2] + 2 * o.padding.h, pw = xs[3] + 2 * o.padding.w;
  LSF_CHECK(eff_h <= ph && eff_w <= pw)
      << "conv2d: kernel size " << eff_h << "x" << eff_w << " (dilated) is larger than the padded input " << ph
      << "x" << pw << " (input shape " << xs << ", weight shape " << ws << ", padding " << o.padding
      << ", dilation " << o.dilation << ")";
  const int64_t Ho = (ph - eff_h) / o.stride.h + 1, Wo = (pw - eff_w) / o.stride.w + 1;
  // The CPU kernel hands these sizes to CBLAS as ints.
  LSF_CHECK(ws[1] * ws[2] * ws[3] <= INT_MAX && Ho * Wo <= INT_MAX && O <= INT_MAX)
      << "conv2d: input of shape " << xs << " and weight of shape " << ws << " exceed the GEMM size limit";
  return {xs[0], O, Ho, Wo};
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options) {
  if (const autocast::Region region({&input, &weight, &bias}); region)
    return region.out(conv2d(region.in(input), region.in(weight), region.in(bias), options));
  check_defined("conv2d", {&input, &weight});
  const bool unbatched = input.dim() == 3;
  const Tensor x = unbatched ? input.unsqueeze(0) : input;
  LSF_CHECK(is_floating(x.dtype()) && x.dtype() != kBF16 && x.dtype() != kF16)
      << "conv2d: expected f32 or f64 tensors, got input of dtype " << x.dtype() << " and shape " << input.shape();
  if (bias.defined()) {
    check_same_device("conv2d", {&input, &weight, &bias});
    check_same_dtype("conv2d", {&input, &weight, &bias});
  } else {
    check_same_device("conv2d", {&input, &weight});
    check_same_dtype("conv2d", {&input, &weight});
  }
  LSF_CHECK(x.dim() == 4) << "conv2d: expected a 4-D input [N, C, H, W] or 3-D [C, H, W], got shape "
                          << input.shape();
  const Shape y_shape = conv2d_output_shape(x.shape(), weight.shape(), options);
  LSF_CHECK(!bias.defined() || bias.shape() == Shape{weight.size(0)})
      << "conv2d: bias of shape " << bias.shape() << " does not match weight of shape " << weight.shape()
      << " (expected {" << weight.size(0) << "})";

  const Tensor xc = contiguous_detached(x), wc = contiguous_detached(weight), bc = contiguous_detached(bias);
  Tensor y = empty(y_shape, x.options());
  count_multiply_adds("conv2d", shape_numel(y_shape) * weight.size(1) * weight.size(2) * weight.size(3));
  if (y.numel() > 0) conv2d_forward_kernel(x.device(), y, xc, wc, bc, options);
  if (unbatched) y = y.squeeze(0);

  if (autograd::any_requires_grad({&input, &weight, &bias})) {
    // dx needs only the weight, dweight only x: save what the requested gradients read.
    SavedTensor sx(weight.requires_grad() ? xc : Tensor()), sw(input.requires_grad() ? wc : Tensor());
    const Shape x_shape = x.shape(), w_shape = weight.shape();
    autograd::record("conv2d", {input, weight, bias}, {y},
                     [sx, sw, x_shape, w_shape, y_shape, options, unbatched](const TensorList& g, const NeedsGrad& needs) -> TensorList {
      const Tensor dy = (g[0].is_contiguous() ? g[0] : g[0].contiguous()).view(y_shape);
      const TensorOptions opts = dy.options();
      Tensor dx = needs[0] ? empty(x_shape, opts) : Tensor();
      Tensor dweight = needs[1] ? empty(w_shape, opts) : Tensor();
      Tensor dbias = needs[2] ? empty({w_shape[0]}, opts) : Tensor();
      conv2d_backward_kernel(dy.device(), dx, dweight, dbias, dy, sx.defined() ? sx.get() : Tensor(),
                             sw.defined() ? sw.get() : Tensor(), options);
      if (unbatched && dx.defined()) dx = dx.squeeze(0);
      return {dx, dweight, dbias};
    });
  }
  return y;
}

}  // namespace lsf
