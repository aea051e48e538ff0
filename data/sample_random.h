// SampleRandom: the random numbers of one image's augmentation (or one batch's mixing), a pure
// function of (seed, purpose, index, epoch) — so a sample looks the same whichever worker
// thread draws it, in whatever order, and a resumed run redraws exactly what it would have.
//
// It is the engine's Philox4x32-10 keyed by the seed, with the 128-bit counter
//   {block, purpose, index, epoch}   (32 bits each)
// and `block` counting up from 0 as words are consumed (four words per block). `purpose` keeps
// the per-sample augmentation and erasing streams (kAugmentStream, kEraseStream; index = the
// dataset index) apart from the per-batch mixing stream (kMixStream; index = the batch index).
// Every tag is ≥ 2^30, so these counters never meet those of the epoch permutations
// (data/random_stream.h) or of the engine's generator, whose second word is the high half of a
// block count — 0 for any realistic count — under the same seed.
//
// Distributions, all from 53-bit uniforms u ∈ [0, 1):
//   uniform(a, b) = a + (b − a)·u;  randint(lo, hi) inclusive, unbiased (multiply-and-reject)
//   normal  Box–Muller cosine branch, sqrt(−2 ln(1 − u1))·cos(2π u2), one value per two uniforms
//   gamma   Marsaglia–Tsang (α ≥ 1), with Γ(α) = Γ(α + 1)·U^(1/α) for α < 1
//   beta    X / (X + Y), X ~ Γ(a), Y ~ Γ(b)
#pragma once

#include <cmath>
#include <cstdint>

#include "lsformer/engine/error.h"
#include "lsformer/engine/random.h"

namespace lsf::data {

constexpr uint32_t kAugmentStream = 0x41554731u;  // "AUG1": per-sample augmentation
constexpr uint32_t kEraseStream = 0x45525331u;    // "ERS1": per-sample random erasing
constexpr uint32_t kMixStream = 0x4D495831u;      // "MIX1": per-batch Mixup / CutMix

class SampleRandom {
 public:
  SampleRandom(uint64_t seed, uint32_t purpose, int64_t index, int64_t epoch)
      : seed_(seed), purpose_(purpose), index_(uint32_t(index)), epoch_(uint32_t(epoch)) {
    LSF_CHECK(index >= 0 && index <= int64_t(UINT32_MAX) && epoch >= 0 && epoch <= int64_t(UINT32_MAX))
        << "SampleRandom: index " << index << " and epoch " << epoch << " must lie in [0, 2^32)";
  }

  uint32_t next_u32() {
    if (word_ == 4) {
      words_ = philox4x32_10({block_, purpose_, index_, epoch_}, {uint32_t(seed_), uint32_t(seed_ >> 32)});
      ++block_;
      word_ = 0;
    }
    return words_[size_t(word_++)];
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() {
    const uint64_t hi = next_u32(), lo = next_u32();
    return double(((hi << 32) | lo) >> 11) * 0x1p-53;
  }
  double uniform(double low, double high) { return low + (high - low) * uniform(); }
  bool bernoulli(double p) { return uniform() < p; }

  // Uniform integer in [low, high] (both ends included, as Python's random.randint); high ≥ low.
  int64_t randint(int64_t low, int64_t high) {
    const uint64_t n = uint64_t(high - low) + 1;
    if (n > UINT32_MAX) return low + int64_t(uniform() * double(n));  // not reached for images
    uint64_t m = uint64_t(next_u32()) * n;
    uint32_t frac = uint32_t(m);
    if (frac < n) {
      const uint32_t threshold = uint32_t((uint64_t(1) << 32) % n);
      while (frac < threshold) {
        m = uint64_t(next_u32()) * n;
        frac = uint32_t(m);
      }
    }
    return low + int64_t(m >> 32);
  }

  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: the log stays finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  double normal(double mean, double stddev) { return mean + stddev * normal(); }

  double gamma(double alpha) {
    LSF_CHECK(alpha > 0) << "SampleRandom::gamma: alpha must be > 0, got " << alpha;
    if (alpha < 1.0) {
      const double u = 1.0 - uniform();
      return gamma(alpha + 1.0) * std::pow(u, 1.0 / alpha);
    }
    const double d = alpha - 1.0 / 3.0;
    const double c = 1.0 / std::sqrt(9.0 * d);
    while (true) {
      const double x = normal();
      double v = 1.0 + c * x;
      if (v <= 0.0) continue;
      v = v * v * v;
      const double u = uniform();
      if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
      if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
    }
  }

  double beta(double a, double b) {
    const double x = gamma(a), y = gamma(b);
    return x / (x + y);
  }

 private:
  uint64_t seed_;
  uint32_t purpose_, index_, epoch_;
  uint32_t block_ = 0;
  PhiloxCounter words_{};
  int word_ = 4;  // next unused word of words_; 4 = draw a fresh block
};

}  // namespace lsf::data
