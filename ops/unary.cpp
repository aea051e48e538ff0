// Unary elementwise ops: argument checks, the kernel call, and the backward node.
//
// Every op is y = unary_forward_kernel(op, x) and, when x requires grad, a node whose backward is one
// call of unary_backward_kernel (dx = dy · op'(x or y)). The node saves only the tensor the
// derivative is written in (unary_backward_uses_output): x for pow, log, abs, relu, gelu and
// clamp; y for exp, sqrt, rsqrt, tanh and sigmoid; nothing for neg.
#include "lsformer/ops/unary.h"
#include "lsformer/ops/kernels/unary.h"

#include <cmath>
#include <limits>

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"

namespace lsf {

LSF_DEFINE_KERNEL(unary_forward_kernel, void(UnaryOp op, const Tensor& y, const Tensor& x, double a, double b));
LSF_DEFINE_KERNEL(unary_backward_kernel, void(UnaryOp op, const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y, double a, double b));
LSF_DEFINE_KERNEL(bias_gelu_forward_kernel, void(UnaryOp op, const Tensor& y, const Tensor& x, const Tensor& bias));
LSF_DEFINE_KERNEL(bias_gelu_backward_kernel, void(UnaryOp op, const Tensor& dx, const Tensor& dbias, const Tensor& dy, const Tensor& x, const Tensor& bias));

using autograd::NeedsGrad;
using autograd::SavedTensor;

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Pow: return "pow";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Log: return "log";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Rsqrt: return "rsqrt";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Tanh: return "tanh";
    case UnaryOp::Sigmoid: return "sigmoid";
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Gelu: return "gelu";
    case UnaryOp::GeluTanh: return "gelu(approximate=tanh)";
    case UnaryOp::Clamp: return "clamp";
  }
  return "?";
}

namespace {

bool takes_integers(UnaryOp op) { return op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Clamp; }

// y = op(x), recorded for autograd. `a`, `b`: the op's scalars (see unary_forward_kernel).
Tensor unary(UnaryOp op, const Tensor& x, double a = 0.0, double b = 0.0) {
  const char* name = unary_op_name(op);
  check_defined(name, {&x});
  if (!takes_integers(op)) {
    LSF_CHECK(is_floating(x.dtype())) << name << ": expected a floating-point tensor, got " << x.dtype()
                                      << " of shape " << x.shape() << " (convert with to(kF32) first)";
  }
  Tensor y = empty(x.shape(), x.options());
  unary_forward_kernel(x.device(), op, y, x, a, b);
  if (!autograd::any_requires_grad({&x})) return y;
  const bool uses_output = unary_backward_uses_output(op);
  SavedTensor saved_x = (op != UnaryOp::Neg && !uses_output) ? SavedTensor(x) : SavedTensor();
  SavedTensor saved_y = uses_output ? SavedTensor(y) : SavedTensor();
  autograd::record(name, {x}, {y}, [op, a, b, saved_x, saved_y](const TensorList& g, const NeedsGrad&) -> TensorList {
    const Tensor& dy = g[0];  // [same as x]
    Tensor dx = empty(dy.shape(), dy.options());
    if (op == UnaryOp::Neg) {
      unary_forward_kernel(dy.device(), UnaryOp::Neg, dx, dy, 0.0, 0.0);
    } else {
      Tensor xv = saved_x.defined() ? saved_x.get() : Tensor();
      Tensor yv = saved_y.defined() ? saved_y.get() : Tensor();
      unary_backward_kernel(dy.device(), op, dx, dy, xv, yv, a, b);
    }
    return {dx};
  });
  return y;
}

}  // namespace

