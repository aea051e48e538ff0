// Internal (not installed): the kernel table entries of dropout (ops/dropout.h) and the mask arithmetic
// every backend shares.
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/dropout.h"

namespace lsf {

// y = x · mask / (1 − p) and mask (u8, 1 = kept), all contiguous and of x's shape (overwrites
// y and mask). 0 < p < 1.
LSF_DECLARE_KERNEL(dropout_forward_kernel, void(const Tensor& y, const Tensor& mask, const Tensor& x, double p, GeneratorState state));

// dx = dy · mask · scale (overwrites dx); dx, dy, mask contiguous and of one shape.
LSF_DECLARE_KERNEL(dropout_backward_kernel, void(const Tensor& dx, const Tensor& dy, const Tensor& mask, double scale));

// Philox blocks one dropout call on x consumes.
inline uint64_t dropout_blocks(const Tensor& x) { return (uint64_t(x.numel()) + 3) / 4; }
// The integer threshold on the 24-bit uniform: keep element i ⇔ (word >> 8) ≥ this.
uint32_t dropout_keep_threshold(double p);

}  // namespace lsf
