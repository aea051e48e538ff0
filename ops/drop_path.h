// Stochastic depth (DropPath, as timm's drop_path): each sample of the batch keeps its whole
// residual branch with probability 1 − p, scaled by 1/(1 − p), or drops it (zeros).
//
//   y[b, ...] = x[b, ...] · keep_b / (1 − p),   keep_b = (u_b ≥ p),  u_b uniform in [0, 1)
//
// The B uniforms come from the Philox generator as an f32 `rand({B})` (element b ← word b % 4
// of block offset + b / 4, see ops/kernels/random.h), whatever x's dtype, so the mask depends
// only on the generator state: the same seed replays the same samples on every backend and in
// f32 and f64. Composed from primitive ops (rand, ge, mul), so the backward is dy·keep/(1 − p).
// Identity (x itself, no random numbers drawn) when !training or p == 0; p == 1 drops every
// sample (zeros and a zero gradient, as dropout) without drawing.
#pragma once

#include "lsformer/engine/random.h"
#include "lsformer/engine/tensor.h"

namespace lsf {

// x [B, *] (at least 1-D, floating point); p ∈ [0, 1]. `generator` null: the default generator.
Tensor drop_path(const Tensor& x, double p, bool training = true, Generator* generator = nullptr);

}  // namespace lsf
