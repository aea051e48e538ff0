// Float transcendental functions written so that a loop over them vectorises.
//
// std::exp, std::erf, std::tanh and std::log on float are library calls: without -ffast-math
// a compiler cannot turn them into vector code, and one call costs more than a whole vector
// of the polynomials below. Everything here is straight-line float arithmetic, integer bit
// manipulation and selects (no branches, no calls, no FMA contraction), so
//   for (i) y[i] = vmath::exp(x[i]);
// becomes SIMD code on any x86-64 target, and every target gives bitwise the same results.
//
// Accuracy (measured against double over the whole float range, see tests/test_unary.cpp):
//   exp, log ≤ 2 ulp · tanh, sigmoid ≤ 4 ulp · normal_cdf ≤ 8 ulp relative, also in the far
//   lower tail (Φ(-13) ≈ 6e-39), because it is built on erfc rather than 1 + erf.
// Special values follow IEEE/libm: exp(-inf) = 0, exp(inf) = inf, log(0) = -inf,
// log(x<0) = NaN, NaN in gives NaN out; subnormal inputs and results are handled.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

#define LSF_VMATH_INLINE [[gnu::always_inline]] inline

namespace lsf::cpu::vmath {

LSF_VMATH_INLINE float from_bits(int32_t b) { return std::bit_cast<float>(b); }
LSF_VMATH_INLINE int32_t to_bits(float f) { return std::bit_cast<int32_t>(f); }
LSF_VMATH_INLINE float abs(float x) { return from_bits(to_bits(x) & 0x7fffffff); }
LSF_VMATH_INLINE bool is_nan(float x) { return x != x; }

// e^(hi + lo) where lo is a small correction to hi (|lo| ≤ ulp(hi)): lets callers pass an
// argument carried to more than float precision (see normal_cdf).
//
// Cody–Waite reduction: hi + lo = k·ln2 + r with |r| ≤ ln2/2, where ln2 = C1 + C2 and C1 has
// only 9 significant bits, so k·C1 and hi − k·C1 are exact. e^r is Cephes' expf polynomial
// (relative error < 1 ulp on that interval); 2^k is applied in two halves so that results in
// the subnormal range and k = 128 (overflow to inf) come out right.
LSF_VMATH_INLINE float exp_dd(float hi, float lo) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kC1 = 0.693359375f, kC2 = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  // Below −104 the result rounds to 0, above 89 to inf; clamping also keeps k in int range.
  // NaN compares false, so it is clamped to −104 here and restored at the end.
  float h = hi > -104.0f ? hi : -104.0f;
  h = h < 89.0f ? h : 89.0f;
  float shifted = h * kLog2e + kRound;  // k = round(h·log2 e) sits in the low mantissa bits
  float kf = shifted - kRound;
  float r = (h - kf * kC1) - kf * kC2 + lo;
  float r2 = r * r;
  float p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
              4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  int32_t k = to_bits(shifted) - to_bits(kRound);  // an integer subtraction, not a conversion
  int32_t k1 = k >> 1, k2 = k - k1;  // each in [-75, 65]: 2^k1 and 2^k2 are normal floats
  float y = p * from_bits((k1 + 127) << 23) * from_bits((k2 + 127) << 23);
  return is_nan(hi) ? hi : y;
}

LSF_VMATH_INLINE float exp(float x) { return exp_dd(x, 0.0f); }

// Natural log (Cephes logf): x = m·2^e with m in [√½, √2), log(x) = log1p(m − 1) + e·ln2
// with a degree-9 polynomial for log1p; subnormals are scaled by 2^23 first.
LSF_VMATH_INLINE float log(float x) {
  constexpr float kMinNormal = std::numeric_limits<float>::min();
  bool subnormal = x < kMinNormal;
  float xs = subnormal ? x * 8388608.0f : x;  // 2^23
  int32_t bits = to_bits(xs);
  int32_t e = ((bits >> 23) & 0xff) - 126 - (subnormal ? 23 : 0);
  float m = from_bits((bits & 0x807fffff) | 0x3f000000);  // mantissa in [0.5, 1)
  bool small = m < 0.707106781186547524f;
  float ef = float(small ? e - 1 : e);
  m = (small ? m + m : m) - 1.0f;
  float z = m * m;
  float p = ((((((((7.0376836292e-2f * m - 1.1514610310e-1f) * m + 1.1676998740e-1f) * m -
                  1.2420140846e-1f) * m + 1.4249322787e-1f) * m - 1.6668057665e-1f) * m +
               2.0000714765e-1f) * m - 2.4999993993e-1f) * m + 3.3333331174e-1f) * m * z;
  p = p + -2.12194440e-4f * ef;
  p = p - 0.5f * z;
  float y = (m + p) + 0.693359375f * ef;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  y = x == 0.0f ? -kInf : y;
  y = x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : y;
  y = x == kInf ? kInf : y;
  return is_nan(x) ? x : y;
}

