// The bf16 product kernel (ops/cpu/gemm_bf16.h).
//
// Plan: pack op(a) and op(b) whole into bf16 pairs, then multiply block by block.
//  * VDPBF16PS adds to each f32 lane the two products of a pair of bf16 numbers: lane j gets
//    a(i, 2p)·b(2p, j) + a(i, 2p+1)·b(2p+1, j). So both operands are packed as 32-bit words
//    holding the pair (k = 2p in the low half, 2p + 1 in the high half; an odd k's last pair
//    padded with 0). A bf16 number is the high half of its f32 bits, so packing moves halves
//    and converts nothing; it also checks that every low half is 0 (the value is exact in bf16)
//    and that no value is a bf16 subnormal, and the GEMM is refused before c is written if one
//    is not (the caller runs f32 instead).
//  * Packed a: strips of kRows rows, within a strip pair after pair, the strip's kRows words of
//    a pair side by side (what the micro-kernel broadcasts one by one). Packed b: panels of
//    kCols columns, pair after pair, the panel's kCols words side by side (two vector loads).
//    Rows past m and columns past n are 0.
//  * The micro-kernel keeps a kRows × kCols block of c in 24 vector registers over a run of
//    kBlockPairs pairs: per pair two loads of b, kRows broadcasts of a, 2·kRows dot products.
//    The loops around it are Goto's: a block of pairs (b's panel slice, 16 KiB, stays in L1),
//    each panel of a unit's columns, each strip of a unit's kUnitRows rows (their slices, 96
//    KiB, stay in L2). A unit (rows × columns of c) is one thread's; each c element is summed
//    by one unit over the blocks of pairs in order, so the result does not depend on how many
//    threads share the units.
#include "lsformer/ops/cpu/gemm_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "lsformer/engine/autocast.h"
#include "lsformer/ops/cpu/simd.h"
#include "lsformer/ops/cpu/vector_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define LSF_GEMM_BF16 1
#define LSF_BF16_TARGET [[gnu::target("arch=x86-64-v4,avx512bf16")]]
#endif

