// Unary elementwise ops and activations, each with its backward: neg, pow (scalar exponent),
// exp, log, sqrt, rsqrt, abs, tanh, sigmoid, relu, gelu (exact erf form and tanh
// approximation; bias_gelu with a bias folded in), clamp. Floating-point inputs (abs, neg and
// clamp also take integers).
//
// Values, special values (inf, NaN, signed zeros) and gradients follow PyTorch, including its
// conventions at the non-differentiable points: relu' = 0 and abs' = 0 at 0, clamp passes the
// gradient where min ≤ x ≤ max (bounds included), pow(x, 0)' = 0. The result is a new
// contiguous tensor of x's dtype; x may be any strided view.
//
// Backward is one fused kernel per op: dx = dy · op'(·) read from the saved input x or the
// saved output y, whichever the formula needs (unary_backward_uses_output), so nothing else
// is kept alive.
#pragma once

#include <optional>

#include "lsformer/engine/tensor.h"

namespace lsf {

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
// gelu(x + bias), bias [N] added along x's last dimension [..., N]: a Linear layer's bias folded
// into its activation, so the pre-activation x + bias is never written out. The forward equals
// gelu(add(x, bias)) bit for bit, and so does the x gradient; the backward gives the bias
// gradient in the same pass over the rows (summed in blocks of rows in a fixed order: the
// same bits on any thread count). Where a device has no fused kernel (CUDA, for now) it runs
// that composition. x and bias: floating point, one dtype and device.
Tensor bias_gelu(const Tensor& x, const Tensor& bias, GeluApproximation approximate = GeluApproximation::None);

// Bounds are optional (std::nullopt: unbounded), but not both absent. The gradient passes where
// min ≤ x ≤ max. As in PyTorch, min > max gives max everywhere, and NaN stays NaN. Integer
// tensors take integral bounds (no promotion to float here).
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);

}  // namespace lsf
