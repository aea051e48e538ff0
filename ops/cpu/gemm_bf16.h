// The CPU's bf16 product kernel: a GEMM of f32 matrices whose values are all exact bf16 numbers
// (what autocast's roundings produce), on the AVX512_BF16 dot-product instruction (Cooper Lake,
// Sapphire Rapids and later Xeons, AMD Zen 4 and later): twice the multiply-adds per cycle of
// an f32 FMA.
//
// Same results as an f32 GEMM of those values up to the order of the sums: a product of two
// bf16 numbers is exact in f32 (8 + 8 significant bits), and every sum is an f32 addition
// rounded to nearest. Only the order differs from OpenBLAS's (each c element still sums its
// terms in one fixed order, k ascending in pairs, whatever the thread count), and sums or
// products below f32's smallest normal number (2^-126) become 0, as the instruction flushes
// them (OpenBLAS keeps them as subnormals: a difference of at most k·2^-126 per element).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "lsformer/engine/tensor.h"

#include "lsformer/ops/cpu/skinny_gemm.h"

namespace lsf::cpu {

// Whether this CPU can run the kernel: AVX512_BF16 at the x86-64-v4 level, and the level not
// capped below it by LSF_CPU_VECTOR_LEVEL (ops/cpu/vector_kernels.h).
bool gemm_bf16_supported();
// Whether it runs it: supported, and the products not turned off (lsf::set_cpu_bf16_products,
// LSF_CPU_BF16_PRODUCTS=0).
bool gemm_bf16_available();

// Whether a product of these tensors may run on the kernel: it is available, and every operand is
// f32 with a storage marked exact in bf16 (engine/storage.h: autocast's roundings; the kernel
// still checks the values).
bool bf16_operands(std::initializer_list<const Tensor*> operands);
bool bf16_operands(const TensorList& operands);

// Whether a product of this size gains from the kernel: packing both operands costs about
// m·k + k·n word moves and a parallel region, so small products, and the narrow ones that the
// f32 skinny kernel reads in place (ops/cpu/skinny_gemm.h: the LRA layer's 64-wide products at
// ~200 GFLOP/s on two Zen 4 cores, 1.1-2.2x faster than packed here), stay in f32. Measured
// with bench/bench_gemm_bf16 (bench/RESULTS.md, "bf16 products on the CPU").
inline bool gemm_bf16_pays(int64_t m, int64_t n, int64_t k) {
  if (m < 64 || n < 64 || k < 32 || m * n * k < (int64_t(1) << 22)) return false;
  return !skinny_gemm_applies(m, n, k) || (n >= 256 && k >= 256);
}

// c [m × n] = alpha · op(a) · op(b) + beta · c, row-major c (row stride ldc); op(a) [m × k] is
// a(i, p) = ta ? a[p·lda + i] : a[i·lda + p], op(b) [k × n] is b(p, j) = tb ? b[j·ldb + p] :
// b[p·ldb + j]. beta = 0 never reads c. Runs on the OpenMP threads unless called inside a
// parallel region. Returns false, with c untouched, when the kernel is not available or some
// value of op(a) or op(b) is not an exact bf16 number (or is a bf16 subnormal, which the
// instruction would read as 0): the caller then runs its f32 GEMM.
bool gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// gemm_bf16 where gemm_bf16_pays(m, n, k), for a product whose operands came from bf16: true when
// it ran; false, with c untouched, when the caller runs its f32 GEMM.
inline bool gemm_bf16_if_it_pays(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  return gemm_bf16_pays(m, n, k) && gemm_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace lsf::cpu
