// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11).
//
// Every random value is a pure function of (seed, counter), so a dropout mask depends only on
// the generator's (seed, offset) when the op ran, and a CUDA kernel can reproduce the CPU's
// mask exactly. The generator hands out counter ranges: an op that needs N 128-bit blocks
// calls reserve(N) and uses blocks [offset, offset + N).
//
// Element i of a random f32 tensor uses word i % 4 of block offset + i / 4:
//   uniform(u32) = (u32 >> 8) · 2⁻²⁴ ∈ [0, 1).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

#include "lsformer/engine/philox.h"

namespace lsf {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Ten rounds of Philox4x32 on one 128-bit counter. The round function itself lives in
// engine/philox.h, shared with the CUDA kernels.
inline PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  const philox::Words w = philox::philox4x32_10(philox::Words{{c[0], c[1], c[2], c[3]}}, k[0], k[1]);
  return {w.w[0], w.w[1], w.w[2], w.w[3]};
}

// The four random words of block `block` for a generator seeded with `seed`.
inline PhiloxCounter philox_block(uint64_t seed, uint64_t block) {
  const philox::Words w = philox::block_words(seed, block);
  return {w.w[0], w.w[1], w.w[2], w.w[3]};
}

inline float uniform_from_bits(uint32_t bits) { return philox::uniform_from_bits(bits); }

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // next unused 128-bit block
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) { state_.seed = seed; }
  void manual_seed(uint64_t seed);
  // Reserves `blocks` counter blocks; returns the state to draw them with.
  GeneratorState reserve(uint64_t blocks);
  GeneratorState state() const;
  void set_state(const GeneratorState& s);

 private:
  mutable std::mutex mutex_;
  GeneratorState state_;
};

// The process-wide generator used by rand, randn, dropout and the initialisers.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace lsf
