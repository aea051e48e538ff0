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
//  * Packed a: strips of kRows rows (the words the micro-kernel broadcasts one by one). When a's
//    k runs along its rows of memory (no ta), a strip is blocks of kBlockPairs pairs, each the
//    strip's rows one after the other, so packing copies runs of a row without transposing;
//    when k runs across them (ta: a weight gradient's dyᵀ), pair after pair with the strip's
//    kRows words side by side, from whole rows of memory. Packed b: panels of kCols columns,
//    pair after pair, the panel's kCols words side by side (two vector loads). Rows past m and
//    columns past n are 0. Packing is vectorised and checks the values with vector masks.
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

#include "lsformer/engine/autocast.h"
#include "lsformer/engine/scratch.h"
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

// The mask of a vector's first n of 16 lanes (none for n ≤ 0, all for n ≥ 16).
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// The check of packed values: a nonzero low half (the value is not exact in bf16) or a
// subnormal (zero exponent, nonzero value: VDPBF16PS would read it as 0) makes the GEMM decline.
struct Check {
  __m512i low_bits;  // OR of every value's low half
  __mmask16 subnormal;
};

LSF_BF16_TARGET inline void check(Check& c, __m512i x) {
  c.low_bits = _mm512_or_si512(c.low_bits, _mm512_and_si512(x, _mm512_set1_epi32(0xFFFF)));
  const __mmask16 nonzero = _mm512_test_epi32_mask(x, _mm512_set1_epi32(0x7FFFFFFF));
  c.subnormal |= _mm512_mask_testn_epi32_mask(nonzero, x, _mm512_set1_epi32(0x7F800000));
}

LSF_BF16_TARGET inline bool failed(const Check& c) {
  return c.subnormal != 0 || _mm512_test_epi32_mask(c.low_bits, c.low_bits) != 0;
}

// 16 pair words from 16 lanes of two rows of memory: x0's bf16 in each word's low half, x1's in
// the high half.
LSF_BF16_TARGET inline __m512i words_across(__m512i x0, __m512i x1, Check& c) {
  check(c, x0);
  check(c, x1);
  return _mm512_or_si512(_mm512_maskz_srli_epi32(__mmask16(0xFFFF), x0, 16),  // (maskz: GCC 12 warns on srli's undefined source)
                         _mm512_and_si512(x1, _mm512_set1_epi32(int(0xFFFF0000u))));
}

// 16 pair words of 32 consecutive values (at most `count` of them read, the rest 0): word p
// holds values 2p and 2p + 1, i.e. the high halves of the 32 values in order.
LSF_BF16_TARGET inline __m512i words_along(const float* x, int64_t count, Check& c) {
  __m512i v0, v1;
  if (count >= 32) {
    v0 = _mm512_loadu_si512(x);
    v1 = _mm512_loadu_si512(x + 16);
  } else {
    v0 = _mm512_maskz_loadu_epi32(first_lanes(count), x);
    v1 = _mm512_maskz_loadu_epi32(first_lanes(count - 16), x + 16);
  }
  check(c, v0);
  check(c, v1);
  const __m512i odd_halves = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                                              25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  return _mm512_permutex2var_epi16(v0, odd_halves, v1);
}

// Pairs a task of pack_across packs.
constexpr int64_t kAcrossPairs = 16;

// Lines whose k runs across rows of memory (a with ta, b without tb): pair p of line x is
// (src[2p·ld + x], src[(2p+1)·ld + x]). Writes pairs [p0, p1) (at most kAcrossPairs) of every
// line into dst, the lines grouped by `group` (kRows or kCols): dst[(x / group)·pairs·group +
// p·group + x % group]; a group's lines past `lines` are 0. The task's rows of memory are read
// whole, into tmp (kAcrossPairs · lines_padded words, lines_padded = lines rounded up to a
// multiple of 16 and of group), then each group's words of the task's pairs are written as one
// run: reading narrow bands of many rows, or writing one pair's words into every group, ran
// 2-4x slower.
LSF_BF16_TARGET bool pack_across(const float* src, int64_t ld, int64_t k, int64_t lines, int64_t lines_padded,
                                 int64_t p0, int64_t p1, int64_t group, int64_t pairs, uint32_t* dst, uint32_t* tmp) {
  Check c{_mm512_setzero_si512(), 0};
  for (int64_t p = p0; p < p1; ++p) {
    const float* r0 = src + 2 * p * ld;
    const float* r1 = 2 * p + 1 < k ? src + (2 * p + 1) * ld : nullptr;
    uint32_t* words = tmp + (p - p0) * lines_padded;
    for (int64_t x = 0; x < lines_padded; x += 16) {
      const __mmask16 m = first_lanes(lines - x);
      const __m512i v0 = _mm512_maskz_loadu_epi32(m, r0 + x);  // (masked lanes never fault)
      const __m512i v1 = r1 ? _mm512_maskz_loadu_epi32(m, r1 + x) : _mm512_setzero_si512();
      _mm512_storeu_si512(words + x, words_across(v0, v1, c));
    }
  }
  const __mmask16 first = first_lanes(group);
  for (int64_t g = 0; g * group < lines; ++g) {
    uint32_t* out = dst + g * pairs * group + p0 * group;
    for (int64_t p = p0; p < p1; ++p) {  // group words: kRows = 12 (one masked vector) or kCols = 32 (two)
      const uint32_t* in = tmp + (p - p0) * lines_padded + g * group;
      uint32_t* o = out + (p - p0) * group;
      _mm512_mask_storeu_epi32(o, first, _mm512_maskz_loadu_epi32(first, in));
      if (group == kCols) _mm512_storeu_si512(o + 16, _mm512_loadu_si512(in + 16));
    }
  }
  return !failed(c);
}