namespace lsf::cpu {

#if LSF_GEMM_BF16
namespace {

constexpr int64_t kRows = 12;                 // rows of the micro-kernel's c block
constexpr int64_t kCols = 32;                 // its columns: two vectors of 16 f32
constexpr int64_t kBlockPairs = 128;          // pairs (256 k) per block: b's panel slice 16 KiB
constexpr int64_t kUnitRows = 16 * kRows;     // rows of a unit
constexpr int64_t kParallelMultiplyAdds = int64_t(1) << 21;  // below this, one thread

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The pair word of two f32 values given as bits: x0's bf16 in the low half, x1's in the high.
// bad collects the bits that make the pair unusable: a nonzero low half (not exact in bf16) or
// a subnormal (zero exponent, nonzero value).
[[gnu::always_inline]] inline uint32_t pair_word(uint32_t x0, uint32_t x1, uint32_t& bad) {
  bad |= (x0 | x1) & 0xFFFFu;
  bad |= uint32_t((x0 & 0x7F800000u) == 0 && (x0 & 0x7FFFFFFFu) != 0);
  bad |= uint32_t((x1 & 0x7F800000u) == 0 && (x1 & 0x7FFFFFFFu) != 0);
  return (x0 >> 16) | (x1 & 0xFFFF0000u);
}

// Lines whose k runs across rows of memory (a with ta, b without tb): pair p of line x is
// (src[2p·ld + x], src[(2p+1)·ld + x]). Writes pairs [p0, p1) of lines [0, lines) into dst, the
// lines grouped by `group` (kRows or kCols): dst[(x / group)·pairs·group + p·group + x % group];
// a group's lines past `lines` are 0. tmp: lines words of scratch.
LSF_BF16_TARGET uint32_t pack_across(const float* src, int64_t ld, int64_t k, int64_t lines, int64_t p0, int64_t p1,
                                     int64_t group, int64_t pairs, uint32_t* dst, uint32_t* tmp) {
  uint32_t bad = 0;
  const int64_t groups = ceil_div(lines, group);
  for (int64_t p = p0; p < p1; ++p) {
    const uint32_t* r0 = reinterpret_cast<const uint32_t*>(src + 2 * p * ld);
    if (2 * p + 1 < k) {
      const uint32_t* r1 = reinterpret_cast<const uint32_t*>(src + (2 * p + 1) * ld);
      for (int64_t x = 0; x < lines; ++x) tmp[x] = pair_word(r0[x], r1[x], bad);
    } else {
      for (int64_t x = 0; x < lines; ++x) tmp[x] = pair_word(r0[x], 0u, bad);
    }
    for (int64_t g = 0; g < groups; ++g) {
      uint32_t* out = dst + g * pairs * group + p * group;
      const int64_t have = std::min(group, lines - g * group);
      std::memcpy(out, tmp + g * group, size_t(have) * sizeof(uint32_t));
      std::fill(out + have, out + group, 0u);
    }
  }
  return bad;
}

// Lines whose k runs along a row of memory (a without ta, b with tb): pair p of line x is
// (src[x·ld + 2p], src[x·ld + 2p + 1]). Writes every pair of the lines of groups [g0, g1) into
// dst as pack_across does. tmp: group · pairs words of scratch.
LSF_BF16_TARGET uint32_t pack_along(const float* src, int64_t ld, int64_t k, int64_t lines, int64_t g0, int64_t g1,
                                    int64_t group, int64_t pairs, uint32_t* dst, uint32_t* tmp) {
  uint32_t bad = 0;
  const int64_t whole = k / 2;  // pairs without padding
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t have = std::min(group, lines - g * group);
    for (int64_t r = 0; r < have; ++r) {
      const uint32_t* row = reinterpret_cast<const uint32_t*>(src + (g * group + r) * ld);
      uint32_t* t = tmp + r * pairs;
      for (int64_t p = 0; p < whole; ++p) t[p] = pair_word(row[2 * p], row[2 * p + 1], bad);
      if (whole < pairs) t[whole] = pair_word(row[2 * whole], 0u, bad);
    }
    uint32_t* out = dst + g * pairs * group;
    for (int64_t p = 0; p < pairs; ++p) {
      for (int64_t r = 0; r < have; ++r) out[p * group + r] = tmp[r * pairs + p];
      for (int64_t r = have; r < group; ++r) out[p * group + r] = 0u;
    }
  }
  return bad;
}

// c block [rows × cols] (rows ≤ kRows, cols ≤ kCols; row stride ldc) = (first ? beta·c : c) +
// alpha · Σ over `count` pairs of the strip's and panel's words (a: kRows words per pair, b:
// kCols words per pair). beta = 0 on the first block never reads c.
LSF_BF16_TARGET void micro_kernel(int64_t count, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc,
                                  int64_t rows, int64_t cols, float alpha, float beta, bool first) {
  __m512 acc[kRows][2];
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < count; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * kCols);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * kCols + 16);
    const uint32_t* ap = a + p * kRows;
#pragma GCC unroll 12
    for (int r = 0; r < kRows; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(int(ap[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, b1);
    }
  }
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? __mmask16(0xFFFF) : cols <= 16 ? __mmask16(0) : __mmask16((1u << (cols - 16)) - 1);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(first ? beta : 1.0f);
  const bool read_c = !first || beta != 0.0f;
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) {
    if (r >= rows) break;
    float* cr = c + r * ldc;
    __m512 v0 = alpha == 1.0f ? acc[r][0] : _mm512_mul_ps(va, acc[r][0]);
    __m512 v1 = alpha == 1.0f ? acc[r][1] : _mm512_mul_ps(va, acc[r][1]);
    if (read_c) {
      v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr), v0);
      v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16), v1);
    }
    _mm512_mask_storeu_ps(cr, m0, v0);
    _mm512_mask_storeu_ps(cr + 16, m1, v1);
  }
}

bool cpu_has_bf16_dot() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && vector_level() == VectorLevel::Avx512;
  }();
  return has;
}

}  // namespace

bool gemm_bf16_available() { return cpu_has_bf16_dot() && cpu_bf16_products(); }

