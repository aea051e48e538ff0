// Skinny GEMM (see skinny_gemm.h): register-tiled, op(b) packed once, rows split over threads.
//
// The register tile is MR rows × NV vectors of c, accumulated over all of K before c is
// touched: per k, NV vectors of the packed b row and MR broadcasts of a feed MR·NV FMAs. The
// tile shape is chosen per instruction set (x86-64-v4: 6 × 4 zmm = 24 of 32 registers;
// v3 and baseline: 4 × 3 of 16), each variant compiled with its own target attribute and
// picked at run time (the best this CPU runs; select_skinny_gemm_variant overrides it), as the
// library itself is built for baseline x86-64.
//
// fp-contract=fast lets GCC fuse acc += a·b into one FMA where the target has it (the project
// compiles as ISO C++, which forbids contraction): one rounding per step, as BLAS kernels do.
#pragma GCC optimize("fp-contract=fast")

#include "lsformer/ops/cpu/skinny_gemm.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "lsformer/engine/error.h"
#include "lsformer/engine/scratch.h"
#include "lsformer/ops/cpu/simd.h"

namespace lsf::cpu {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LSF_SKINNY_X86 1
#define LSF_TARGET_V4 __attribute__((target("arch=x86-64-v4")))
#define LSF_TARGET_V3 __attribute__((target("arch=x86-64-v3")))
#else
#define LSF_SKINNY_X86 0
#endif

// The packed panel's row length is a multiple of this many elements, so it holds whole vectors
// for every variant (at most 64-byte vectors of 4-byte floats).
constexpr int64_t kPanelAlign = 16;
// Rows per unit of parallel work: a multiple of every variant's MR (6 and 4).
constexpr int64_t kRowsPerTask = 96;
// Below this many multiply-adds a product runs on one thread (a fork costs a few µs).
constexpr double kMinParallelWork = 1 << 17;

template <typename T>
struct Product {
  int64_t m, n, k;
  T alpha, beta;
  const T* a;
  int64_t lda;
  // op(b) as [k, panel_ld]: columns up to n rounded up to kPanelAlign are read, those past n
  // never stored.
  const T* panel;
  int64_t panel_ld;
  T* c;
  int64_t ldc;
  // Added to every row after the product (nullptr: none); set on the last K chunk only, so the
  // bias joins the finished sum, as a separate add would.
  const T* bias;
};

template <typename T, int Bytes>
struct Vec {
  typedef T type __attribute__((vector_size(Bytes)));
  static constexpr int lanes = Bytes / int(sizeof(T));
};

// c[MR rows from i, NV vectors from column j0] = alpha · Σ_k a(i, k) · panel[k, j0 …] + beta · c.
template <typename T, int Bytes, int MR, int NV, bool TA>
inline __attribute__((always_inline)) void tile(const Product<T>& p, int64_t i, int64_t j0) {
  using V = typename Vec<T, Bytes>::type;
  constexpr int L = Vec<T, Bytes>::lanes;
  const T* a = TA ? p.a + i : p.a + i * p.lda;
  const int64_t a_row = TA ? 1 : p.lda, a_col = TA ? p.lda : 1;
  const T* b = p.panel + j0;
  V acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  for (int64_t k = 0; k < p.k; ++k) {
    V bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) std::memcpy(&bv[v], b + k * p.panel_ld + v * L, sizeof(V));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const T ar = a[r * a_row + k * a_col];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] += ar * bv[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    T* c = p.c + (i + r) * p.ldc + j0;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const int64_t valid = std::min<int64_t>(L, p.n - j0 - v * L);
      V out = acc[r][v] * p.alpha;
      if (valid == L) {
        if (p.beta != T(0)) {
          V old;
          std::memcpy(&old, c + v * L, sizeof(V));
          out += p.beta * old;
        }
        if (p.bias) {
          V bias;
          std::memcpy(&bias, p.bias + j0 + v * L, sizeof(V));
          out += bias;
        }
        std::memcpy(c + v * L, &out, sizeof(V));
      } else {
        for (int64_t l = 0; l < valid; ++l) {
          T value = p.beta != T(0) ? out[l] + p.beta * c[v * L + l] : out[l];
          if (p.bias) value += p.bias[j0 + v * L + l];
          c[v * L + l] = value;
        }
      }
    }
  }
}

