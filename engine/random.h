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

namespace lsf {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Ten rounds of Philox4x32 on one 128-bit counter. Header-only so CUDA code can mirror it.
inline PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    uint64_t p0 = uint64_t(kM0) * c[0];
    uint64_t p1 = uint64_t(kM1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1],
         uint32_t(p0)};
  }
  return c;
}

// The four random words of block `block` for a generator seeded with `seed`.
inline PhiloxCounter philox_block(uint64_t seed, uint64_t block) {
  return philox4x32_10({uint32_t(block), uint32_t(block >> 32), 0u, 0u},
                       {uint32_t(seed), uint32_t(seed >> 32)});
}

inline float uniform_from_bits(uint32_t bits) { return float(bits >> 8) * (1.0f / 16777216.0f); }

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