bool gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (!gemm_bf16_available() || m <= 0 || n <= 0 || k <= 0) return false;
  const int64_t pairs = ceil_div(k, 2), strips = ceil_div(m, kRows), panels = ceil_div(n, kCols);
  // Reused across calls (a GEMM inside a parallel region uses its own thread's).
  thread_local std::vector<uint32_t> packed_a, packed_b;
  if (packed_a.size() < size_t(strips * kRows * pairs)) packed_a.resize(size_t(strips * kRows * pairs));
  if (packed_b.size() < size_t(panels * kCols * pairs)) packed_b.resize(size_t(panels * kCols * pairs));
  uint32_t* const pa = packed_a.data();
  uint32_t* const pb = packed_b.data();

  const bool nested = omp_in_parallel();
  const int threads = nested ? 1 : omp_get_max_threads();
  const bool parallel = threads > 1 && m * n * k >= kParallelMultiplyAdds;
  // Units: kUnitRows rows × unit_cols columns of c, enough of them to keep every thread busy.
  const int64_t row_units = ceil_div(m, kUnitRows);
  int64_t col_units = 1;
  if (parallel && row_units < 2 * threads) col_units = std::min(panels, ceil_div(2 * threads, row_units));
  const int64_t unit_panels = ceil_div(panels, col_units);
  col_units = ceil_div(panels, unit_panels);
  const int64_t units = row_units * col_units;
  uint32_t bad = 0;

#pragma omp parallel if (parallel)
  {
    // Packing: a's strips, then b's panels, split over the threads.
    std::vector<uint32_t> tmp;
    if (ta) {  // a's k runs down its rows of memory
      tmp.resize(size_t(m));
#pragma omp for schedule(static) reduction(| : bad)
      for (int64_t p = 0; p < pairs; ++p) bad |= pack_across(a, lda, k, m, p, p + 1, kRows, pairs, pa, tmp.data());
    } else {
      tmp.resize(size_t(kRows * pairs));
#pragma omp for schedule(static) reduction(| : bad)
      for (int64_t g = 0; g < strips; ++g) bad |= pack_along(a, lda, k, m, g, g + 1, kRows, pairs, pa, tmp.data());
    }
    if (!tb) {
      tmp.resize(std::max(tmp.size(), size_t(n)));
#pragma omp for schedule(static) reduction(| : bad)
      for (int64_t p = 0; p < pairs; ++p) bad |= pack_across(b, ldb, k, n, p, p + 1, kCols, pairs, pb, tmp.data());
    } else {
      tmp.resize(std::max(tmp.size(), size_t(kCols * pairs)));
#pragma omp for schedule(static) reduction(| : bad)
      for (int64_t g = 0; g < panels; ++g) bad |= pack_along(b, ldb, k, n, g, g + 1, kCols, pairs, pb, tmp.data());
    }
    // (The reductions end with a barrier: every thread sees the final bad.)
    if (bad == 0) {
#pragma omp for schedule(dynamic)
      for (int64_t u = 0; u < units; ++u) {
        const int64_t s0 = (u / col_units) * (kUnitRows / kRows), s1 = std::min(strips, s0 + kUnitRows / kRows);
        const int64_t q0 = (u % col_units) * unit_panels, q1 = std::min(panels, q0 + unit_panels);
        for (int64_t p0 = 0; p0 < pairs; p0 += kBlockPairs) {
          const int64_t count = std::min(kBlockPairs, pairs - p0);
          for (int64_t q = q0; q < q1; ++q) {
            const uint32_t* bq = pb + q * pairs * kCols + p0 * kCols;
            const int64_t j0 = q * kCols, cols = std::min(kCols, n - j0);
            for (int64_t s = s0; s < s1; ++s) {
              const int64_t i0 = s * kRows, rows = std::min(kRows, m - i0);
              micro_kernel(count, pa + s * pairs * kRows + p0 * kRows, bq, c + i0 * ldc + j0, ldc, rows, cols, alpha,
                           beta, p0 == 0);
            }
          }
        }
      }
    }
  }
  return bad == 0;
}

#else  // no x86-64 GCC: no bf16 kernel

bool gemm_bf16_available() { return false; }
bool gemm_bf16(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float, float*,
               int64_t) {
  return false;
}

#endif

}  // namespace lsf::cpu