// The column strips of one tile of R rows from row i, over columns [jb, je) (jb a multiple of
// the strip width): strips of NVmax vectors, then one narrower strip for the remaining columns.
template <typename T, int Bytes, int R, int NVmax, bool TA>
inline __attribute__((always_inline)) void strips(const Product<T>& p, int64_t i, int64_t jb, int64_t je) {
  constexpr int L = Vec<T, Bytes>::lanes;
  constexpr int64_t strip = int64_t(NVmax) * L;
  for (int64_t j0 = jb; j0 < je; j0 += strip) {
    const int64_t nv = std::min<int64_t>(NVmax, (p.n - j0 + L - 1) / L);
    if (nv == NVmax) tile<T, Bytes, R, NVmax, TA>(p, i, j0);
    else if (nv == 1) tile<T, Bytes, R, 1, TA>(p, i, j0);
    else if (nv == 2) tile<T, Bytes, R, 2, TA>(p, i, j0);
    else tile<T, Bytes, R, 3, TA>(p, i, j0);  // nv == 3 < NVmax
  }
}

// Rows [i0, i1) of c, columns [jb, je): row tiles outer (a tile's rows of a stay in L1 across
// the column strips), column strips inner.
template <typename T, int Bytes, int MR, int NVmax, bool TA>
inline __attribute__((always_inline)) void rows_impl(const Product<T>& p, int64_t i0, int64_t i1, int64_t jb,
                                                     int64_t je) {
  int64_t i = i0;
  for (; i + MR <= i1; i += MR) strips<T, Bytes, MR, NVmax, TA>(p, i, jb, je);
  // The last i1 − i < MR rows as one tile, not row by row: a lone row is one chain of
  // dependent FMAs, waiting on the FMA latency at every k.
  switch (i1 - i) {
    case 0: break;
    case 1: strips<T, Bytes, 1, NVmax, TA>(p, i, jb, je); break;
    case 2: strips<T, Bytes, 2, NVmax, TA>(p, i, jb, je); break;
    case 3: strips<T, Bytes, 3, NVmax, TA>(p, i, jb, je); break;
    case 4: strips<T, Bytes, (MR > 4 ? 4 : 1), NVmax, TA>(p, i, jb, je); break;  // only when MR > 4
    default: strips<T, Bytes, (MR > 5 ? 5 : 1), NVmax, TA>(p, i, jb, je); break;  // 5, only when MR = 6
  }
  static_assert(MR <= 6, "the remainder switch covers tiles of up to 6 rows");
}

// The same product with the loops swapped, for few rows and a wide panel (the per-tile products
// of the attention kernels: 32 rows against hundreds of columns): column strips outer, so one
// strip of the panel (k × NVmax vectors) stays in L1 while every row tile uses it, instead of the
// whole panel streaming from L2 once per row tile. Each element's sum is the same chain over k,
// so the result is bit-identical to rows_impl's.
template <typename T, int Bytes, int MR, int NVmax, bool TA>
inline __attribute__((always_inline)) void strips_outer(const Product<T>& p, int64_t i0, int64_t i1) {
  constexpr int L = Vec<T, Bytes>::lanes;
  constexpr int64_t strip = int64_t(NVmax) * L;
  for (int64_t j0 = 0; j0 < p.n; j0 += strip) rows_impl<T, Bytes, MR, NVmax, TA>(p, i0, i1, j0, std::min(p.n, j0 + strip));
}

// Row ranges up to this many rows run strips_outer when the panel spans several strips.
constexpr int64_t kStripsOuterMaxRows = 64;

template <typename T, int Bytes, int MR, int NVmax, bool TA>
inline __attribute__((always_inline)) void rows_best(const Product<T>& p, int64_t i0, int64_t i1) {
  if (i1 - i0 <= kStripsOuterMaxRows && p.n > int64_t(NVmax) * Vec<T, Bytes>::lanes)
    strips_outer<T, Bytes, MR, NVmax, TA>(p, i0, i1);
  else
    rows_impl<T, Bytes, MR, NVmax, TA>(p, i0, i1, 0, p.n);
}

template <typename T, int Bytes, int MR, int NVmax>
inline __attribute__((always_inline)) void rows_any(const Product<T>& p, int64_t i0, int64_t i1, bool ta) {
  if (ta) rows_best<T, Bytes, MR, NVmax, true>(p, i0, i1);
  else rows_best<T, Bytes, MR, NVmax, false>(p, i0, i1);
}

