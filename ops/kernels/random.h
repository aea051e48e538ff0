// Random-fill kernels and how many Philox blocks each consumes, so that every backend draws
// the same numbers for the same generator state.
//
// f32 (and bf16/f16) uniform: element i ← word i % 4 of block offset + i / 4, 24 bits.
// f64 uniform: element i ← words 2(i % 2), 2(i % 2) + 1 of block offset + i / 2, 53 bits.
// normal (any dtype): Box–Muller on the pair of words (2p, 2p + 1), p = (i % 4) / 2, of block
// offset + i / 4; even i take the cosine branch, odd i the sine branch.
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/engine/random.h"
#include "lsformer/engine/tensor.h"

namespace lsf {

LSF_DECLARE_KERNEL(uniform_kernel, void(const Tensor& out /*contiguous*/, GeneratorState state, double low, double high));
LSF_DECLARE_KERNEL(normal_kernel, void(const Tensor& out /*contiguous*/, GeneratorState state, double mean, double std));

inline uint64_t uniform_blocks(const Tensor& t) {
  uint64_t n = uint64_t(t.numel());
  return t.dtype() == kF64 ? (n + 1) / 2 : (n + 3) / 4;
}
inline uint64_t normal_blocks(const Tensor& t) { return (uint64_t(t.numel()) + 3) / 4; }

// The value of element i, shared by every backend's kernel.
inline double uniform_f64_at(const GeneratorState& s, uint64_t i) {
  PhiloxCounter w = philox_block(s.seed, s.offset + i / 2);
  uint32_t hi = w[2 * (i % 2)], lo = w[2 * (i % 2) + 1];
  return double((uint64_t(hi >> 5) << 26) | (lo >> 6)) * (1.0 / 9007199254740992.0);
}
inline float uniform_f32_at(const GeneratorState& s, uint64_t i) {
  return uniform_from_bits(philox_block(s.seed, s.offset + i / 4)[i % 4]);
}
inline double normal_at(const GeneratorState& s, uint64_t i) {
  PhiloxCounter w = philox_block(s.seed, s.offset + i / 4);
  uint64_t p = (i % 4) / 2;
  double u1 = (double(w[2 * p] >> 8) + 1.0) * (1.0 / 16777216.0);  // (0, 1]: log is finite
  double u2 = double(w[2 * p + 1] >> 8) * (1.0 / 16777216.0);
  double r = std::sqrt(-2.0 * std::log(u1));
  double angle = 6.283185307179586 * u2;
  return i % 2 == 0 ? r * std::cos(angle) : r * std::sin(angle);
}

}  // namespace lsf
