// Internal (not installed): the kernel table entries of the unary elementwise ops (ops/unary.h): the op
// selector, the bound conversion and the output-or-input rule every backend shares.
#pragma once

#include "lsformer/engine/dispatch.h"
#include <limits>
#include <type_traits>
#include "lsformer/ops/unary.h"

namespace lsf {

enum class UnaryOp : uint8_t { Neg, Pow, Exp, Log, Sqrt, Rsqrt, Abs, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Clamp };

// y = op(x) elementwise (x and y same shape; y contiguous). `a` and `b` are the op's scalar
// parameters: the exponent for Pow, the bounds for Clamp (±inf when absent); unused otherwise.
LSF_DECLARE_KERNEL(unary_forward_kernel, void(UnaryOp op, const Tensor& y, const Tensor& x, double a, double b));

// dx = dy · op'(x) elementwise, given x and y = op(x) (either may be what the op saved; the
// kernel reads the one its formula needs). All same shape; dx contiguous.
LSF_DECLARE_KERNEL(unary_backward_kernel, void(UnaryOp op, const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y, double a, double b));

// y = gelu(x + bias) for op Gelu or GeluTanh: x and y [R, N] contiguous, bias [N] contiguous.
LSF_DECLARE_KERNEL(bias_gelu_forward_kernel, void(UnaryOp op, const Tensor& y, const Tensor& x, const Tensor& bias));
// dx = dy · gelu'(x + bias) and dbias = Σ_rows dx: dx, dy, x [R, N] and dbias, bias [N], all
// contiguous. dbias sums blocks of kBiasGeluRowBlock rows, then the blocks, in order.
LSF_DECLARE_KERNEL(bias_gelu_backward_kernel, void(UnaryOp op, const Tensor& dx, const Tensor& dbias, const Tensor& dy, const Tensor& x, const Tensor& bias));
constexpr int64_t kBiasGeluRowBlock = 32;

// A Clamp bound (a or b above; ±inf when absent) in a kernel's compute type T: for floats,
// values beyond T's range become ±inf; integer bounds (integral, checked by clamp()) saturate
// at T's range. Every backend converts the bounds this way.
template <typename T>
T clamp_bound_as(double v) {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_floating_point_v<T>) {
    if (v > double(L::max())) return L::infinity();
    if (v < double(L::lowest())) return -L::infinity();
    return T(v);
  } else {
    if (v <= double(L::lowest())) return L::lowest();
    if (v >= double(L::max())) return L::max();
    return T(v);
  }
}

// The op's name as error messages and autograd nodes show it ("exp", "clamp", ...).
const char* unary_op_name(UnaryOp op);

// True when op's derivative is written in terms of its output y (exp, sqrt, rsqrt, tanh,
// sigmoid: y' = y, 1/(2y), −y³/2, 1 − y², y(1 − y)); false when it needs the input x (neg
// needs neither). The op saves that one tensor, the backward kernel reads it.
constexpr bool unary_backward_uses_output(UnaryOp op) {
  return op == UnaryOp::Exp || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt || op == UnaryOp::Tanh ||
         op == UnaryOp::Sigmoid;
}

}  // namespace lsf
