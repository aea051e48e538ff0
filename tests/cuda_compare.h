// Helpers of the [cuda] kernel tests (test_cuda_elementwise, test_cuda_reduce, test_cuda_norm):
// random inputs made on the CPU, the same values moved to the GPU, and comparisons of a GPU
// result with the CPU kernel's result (the oracle) under a tolerance the caller derives.
//
// bf16/f16 are storage formats on the CPU, so their reference is the CPU computing in f32 on
// the very same (already rounded) values; the GPU computes in float and rounds its result once.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>

#include "helpers.h"

namespace lsf::test {

// Unit roundoff of each dtype's significand: 2^-24 (f32), 2^-53 (f64), 2^-9 (bf16), 2^-12 (f16).
inline double unit_roundoff(DType t) {
  switch (t) {
    case DType::F64: return 0x1p-53;
    case DType::BF16: return 0x1p-9;
    case DType::F16: return 0x1p-12;
    default: return 0x1p-24;
  }
}

// The dtype the CPU computes a reference in for inputs of dtype t.
inline DType cpu_compute_dtype(DType t) { return t == kBF16 || t == kF16 ? kF32 : t; }

// Standard normal values in dtype t (drawn in f64, rounded once), scaled.
inline Tensor random_tensor(const Shape& shape, DType t, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return mul(randn(shape, TensorOptions(kF64), &g), scale).to(t);
}

// t's values on the GPU as a new leaf. Detached first: when t is itself a leaf that requires
// grad (it is the CPU reference's input whenever the dtypes agree), t.to(kCUDA) would be a node
// of t's graph, whose .grad stays empty while the gradient flows on to t.
inline Tensor gpu(const Tensor& t) { return t.detach().to(kCUDA); }

// The CPU reference input: t's values in the dtype the CPU computes in, as a new leaf (for f32
// and f64 it shares t's storage; requires_grad_ on it leaves t untouched).
inline Tensor cpu_ref(const Tensor& t) { return t.detach().to(cpu_compute_dtype(t.dtype())); }

inline double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to(kCPU).to(kF64).to_vector<double>())
    if (std::isfinite(v)) m = std::max(m, std::fabs(v));
  return m;
}

// |gpu − ref| ≤ atol + rtol·|ref| elementwise, gpu brought back to the CPU.
inline void check_gpu(const Tensor& gpu_result, const Tensor& reference, double atol, double rtol) {
  REQUIRE(gpu_result.device().is_cuda());
  REQUIRE(gpu_result.shape() == reference.shape());
  check_close(gpu_result.to(kCPU).to(kF64), reference.to(kF64), atol, rtol);
}

// The same with atol = rel·max|ref|: for results formed by sums with cancellation, whose
// absolute error scales with the largest terms rather than with each element.
inline void check_gpu_scaled(const Tensor& gpu_result, const Tensor& reference, double rel) {
  check_gpu(gpu_result, reference, rel * std::max(max_abs(reference), 1e-30), rel);
}

// Exact equality (integer results, comparisons, indices).
inline void check_gpu_equal(const Tensor& gpu_result, const Tensor& reference) {
  REQUIRE(gpu_result.device().is_cuda());
  REQUIRE(gpu_result.shape() == reference.shape());
  REQUIRE(gpu_result.dtype() == reference.dtype());
  CHECK(gpu_result.to(kCPU).to(kF64).to_vector<double>() == reference.to(kF64).to_vector<double>());
}

}  // namespace lsf::test
