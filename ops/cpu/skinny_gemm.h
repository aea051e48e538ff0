// Skinny GEMM: c = alpha · op(a) · op(b) + beta · c for a product whose contraction K and width
// N are small (≤ kSkinnyMaxK, ≤ kSkinnyMaxN) however many rows M it has: the Linear layers of
// a narrow model (x [B·n, d] · Wᵀ with d = 64, and dx = dy · W) and the per-head products of
// attention ([n, e] · [e, r]).
//
// Why not OpenBLAS: its general path packs both operands and clears c in a separate pass
// before accumulating; with K = 64 those memory passes cost more than the arithmetic (a
// 16384 × 64 × 64 product ran at a third of the core's FMA rate on 2 threads). Here op(b),
// at most 256 × 256, is packed once into an L2-resident panel (or read in place when it already
// is one), each tile of rows of a is read once from memory, and c is written once.
//
// Determinism: every c element is the sum over k = 0, 1, …, K−1 in that order (one FMA chain
// per lane; for K > kSkinnyMaxK one chain per chunk, each chunk's sum added to c in order),
// whatever the row split or thread count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lsf::cpu {

constexpr int64_t kSkinnyMaxK = 256;
constexpr int64_t kSkinnyMaxN = 256;
// A longer contraction is taken when the output is small (at most this many rows, n ≤
// kSkinnyMaxN): the weight gradient dW = dyᵀ·x summed over every token (K = B·n) and the
// compression P·K (K = n). K then runs in chunks of kSkinnyMaxK, each chunk's op(b) rows an
// L2-resident panel and c (small) summed into between chunks. OpenBLAS packs all of both
// operands for such products and reached 60-100 GFLOP/s on them where this reaches about twice
// that (bench/RESULTS.md).
constexpr int64_t kSkinnyMaxRowsLongK = 256;
// Below this many rows OpenBLAS's own small-matrix kernels are faster (measured for
// 8 × 16 × 32 products: 1.5×); from 16 rows on the kernel here is level with them or ahead.
constexpr int64_t kSkinnyMinRows = 16;

// Whether the GEMM dispatch sends this product to skinny_gemm: small n, small k (any m) or a
// small output (m ≤ kSkinnyMaxRowsLongK, any k), at least kSkinnyMinRows rows, and a vector
// variant selected (x86-64-v3 or v4; the baseline variant, SSE2 without FMA, runs at a quarter
// of v3's rate and loses to OpenBLAS).
bool skinny_gemm_applies(int64_t m, int64_t n, int64_t k);

// c[i, j] = alpha · Σ_k a(i, k) · b(k, j) + beta · c[i, j] for i < m, j < n, where
// a(i, k) = a[ta ? k·lda + i : i·lda + k] and b(k, j) = b[tb ? j·ldb + k : k·ldb + j], c[i·ldc + j];
// beta = 0 writes c without reading it (BLAS semantics: NaN in c does not propagate).
// bias (optional, n values) is added to every row of the result after the product and the beta
// term: c[i, j] = (alpha·Σ + beta·c[i, j]) + bias[j]. With alpha = 1 and beta = 0 these are the
// bits of the product followed by a separate add (a Linear layer's bias, without a second pass
// over c).
// Requires 1 ≤ n ≤ kSkinnyMaxN, k ≥ 1, and k ≤ kSkinnyMaxK or m ≤ kSkinnyMaxRowsLongK (else
// lsf::Error). Called outside a
// parallel region it splits the rows over the OpenMP threads; inside one it runs on the calling
// thread.
void skinny_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias = nullptr);
void skinny_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double beta, double* c, int64_t ldc, const double* bias = nullptr);

// One product of a group (skinny_gemm_group): skinny_gemm's arguments but m, which the group's
// products share. Each must take k ≤ kSkinnyMaxK (one K chunk) and 1 ≤ n ≤ kSkinnyMaxN.
template <typename T>
struct SkinnyProduct {
  bool ta = false, tb = false;
  int64_t n = 0, k = 0;
  T alpha = T(1);
  const T* a = nullptr;
  int64_t lda = 0;
  const T* b = nullptr;
  int64_t ldb = 0;
  T beta = T(0);
  T* c = nullptr;
  int64_t ldc = 0;
  const T* bias = nullptr;
};

// The products, each of m rows, with the bits skinny_gemm gives them one after the other in list
// order, run row block by row block instead: a block's rows of every product before the next
// block's. Products of one a (a Linear layer's x through several weights) then read each block
// of it from cache rather than memory, and products summed into one c (beta = 1 after the
// first: x's gradient through those layers) add onto a block still in cache. A product must not
// read what another product of the group writes. Splits the row blocks over the OpenMP threads
// as skinny_gemm does (on the calling thread inside a parallel region).
void skinny_gemm_group(int64_t m, const std::vector<SkinnyProduct<float>>& products);
void skinny_gemm_group(int64_t m, const std::vector<SkinnyProduct<double>>& products);

// The kernel's instruction-set variants this CPU can run, best first, of "x86-64-v4" (6 × 4
// vectors of 64 bytes), "x86-64-v3" (4 × 3 of 32 bytes) and "baseline" (4 × 3 of 16 bytes).
// skinny_gemm runs the first unless told otherwise; tests run every one.
std::vector<std::string> skinny_gemm_variants();
// Makes skinny_gemm (on every thread) run the named variant; throws lsf::Error for a name
// that is not in skinny_gemm_variants(). Not meant to be called while products run.
void select_skinny_gemm_variant(const std::string& name);

}  // namespace lsf::cpu