// a without ta (k along its rows of memory), one strip of kRows rows [i0, i0 + kRows) into the
// row-major strip layout: block b of kBlockPairs pairs is kRows rows of kBlockPairs words,
// dst[b·kRows·kBlockPairs + r·kBlockPairs + (p mod kBlockPairs)]; rows past m are 0.
LSF_BF16_TARGET bool pack_rows_along(const float* src, int64_t ld, int64_t k, int64_t m, int64_t i0, int64_t pairs,
                                     uint32_t* dst) {
  Check c{_mm512_setzero_si512(), 0};
  const int64_t blocks = ceil_div(pairs, kBlockPairs);
  for (int64_t r = 0; r < kRows; ++r) {
    const float* row = i0 + r < m ? src + (i0 + r) * ld : nullptr;
    for (int64_t b = 0; b < blocks; ++b) {
      uint32_t* out = dst + (b * kRows + r) * kBlockPairs;
      const int64_t q1 = std::min(kBlockPairs, pairs - b * kBlockPairs);
      for (int64_t q = 0; q < q1; q += 16) {
        const int64_t k0 = 2 * (b * kBlockPairs + q);
        const __m512i w = row ? words_along(row + k0, k - k0, c) : _mm512_setzero_si512();
        _mm512_storeu_si512(out + q, w);
      }
    }
  }
  return !failed(c);
}

// b with tb (k along its rows of memory: b is stored [n × k]), one panel of kCols columns
// [j0, j0 + kCols) into the panel layout dst[p·kCols + (j − j0)]; columns past n are 0.
LSF_BF16_TARGET bool pack_cols_along(const float* src, int64_t ld, int64_t k, int64_t n, int64_t j0, int64_t pairs,
                                     uint32_t* dst) {
  Check c{_mm512_setzero_si512(), 0};
  alignas(64) uint32_t words[16];
  for (int64_t j = 0; j < kCols; ++j) {
    const float* row = j0 + j < n ? src + (j0 + j) * ld : nullptr;
    for (int64_t q = 0; q < pairs; q += 16) {
      const int64_t have = std::min<int64_t>(16, pairs - q);
      if (row == nullptr) {
        for (int64_t t = 0; t < have; ++t) dst[(q + t) * kCols + j] = 0u;
        continue;
      }
      _mm512_store_si512(words, words_along(row + 2 * q, k - 2 * q, c));
      for (int64_t t = 0; t < have; ++t) dst[(q + t) * kCols + j] = words[t];
    }
  }
  return !failed(c);
}

// c block [rows × cols] (rows ≤ kRows, cols ≤ kCols; row stride ldc) = (first ? beta·c : c) +
// alpha · Σ over `count` pairs of the strip's and panel's words (b: kCols words per pair; a:
// row r's word of pair p at a[r·kBlockPairs + p] (RowMajorA) or a[p·kRows + r]). beta = 0 on the
// first block never reads c.
template <bool RowMajorA>
LSF_BF16_TARGET void micro_kernel(int64_t count, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc,
                                  int64_t rows, int64_t cols, float alpha, float beta, bool first) {
  __m512 acc[kRows][2];
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < count; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * kCols);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * kCols + 16);
#pragma GCC unroll 12
    for (int r = 0; r < kRows; ++r) {
      const uint32_t word = RowMajorA ? a[r * kBlockPairs + p] : a[p * kRows + r];
      const __m512bh x = (__m512bh)_mm512_set1_epi32(int(word));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, b1);
    }
  }
  const __mmask16 m0 = first_lanes(cols), m1 = first_lanes(cols - 16);
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

bool gemm_bf16_supported() { return cpu_has_bf16_dot(); }
bool gemm_bf16_available() { return cpu_has_bf16_dot() && cpu_bf16_products(); }