Tensor neg(const Tensor& x) { return unary(UnaryOp::Neg, x); }
Tensor pow(const Tensor& x, double exponent) {
  LSF_CHECK(!std::isnan(exponent)) << "pow: the exponent is NaN";
  return unary(UnaryOp::Pow, x, exponent);
}
Tensor exp(const Tensor& x) { return unary(UnaryOp::Exp, x); }
Tensor log(const Tensor& x) { return unary(UnaryOp::Log, x); }
Tensor sqrt(const Tensor& x) { return unary(UnaryOp::Sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary(UnaryOp::Rsqrt, x); }
Tensor abs(const Tensor& x) { return unary(UnaryOp::Abs, x); }
Tensor tanh(const Tensor& x) { return unary(UnaryOp::Tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary(UnaryOp::Sigmoid, x); }
Tensor relu(const Tensor& x) { return unary(UnaryOp::Relu, x); }

Tensor gelu(const Tensor& x, GeluApproximation approximate) {
  return unary(approximate == GeluApproximation::Tanh ? UnaryOp::GeluTanh : UnaryOp::Gelu, x);
}

Tensor bias_gelu(const Tensor& x, const Tensor& bias, GeluApproximation approximate) {
  const char* name = "bias_gelu";
  check_defined(name, {&x, &bias});
  check_same_device(name, {&x, &bias});
  LSF_CHECK(is_floating(x.dtype())) << name << ": expected a floating-point x, got " << x.dtype() << " of shape "
                                    << x.shape();
  LSF_CHECK(bias.dtype() == x.dtype()) << name << ": bias dtype " << bias.dtype() << " differs from x's "
                                       << x.dtype();
  LSF_CHECK(x.dim() >= 1 && bias.dim() == 1 && bias.size(0) == x.size(-1))
      << name << ": bias must be [N] with N = x's last dimension; got x of shape " << x.shape()
      << " and bias of shape " << bias.shape();
  if (!bias_gelu_forward_kernel.implemented(x.device().type)) return gelu(add(x, bias), approximate);
  const UnaryOp op = approximate == GeluApproximation::Tanh ? UnaryOp::GeluTanh : UnaryOp::Gelu;
  Tensor xc = x.contiguous(), bc = bias.contiguous();
  Tensor y = empty(x.shape(), x.options());
  if (y.numel() > 0) bias_gelu_forward_kernel(x.device(), op, y, xc, bc);
  if (autograd::any_requires_grad({&x, &bias})) {
    // Saves the inputs, not x + bias: the backward adds the bias again row by row.
    SavedTensor saved_x(xc), saved_bias(bc);  // SavedTensor detaches
    autograd::record(name, {x, bias}, {y},
                     [op, saved_x, saved_bias](const TensorList& g, const NeedsGrad&) -> TensorList {
                       const Tensor& xv = saved_x.get();
                       const Tensor& bv = saved_bias.get();
                       const Tensor dy = g[0].contiguous();  // [same as x]
                       Tensor dx = empty(xv.shape(), xv.options()), dbias = empty(bv.shape(), bv.options());
                       if (dx.numel() > 0) bias_gelu_backward_kernel(dy.device(), op, dx, dbias, dy, xv, bv);
                       else dbias.zero_();
                       return {dx, dbias};
                     });
  }
  return y;
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  check_defined("clamp", {&x});
  LSF_CHECK(min || max) << "clamp: at least one of min and max must be given (tensor of shape "
                        << x.shape() << ")";
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double lo = min.value_or(-kInf), hi = max.value_or(kInf);
  LSF_CHECK(!std::isnan(lo) && !std::isnan(hi))
      << "clamp: bounds must not be NaN (min " << lo << ", max " << hi << ")";
  if (is_integral(x.dtype())) {
    // No promotion: a fractional bound has no value in the tensor's dtype.
    for (double v : {lo, hi})
      LSF_CHECK(std::isinf(v) || std::nearbyint(v) == v)
          << "clamp: bound " << v << " is not representable in a " << x.dtype() << " tensor of shape "
          << x.shape() << "; convert the tensor with to(kF32) first";
  }
  return unary(UnaryOp::Clamp, x, lo, hi);
}

}  // namespace lsf
