// PhiloxStream: a sequential stream of random numbers for the data pipeline (ListOps generation,
// epoch permutations, the Pathfinder split), built on the engine's counter-based Philox4x32-10.
//
// Stream (seed, stream_id) draws block b as philox4x32_10({b_lo, b_hi, id_lo, id_hi},
// {seed_lo, seed_hi}), four 32-bit words per block, so every value is a pure function of
// (seed, stream_id, position). Distinct uses pick distinct stream ids (e.g. the epoch number
// for batch permutations), so they never share random words even with the same seed.
#pragma once

#include <cstdint>

#include "lsformer/engine/random.h"

namespace lsf::data {

class PhiloxStream {
 public:
  PhiloxStream(uint64_t seed, uint64_t stream_id) : seed_(seed), stream_(stream_id) {}

  uint32_t next_u32() {
    if (word_ == 4) {
      words_ = philox4x32_10({uint32_t(block_), uint32_t(block_ >> 32), uint32_t(stream_),
                              uint32_t(stream_ >> 32)},
                             {uint32_t(seed_), uint32_t(seed_ >> 32)});
      ++block_;
      word_ = 0;
    }
    return words_[word_++];
  }

  uint64_t next_u64() {
    uint64_t hi = next_u32();
    return (hi << 32) | next_u32();
  }

  // Uniform double in [0, 1) with 53 random bits, the resolution of Python's random.random().
  double uniform() { return double(next_u64() >> 11) * 0x1p-53; }

  // Uniform integer in [0, n), n ≥ 1, without modulo bias (Lemire's multiply-and-reject:
  // the low word of x·n is below 2^32 mod n for exactly the excess values, which are redrawn).
  uint32_t below(uint32_t n) {
    uint64_t m = uint64_t(next_u32()) * n;
    uint32_t low = uint32_t(m);
    if (low < n) {
      const uint32_t threshold = uint32_t(-n) % n;  // 2^32 mod n
      while (low < threshold) {
        m = uint64_t(next_u32()) * n;
        low = uint32_t(m);
      }
    }
    return uint32_t(m >> 32);
  }

 private:
  uint64_t seed_;
  uint64_t stream_;
  uint64_t block_ = 0;
  PhiloxCounter words_{};
  int word_ = 4;  // next unused word of words_; 4 = draw a fresh block
};

}  // namespace lsf::data
