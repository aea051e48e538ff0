// Philox4x32-10 and the rules that turn its words into dropout masks and random values, written
// once for every backend: plain C++ that g++ compiles for the CPU kernels and nvcc compiles as
// __host__ __device__ code for the CUDA kernels, so both draw the same bits from the same
// (seed, counter) and apply the same integer / correctly rounded arithmetic to them.
//
// CUDA-free on purpose (installed header, CPU-only builds): the annotations come from a macro
// that is empty unless nvcc compiles the file.
//
// Bit-exactness across backends: the words are integer arithmetic (exact everywhere); the
// uniforms are an integer scaled by a power of two (exact); the affine maps low + span·u and
// mean + std·z are written with explicitly rounded multiply and add on the device
// (__dmul_rn / __dadd_rn), because nvcc would otherwise contract them into one fused
// multiply-add and round once where the CPU (x86-64 baseline, no -ffp-contract) rounds twice.
// Only the transcendental functions of Box–Muller (log, cos, sin) are not bit-identical across
// libraries: glibc's are within 1 ulp, CUDA's double log within 1 ulp and cos/sin within 2 ulp.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define LSF_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define LSF_HOST_DEVICE inline
#endif

namespace lsf::philox {

// One 128-bit Philox counter or output block: four 32-bit words.
struct Words {
  uint32_t w[4];
};

// Ten rounds of Philox4x32 (Salmon et al., SC'11) on counter c with key (k0, k1).
LSF_HOST_DEVICE Words philox4x32_10(Words c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const uint64_t p0 = uint64_t(kM0) * c.w[0];
    const uint64_t p1 = uint64_t(kM1) * c.w[2];
    const Words next = {{uint32_t(p1 >> 32) ^ c.w[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c.w[3] ^ k1,
                         uint32_t(p0)}};
    c = next;
  }
  return c;
}

// The four random words of block `block` for a generator seeded with `seed`: counter
// (block low, block high, 0, 0), key (seed low, seed high).
LSF_HOST_DEVICE Words block_words(uint64_t seed, uint64_t block) {
  return philox4x32_10(Words{{uint32_t(block), uint32_t(block >> 32), 0u, 0u}}, uint32_t(seed),
                       uint32_t(seed >> 32));
}

// Dropout keeps an element ⇔ the top 24 bits of its word reach the threshold ⌈p·2²⁴⌉
// (⇔ uniform_from_bits(word) ≥ p; see ops/dropout.h).
LSF_HOST_DEVICE bool dropout_keep(uint32_t word, uint32_t threshold) { return (word >> 8) >= threshold; }

// 24-bit uniform in [0, 1): exact (an integer below 2²⁴ times 2⁻²⁴).
LSF_HOST_DEVICE float uniform_from_bits(uint32_t bits) { return float(bits >> 8) * (1.0f / 16777216.0f); }

// 53-bit uniform in [0, 1) from two words: exact.
LSF_HOST_DEVICE double uniform53_from_bits(uint32_t hi, uint32_t lo) {
  return double((uint64_t(hi >> 5) << 26) | (lo >> 6)) * (1.0 / 9007199254740992.0);
}

// a · b and a + b, each rounded to nearest on its own (never fused into one FMA).
LSF_HOST_DEVICE double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
LSF_HOST_DEVICE double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

// low + span·u, two roundings, as the CPU computes it.
LSF_HOST_DEVICE double affine(double low, double span, double u) { return add_rn(low, mul_rn(span, u)); }

// One Box–Muller normal from the word pair (a, b): u1 = (a >> 8 + 1)·2⁻²⁴ ∈ (0, 1] (so the
// log is finite), u2 = (b >> 8)·2⁻²⁴; the cosine branch, or the sine branch when `sine`.
LSF_HOST_DEVICE double normal_from_bits(uint32_t a, uint32_t b, bool sine) {
  const double u1 = (double(a >> 8) + 1.0) * (1.0 / 16777216.0);
  const double u2 = double(b >> 8) * (1.0 / 16777216.0);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double angle = mul_rn(6.283185307179586, u2);
  return mul_rn(r, sine ? std::sin(angle) : std::cos(angle));
}

// Element i of a random tensor drawn from generator state (seed, offset); the layouts of
// ops/kernels/random.h (f32-family uniform: word i % 4 of block offset + i / 4; f64 uniform:
// words 2(i % 2), 2(i % 2) + 1 of block offset + i / 2; normal: pair (i % 4) / 2 of block
// offset + i / 4, cosine for even i, sine for odd i).
LSF_HOST_DEVICE float uniform_f32_element(uint64_t seed, uint64_t offset, uint64_t i) {
  return uniform_from_bits(block_words(seed, offset + i / 4).w[i % 4]);
}
LSF_HOST_DEVICE double uniform_f64_element(uint64_t seed, uint64_t offset, uint64_t i) {
  const Words w = block_words(seed, offset + i / 2);
  return uniform53_from_bits(w.w[2 * (i % 2)], w.w[2 * (i % 2) + 1]);
}
LSF_HOST_DEVICE double normal_element(uint64_t seed, uint64_t offset, uint64_t i) {
  const Words w = block_words(seed, offset + i / 4);
  const uint64_t pair = (i % 4) / 2;
  return normal_from_bits(w.w[2 * pair], w.w[2 * pair + 1], i % 2 == 1);
}

}  // namespace lsf::philox
