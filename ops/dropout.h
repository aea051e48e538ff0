// Dropout with a Philox mask: element i is kept when uniform_f32_at(state, i) ≥ p (see
// ops/kernels/random.h) and scaled by 1/(1 − p). The mask depends only on the generator's
// (seed, offset) at the call, so the CUDA backend reproduces it exactly.
//
// Counter use: a call on n elements reserves (n + 3) / 4 Philox blocks from the generator
// (four f32 uniforms per block, for every dtype of x), so successive calls draw fresh masks
// and re-seeding the generator replays them bit for bit. The test is exact: with
// u = k · 2⁻²⁴ (k the top 24 bits of the word), u ≥ p ⇔ k ≥ ⌈p · 2²⁴⌉, an integer comparison
// every backend can make identically. Kept elements are x · scale with scale = 1/(1 − p)
// rounded to x's dtype; dropped ones are x · 0 (as PyTorch's input * mask, so NaN stays NaN).
#pragma once

#include "lsformer/engine/random.h"
#include "lsformer/engine/tensor.h"

namespace lsf {

// Identity when !training or p == 0 (returns x itself); x · 0 when p == 1 (zeros, and zero
// gradient, drawing no random numbers). p outside [0, 1] is an error. `generator` null: the
// default generator.
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* generator = nullptr);

}  // namespace lsf