// tanh: odd polynomial below |x| = 0.625 (Cephes tanhf), else 1 − 2/(e^{2|x|} + 1), which
// saturates to ±1 without overflow trouble (e^{2|x|} = inf gives exactly 1).
LSF_VMATH_INLINE float tanh(float x) {
  float ax = abs(x);
  float z = x * x;
  float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                  1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
  float big = 1.0f - 2.0f / (exp(2.0f * ax) + 1.0f);
  big = x < 0.0f ? -big : big;
  return ax < 0.625f ? small : big;
}

// σ(x) = 1/(1 + e^{-x}) computed from e = e^{-|x|} ≤ 1 so that it never overflows and keeps
// full relative accuracy in both tails: σ(x) = 1/(1+e) for x ≥ 0, e/(1+e) for x < 0.
LSF_VMATH_INLINE float sigmoid(float x) {
  float e = exp(-abs(x));
  float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s;
}

// σ(v) and σ(v)·(1 − σ(v)) together; the product is e/(1+e)² with e = e^{-|v|}, which avoids
// the cancellation of 1 − σ(v) when σ(v) is close to 1.
struct SigmoidPair {
  float s;
  float ds;
};
LSF_VMATH_INLINE SigmoidPair sigmoid_and_derivative(float v) {
  float e = exp(-abs(v));
  float q = 1.0f / (1.0f + e);
  return {v >= 0.0f ? q : e * q, e * q * q};
}

// e^(hi + lo) for hi in [−128, 0] (and |lo| ≤ ulp(hi)): exp_dd without its range clamps and
// NaN handling, for callers that guarantee the range (normal_cdf). Below −104 the result
// underflows to 0 through the two-step scaling.
LSF_VMATH_INLINE float exp_dd_nonpositive(float hi, float lo) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kC1 = 0.693359375f, kC2 = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;
  float shifted = hi * kLog2e + kRound;
  float kf = shifted - kRound;
  float r = (hi - kf * kC1) - kf * kC2 + lo;
  float r2 = r * r;
  float p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
              4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  int32_t k = to_bits(shifted) - to_bits(kRound);  // in [−185, 0]
  int32_t k1 = k >> 1, k2 = k - k1;   // each ≥ −93
  return p * from_bits((k1 + 127) << 23) * from_bits((k2 + 127) << 23);
}

// The standard normal CDF Φ(x) and e^{-x²/2} (so that φ(x) = e^{-x²/2}/√(2π)) in one pass.
//
// With a = |x|: erfc(a/√2) = e^{-a²/2}·R(t), t = 1/(1 + p·a), p = 0.4, where R is a degree-8
// polynomial fitted (minimax in relative error, Lawson's method) on a ∈ [0, 14.5]: past that
// Φ(−a) underflows in float. The fit's own error is 9e-8; evaluated in float, R is within
// 5.8·2^-24 relative (tests/fixtures/fit_erfc.py reproduces the coefficients and this bound). Then
// Φ(x) = ½·erfc(a/√2) for x < 0 and 1 − ½·erfc(a/√2) for x ≥ 0, so the lower tail keeps its
// relative accuracy where 1 + erf(x/√2) would cancel to nothing.
//
// e^{-a²/2} is the ill-conditioned part (a² rounded to float loses a²·2^-24 relative). So a is
// split into ah (12 significant bits: ah² is exact) and al = a − ah, and the exponent is passed
// to the exponential as hi = −ah²/2 exactly plus lo = −al·(a + ah)/2.
//
// For x < 0, Φ(x) = half_r·gauss. Callers that multiply Φ by something (x·Φ(x) in GELU) can
// apply the factor to half_r first: gauss may be subnormal, and one rounding there is better
// than rounding Φ to a subnormal and then scaling the error up.
struct NormalCdf {
  float cdf;     // Φ(x)
  float gauss;   // e^{-x²/2}
  float half_r;  // ½R(t): erfc(|x|/√2) = 2·half_r·gauss
};
LSF_VMATH_INLINE NormalCdf normal_cdf(float x) {
  float a = abs(x);
  float t = 1.0f / (1.0f + 0.4f * a);
  float half_r = -3.922210634e-02f;  // ½R by Horner (the fitted coefficients, halved)
  half_r = half_r * t + 1.989637315e-01f;
  half_r = half_r * t - 3.707115948e-01f;
  half_r = half_r * t + 2.480275184e-01f;
  half_r = half_r * t - 1.064796094e-02f;
  half_r = half_r * t + 1.577942967e-01f;
  half_r = half_r * t + 1.559182554e-01f;
  half_r = half_r * t + 1.598891765e-01f;
  half_r = half_r * t - 1.128202803e-05f;
  // e^{-128} is 0 in float; the clamp also keeps ah, al finite for a = inf and NaN (which
  // still comes out as NaN through t).
  float ac = a < 16.0f ? a : 16.0f;
  float ah = from_bits(to_bits(ac) & int32_t(0xfffff000));
  float al = ac - ah;
  float gauss = exp_dd_nonpositive(-0.5f * (ah * ah), -0.5f * (al * (ac + ah)));
  float half_erfc = half_r * gauss;
  return {x < 0.0f ? half_erfc : 1.0f - half_erfc, gauss, half_r};
}

}  // namespace lsf::cpu::vmath