template <typename T>
void rows_baseline(const Product<T>& p, int64_t i0, int64_t i1, bool ta) { rows_any<T, 16, 4, 3>(p, i0, i1, ta); }
#if LSF_SKINNY_X86
template <typename T>
LSF_TARGET_V3 void rows_v3(const Product<T>& p, int64_t i0, int64_t i1, bool ta) { rows_any<T, 32, 4, 3>(p, i0, i1, ta); }
template <typename T>
LSF_TARGET_V4 void rows_v4(const Product<T>& p, int64_t i0, int64_t i1, bool ta) { rows_any<T, 64, 6, 4>(p, i0, i1, ta); }
#endif

// The kernel's variants are the CPU's vector levels (ops/cpu/simd.h).
using Variant = VectorLevel;

std::atomic<Variant>& selected_variant() {
  static std::atomic<Variant> selected{supported_vector_levels().front()};
  return selected;
}

template <typename T>
void run_rows(const Product<T>& p, int64_t i0, int64_t i1, bool ta) {
  switch (selected_variant().load(std::memory_order_relaxed)) {
#if LSF_SKINNY_X86
    case Variant::Avx512: return rows_v4<T>(p, i0, i1, ta);
    case Variant::Avx2: return rows_v3<T>(p, i0, i1, ta);
#endif
    default: return rows_baseline<T>(p, i0, i1, ta);
  }
}

// op(b) as a dense [k, ld] panel, ld a multiple of kPanelAlign, zero in the padding columns
// (they feed lanes of c that are never stored). b itself is that panel when it is not
// transposed and n is a multiple of kPanelAlign: no copy then, and panel_elements is 0.
inline bool panel_is_b(bool tb, int64_t n) { return !tb && n % kPanelAlign == 0; }
inline int64_t packed_panel_ld(int64_t n) { return (n + kPanelAlign - 1) / kPanelAlign * kPanelAlign; }
inline int64_t panel_elements(bool tb, int64_t n, int64_t k) { return panel_is_b(tb, n) ? 0 : k * packed_panel_ld(n); }

// Points p.panel at op(b): b itself, or `storage` (panel_elements(tb, p.n, p.k) elements)
// filled with the packed panel.
template <typename T>
void set_panel(Product<T>& p, T* storage, bool tb, const T* b, int64_t ldb) {
  if (panel_is_b(tb, p.n)) {
    p.panel = b;
    p.panel_ld = ldb;
    return;
  }
  const int64_t ld = packed_panel_ld(p.n);
  T* panel = storage;
  if (tb) {
    // b's row j is the panel's column j. In blocks of kTransposeBlock × kTransposeBlock, so the
    // block's panel rows stay in L1 while b's rows stream through it: column by column, every
    // store went to another panel row, a cache miss each (a 256 × 256 weight cost as much to pack
    // as a 128-row product with it took to compute).
    constexpr int64_t kTransposeBlock = 16;
    for (int64_t j0 = 0; j0 < p.n; j0 += kTransposeBlock)
      for (int64_t k0 = 0; k0 < p.k; k0 += kTransposeBlock) {
        const int64_t j1 = std::min(p.n, j0 + kTransposeBlock), k1 = std::min(p.k, k0 + kTransposeBlock);
        for (int64_t j = j0; j < j1; ++j)
          for (int64_t kk = k0; kk < k1; ++kk) panel[kk * ld + j] = b[j * ldb + kk];
      }
  } else {
    for (int64_t kk = 0; kk < p.k; ++kk) std::copy(b + kk * ldb, b + kk * ldb + p.n, panel + kk * ld);
  }
  for (int64_t kk = 0; kk < p.k; ++kk) std::fill(panel + kk * ld + p.n, panel + (kk + 1) * ld, T(0));
  p.panel = panel;
  p.panel_ld = ld;
}

