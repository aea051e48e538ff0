// Helpers shared by the bidirectional long-short attention tests (test_long_short.cpp: the core
// op; test_long_short_layer.cpp: nn::LongShortAttention): seeded inputs, padding masks and a
// close-enough comparison that names the first mismatches.
#pragma once

#include <cmath>
#include <sstream>
#include <vector>

#include "helpers.h"

namespace lsf::long_short_test {

using Vec = std::vector<double>;

inline Vec vec(const Tensor& t) { return t.to_vector<double>(); }

inline Tensor randn_t(const Shape& shape, uint64_t seed, DType dtype = kF64) {
  Generator g(seed);
  return randn(shape, TensorOptions(kF64), &g).to(dtype);
}

// [B, n] bool with tokens ≥ real_len[b] padded.
inline Tensor pad_mask(int64_t B, int64_t n, const std::vector<int64_t>& real_len) {
  std::vector<uint8_t> m(size_t(B * n));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < n; ++j) m[size_t(b * n + j)] = j < real_len[size_t(b)];
  return tensor(std::vector<double>(m.begin(), m.end()), {B, n}).to(kBool);
}

inline std::vector<bool> bools(const Tensor& mask) {
  std::vector<bool> out;
  if (!mask.defined()) return out;
  for (double v : vec(mask)) out.push_back(v != 0.0);
  return out;
}

inline void expect_close(const Vec& a, const Vec& b, double atol, double rtol) {
  REQUIRE(a.size() == b.size());
  int bad = 0;
  std::ostringstream msg;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) <= atol + rtol * std::fabs(b[i])) && bad++ < 5)
      msg << "  [" << i << "] " << a[i] << " vs " << b[i] << "\n";
  INFO("mismatches " << bad << " of " << a.size() << " (atol " << atol << ", rtol " << rtol << ")\n" << msg.str());
  CHECK(bad == 0);
}

}  // namespace lsf::long_short_test