bool gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (!gemm_bf16_available() || m <= 0 || n <= 0 || k <= 0) return false;
  const int64_t pairs = ceil_div(k, 2), strips = ceil_div(m, kRows), panels = ceil_div(n, kCols);
  const int64_t blocks = ceil_div(pairs, kBlockPairs);
  // a's strips: row-major blocks when its k runs along its rows (no transposing while packing),
  // pair-major when it runs across them (a pair's kRows words come from two rows of memory).
  const bool row_major_a = !ta;
  const int64_t strip_words = row_major_a ? blocks * kRows * kBlockPairs : pairs * kRows;
  // The packed operands: the call's workspace from the CPU allocator (engine/scratch.h).
  const CpuScratch<uint32_t> packed_a(size_t(strips * strip_words)), packed_b(size_t(panels * kCols * pairs));
  uint32_t* const pa = packed_a.data();
  uint32_t* const pb = packed_b.data();

  const bool nested = omp_in_parallel();
  const int threads = nested ? 1 : omp_get_max_threads();
  const bool parallel = threads > 1 && m * n * k >= kParallelMultiplyAdds;
  // Units: kUnitRows rows × unit_panels panels of c, enough of them to keep every thread busy.
  const int64_t row_units = ceil_div(m, kUnitRows);
  int64_t col_units = 1;
  if (parallel && row_units < 2 * threads) col_units = std::min(panels, ceil_div(2 * threads, row_units));
  const int64_t unit_panels = ceil_div(panels, col_units);
  col_units = ceil_div(panels, unit_panels);
  const int64_t units = row_units * col_units;
  int bad = 0;
  // pack_across's rows of words, one buffer per thread, allocated here: an allocation failing
  // inside the parallel region would end the process instead of raising lsf::Error.
  const int64_t m_padded = ceil_div(m, 48) * 48, n_padded = ceil_div(n, kCols) * kCols;  // (48: 16 and kRows)
  const int64_t tmp_words = ta || !tb ? kAcrossPairs * std::max(m_padded, n_padded) : 0;
  const CpuScratch<uint32_t> tmp_all(size_t((parallel ? threads : 1) * tmp_words));

#pragma omp parallel if (parallel)
  {
    // Packing, split over the threads; each part reports whether its values were all usable.
    uint32_t* const tmp = tmp_all.data() + omp_get_thread_num() * tmp_words;
    if (ta) {
#pragma omp for schedule(static) reduction(| : bad)
      for (int64_t p = 0; p < pairs; p += kAcrossPairs)
        bad |= !pack_across(a, lda, k, m, m_padded, p, std::min(pairs, p + kAcrossPairs), kRows, pairs, pa, tmp);
    } else {
#pragma omp for schedule(static) reduction(| : bad)
      for (int64_t s = 0; s < strips; ++s) bad |= !pack_rows_along(a, lda, k, m, s * kRows, pairs, pa + s * strip_words);
    }
    if (!tb) {
#pragma omp for schedule(static) reduction(| : bad)
      for (int64_t p = 0; p < pairs; p += kAcrossPairs)
        bad |= !pack_across(b, ldb, k, n, n_padded, p, std::min(pairs, p + kAcrossPairs), kCols, pairs, pb, tmp);
    } else {
#pragma omp for schedule(static) reduction(| : bad)
      for (int64_t q = 0; q < panels; ++q) bad |= !pack_cols_along(b, ldb, k, n, q * kCols, pairs, pb + q * pairs * kCols);
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
              float* cs = c + i0 * ldc + j0;
              if (row_major_a)
                micro_kernel<true>(count, pa + s * strip_words + (p0 / kBlockPairs) * kRows * kBlockPairs, bq, cs, ldc,
                                   rows, cols, alpha, beta, p0 == 0);
              else
                micro_kernel<false>(count, pa + s * strip_words + p0 * kRows, bq, cs, ldc, rows, cols, alpha, beta,
                                    p0 == 0);
            }
          }
        }
      }
    }
  }
  return bad == 0;
}

#else  // no x86-64 GCC: no bf16 kernel

bool gemm_bf16_supported() { return false; }
bool gemm_bf16_available() { return false; }
bool gemm_bf16(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float, float*,
               int64_t) {
  return false;
}

#endif

bool bf16_operands(std::initializer_list<const Tensor*> operands) {
  if (!gemm_bf16_available()) return false;
  for (const Tensor* t : operands)
    if (!t->defined() || t->dtype() != DType::F32 || !t->storage()->values_exact_in(DType::BF16)) return false;
  return true;
}

bool bf16_operands(const TensorList& operands) {
  for (const Tensor& t : operands)
    if (!bf16_operands({&t})) return false;
  return true;
}

}  // namespace lsf::cpu
