// Unary elementwise ops and activations, each with its backward: neg, pow (scalar exponent),
// exp, log, sqrt, rsqrt, abs, tanh, sigmoid, relu, gelu (exact erf form and tanh
// approximation), clamp. Floating-point inputs (abs, neg and clamp also take integers).
#pragma once

#include <optional>

#include "engine/dispatch.h"
#include "engine/tensor.h"

namespace lsf {

enum class UnaryOp : uint8_t { Neg, Pow, Exp, Log, Sqrt, Rsqrt, Abs, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Clamp };

// y = op(x) elementwise (x and y same shape; y contiguous). `a` and `b` are the op's scalar
// parameters: the exponent for Pow, the bounds for Clamp (±inf when absent); unused otherwise.
LSF_DECLARE_KERNEL(unary_kernel, void(UnaryOp op, const Tensor& y, const Tensor& x, double a, double b));
// dx = dy · op'(x) elementwise, given x and y = op(x) (either may be what the op saved; the
// kernel reads the one its formula needs). All same shape; dx contiguous.
LSF_DECLARE_KERNEL(unary_backward_kernel, void(UnaryOp op, const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y, double a, double b));

Tensor neg(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);  // gradient sign(x), 0 at 0 (as PyTorch)
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);  // gradient 0 at 0

enum class GeluApproximation { None, Tanh };
// x·Φ(x) exactly (erf), or the tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
Tensor gelu(const Tensor& x, GeluApproximation approximate = GeluApproximation::None);

// Bounds are optional (std::nullopt: unbounded). The gradient passes where min ≤ x ≤ max.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);

}  // namespace lsf
