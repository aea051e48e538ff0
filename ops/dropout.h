// Dropout with a Philox mask: element i is kept when uniform_f32_at(state, i) ≥ p (see
// ops/random_kernels.h) and scaled by 1/(1 − p). The mask depends only on the generator's
// (seed, offset) at the call, so the CUDA backend reproduces it exactly.
#pragma once

#include "engine/dispatch.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace lsf {

// y = x · mask / (1 − p) and mask (u8, 1 = kept), all contiguous and of x's shape.
LSF_DECLARE_KERNEL(dropout_kernel, void(const Tensor& y, const Tensor& mask, const Tensor& x, double p, GeneratorState state));

// Identity when !training or p == 0; all zeros when p == 1.
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* generator = nullptr);

}  // namespace lsf