template <typename T>
void skinny(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
            int64_t ldb, T beta, T* c, int64_t ldc, const T* bias) {
  LSF_CHECK(n >= 1 && k >= 1 && n <= kSkinnyMaxN && (k <= kSkinnyMaxK || m <= kSkinnyMaxRowsLongK))
      << "skinny_gemm: m = " << m << ", n = " << n << ", k = " << k << " exceed its limits (n in 1 … "
      << kSkinnyMaxN << "; k in 1 … " << kSkinnyMaxK << ", or any k ≥ 1 for m ≤ " << kSkinnyMaxRowsLongK << ")";
  if (m <= 0) return;
  // The packed panel of one K chunk (reused by the next), from the CPU allocator
  // (engine/scratch.h): counted by memory_stats() while the call runs; none when b is the panel.
  const CpuScratch<T> panel_storage(size_t(panel_elements(tb, n, std::min(k, kSkinnyMaxK))));
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t tasks = (m + kRowsPerTask - 1) / kRowsPerTask;
  const bool parallel =
      threads > 1 && tasks > 1 && double(m) * double(n) * double(std::min(k, kSkinnyMaxK)) >= kMinParallelWork;
  // K in chunks of at most kSkinnyMaxK (one chunk for a short K): chunk c's product is summed
  // into c with beta = 1, the first one with the caller's beta.
  for (int64_t k0 = 0; k0 < k; k0 += kSkinnyMaxK) {
    const int64_t kc = std::min(kSkinnyMaxK, k - k0);
    Product<T> p{m, n, kc, alpha, k0 == 0 ? beta : T(1), ta ? a + k0 * lda : a + k0, lda, nullptr, 0, c, ldc,
                 k0 + kc == k ? bias : nullptr};
    set_panel(p, panel_storage.data(), tb, tb ? b + k0 : b + k0 * ldb, ldb);
    if (parallel) {
#pragma omp parallel for schedule(static)
      for (int64_t t = 0; t < tasks; ++t) run_rows(p, t * kRowsPerTask, std::min(m, (t + 1) * kRowsPerTask), ta);
    } else {
      run_rows(p, 0, m, ta);
    }
  }
}

template <typename T>
void group(int64_t m, const std::vector<SkinnyProduct<T>>& list) {
  for (const SkinnyProduct<T>& q : list)
    LSF_CHECK(q.n >= 1 && q.n <= kSkinnyMaxN && q.k >= 1 && q.k <= kSkinnyMaxK)
        << "skinny_gemm_group: a product with n = " << q.n << ", k = " << q.k << " exceeds the group's limits (n in 1 … "
        << kSkinnyMaxN << ", k in 1 … " << kSkinnyMaxK << ": one K chunk)";
  if (m <= 0 || list.empty()) return;
  // One packed panel per product, all alive while the rows run: one workspace, as in skinny().
  int64_t panels_size = 0;
  for (const SkinnyProduct<T>& q : list) panels_size += panel_elements(q.tb, q.n, q.k);
  const CpuScratch<T> panel_storage{size_t(panels_size)};
  std::vector<Product<T>> products;
  double work = 0;
  int64_t panel_at = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const SkinnyProduct<T>& q = list[i];
    Product<T> p{m, q.n, q.k, q.alpha, q.beta, q.a, q.lda, nullptr, 0, q.c, q.ldc, q.bias};
    set_panel(p, panel_storage.data() + panel_at, q.tb, q.b, q.ldb);
    panel_at += panel_elements(q.tb, q.n, q.k);
    products.push_back(p);
    work += double(m) * double(q.n) * double(q.k);
  }
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t tasks = (m + kRowsPerTask - 1) / kRowsPerTask;
  auto block = [&](int64_t t) {
    const int64_t i0 = t * kRowsPerTask, i1 = std::min(m, i0 + kRowsPerTask);
    for (size_t i = 0; i < products.size(); ++i) run_rows(products[i], i0, i1, list[i].ta);
  };
  if (threads > 1 && tasks > 1 && work >= kMinParallelWork) {
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) block(t);
  } else {
    for (int64_t t = 0; t < tasks; ++t) block(t);
  }
}

}  // namespace

void skinny_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias) {
  skinny<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
}
void skinny_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double beta, double* c, int64_t ldc, const double* bias) {
  skinny<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
}

void skinny_gemm_group(int64_t m, const std::vector<SkinnyProduct<float>>& products) { group<float>(m, products); }
void skinny_gemm_group(int64_t m, const std::vector<SkinnyProduct<double>>& products) { group<double>(m, products); }

bool skinny_gemm_applies(int64_t m, int64_t n, int64_t k) {
  return m >= kSkinnyMinRows && n >= 1 && k >= 1 && n <= kSkinnyMaxN && (k <= kSkinnyMaxK || m <= kSkinnyMaxRowsLongK) &&
         selected_variant().load(std::memory_order_relaxed) != Variant::Baseline;
}

std::vector<std::string> skinny_gemm_variants() {
  std::vector<std::string> names;
  for (Variant v : supported_vector_levels()) names.push_back(vector_level_name(v));
  return names;
}

void select_skinny_gemm_variant(const std::string& name) {
  for (Variant v : supported_vector_levels())
    if (name == vector_level_name(v)) {
      selected_variant().store(v);
      return;
    }
  std::string known;
  for (const std::string& n : skinny_gemm_variants()) known += (known.empty() ? "" : ", ") + n;
  LSF_FAIL() << "skinny_gemm: no variant '" << name << "' on this CPU (it runs: " << known << ")";
}

}  // namespace lsf::cpu
