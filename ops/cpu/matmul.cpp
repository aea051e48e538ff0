// CPU GEMM on OpenBLAS (cblas_sgemm / cblas_dgemm) and the skinny kernel: the batched,
// broadcasting, reducing product gemm_kernel declares in ops/matmul.h.
//
// Plan, then run:
//  1. Describe each operand as a matrix (rows, cols, two element strides) plus one stride per
//     batch dim. Size-1 batch dims are dropped.
//  2. Fold batch dims into the matrices when the strides allow, so one large GEMM replaces a
//     loop of small ones: into M when b is broadcast along the dim and the dim continues a's and
//     c's rows (x [B, T, K] · w [K, N]); into N symmetrically; into K when c is summed along the
//     dim and it continues a's columns and b's rows (the weight gradient xᵀ · dy summed over B).
//  3. If c is column-major, compute cᵀ = bᵀ · aᵀ instead, so BLAS always writes row-major.
//  4. Run each product on OpenBLAS, or on skinny_gemm when K and N are small (see
//     ops/cpu/skinny_gemm.h): a batch of large GEMMs one after the other on all threads; a
//     batch of small ones in an OpenMP loop (both run single-threaded inside it).
//     Products summed into one c matrix (stride-0 batch dims of c) run in order on one thread
//     with beta = 1, or, when there are few c matrices and many small products, into
//     per-thread partial sums added up at the end. A single GEMM with a small output and a
//     long K (a weight gradient over every token) splits K over the threads the same way:
//     OpenBLAS would split only M and N, making every thread stream all of K. Partial sums use
//     a fixed split, so results are deterministic for a given thread count.
//  5. Products whose operands both came from bf16 (autocast's roundings) run on the bf16 kernel
//     (ops/cpu/gemm_bf16.h) where it pays; the grouped linears kernels step aside for them.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "lsformer/engine/region_errors.h"
#include "lsformer/engine/scratch.h"
#include "lsformer/ops/cpu/gemm_bf16.h"
#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/cpu/simd.h"
#include "lsformer/ops/cpu/skinny_gemm.h"
#include "lsformer/ops/kernels/gemm_problem.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/kernels/matmul.h"

namespace lsf::cpu {
namespace {

// Multiply-adds per GEMM below which OpenBLAS 0.3 runs one thread (SMP_THRESHOLD_MIN 65536 ×
// GEMM_MULTITHREAD_THRESHOLD 4): such GEMMs gain nothing from BLAS threads, so we parallelise
// over the batch instead. Scaled by the thread count, as each BLAS thread wants that much.
constexpr double kSmallGemmPerThread = 65536.0 * 4.0;
// Elements of per-thread partial sums we are willing to allocate for a reduced batch.
constexpr int64_t kMaxPartialElements = int64_t(1) << 24;
// Splitting K over threads: each chunk at least this long, and only for outputs smaller than
// this many elements per thread (larger ones give OpenBLAS's own M/N split enough work).
constexpr int64_t kMinSplitK = 1024;
constexpr int64_t kSplitKMaxOutputPerThread = 128 * 128;

// The planning shared with the CUDA kernel (ops/kernels/gemm_problem.h); an operand's ref is its first
// element.
using Operand = gemm::Operand<char*>;
using Problem = gemm::Problem<char*>;
using gemm::BatchOffsets;
using gemm::batch_offsets;
using gemm::Layout;

// One row (M = 1: one token through a Linear layer in incremental decoding): a matrix-vector
// product. OpenBLAS's sgemm would pack all of op(b) on every call, a copy as large as the
// product itself (the generation benchmark spent half its time there). c is zeroed first when
// beta = 0, so that NaN in the uninitialised output cannot propagate (BLAS semantics).
// c[0, j] = alpha·Σ_k a(0, k)·b(k, j) + beta·c[0, j], a(0, k) = a[k·(ta ? lda : 1)].
void gemv_row(bool ta, bool tb, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
              float beta, float* c) {
  if (beta == 0.0f) std::fill(c, c + n, 0.0f);
  if (tb) cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, alpha, b, ldb, a, ta ? lda : 1, beta, c, 1);  // b [n × k]
  else cblas_sgemv(CblasRowMajor, CblasTrans, k, n, alpha, b, ldb, a, ta ? lda : 1, beta, c, 1);      // b [k × n]
}
void gemv_row(bool ta, bool tb, int n, int k, double alpha, const double* a, int lda, const double* b, int ldb,
              double beta, double* c) {
  if (beta == 0.0) std::fill(c, c + n, 0.0);
  if (tb) cblas_dgemv(CblasRowMajor, CblasNoTrans, n, k, alpha, b, ldb, a, ta ? lda : 1, beta, c, 1);
  else cblas_dgemv(CblasRowMajor, CblasTrans, k, n, alpha, b, ldb, a, ta ? lda : 1, beta, c, 1);
}

// One product: a matrix-vector product for a single row, the skinny kernel when K and N are
// small and M is not (OpenBLAS's packing and separate clearing pass dominate there), else
// OpenBLAS.
// bf16: the operands' values came from bf16 (bf16_operands, ops/cpu/gemm_bf16.h), so a product
// large enough may run on the bf16 kernel, which checks them as it packs them and declines if one
// is not exact in bf16.
void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc, bool bf16) {
  if (m == 1) return gemv_row(ta, tb, n, k, alpha, a, lda, b, ldb, beta, c);
  if (bf16 && gemm_bf16_if_it_pays(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return;
  if (skinny_gemm_applies(m, n, k)) return skinny_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda,
          const double* b, int ldb, double beta, double* c, int ldc, bool /*bf16: f32 only*/) {
  if (m == 1) return gemv_row(ta, tb, n, k, alpha, a, lda, b, ldb, beta, c);
  if (skinny_gemm_applies(m, n, k)) return skinny_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void run(Problem& p, T alpha, T beta, bool bf16) {
  const gemm::Layouts layouts = gemm::checked_layouts(p, "BLAS");
  const Layout &la = layouts.a, &lb = layouts.b, &lc = layouts.c;

  // Batch dims along which c has stride 0 are summed over; the others index c matrices.
  std::vector<size_t> out_dims, red_dims;
  for (size_t d = 0; d < p.batch.size(); ++d) (p.c.batch[d] == 0 ? red_dims : out_dims).push_back(d);
  const BatchOffsets outs = batch_offsets(p, out_dims), reds = batch_offsets(p, red_dims);
  const int64_t n_out = outs.size(), n_red = reds.size();

  T* const A = reinterpret_cast<T*>(p.a.ref);
  T* const B = reinterpret_cast<T*>(p.b.ref);
  T* const C = reinterpret_cast<T*>(p.c.ref);
  const int M = int(p.M), N = int(p.N), K = int(p.K);
  const int lda = int(la.ld), ldb = int(lb.ld), ldc = int(lc.ld);

  if (K == 0) {  // an empty sum: c = beta · c (and exactly 0 for beta = 0, even over NaN)
    for (int64_t o = 0; o < n_out; ++o)
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          T& v = C[outs.c[o] + i * p.c.rs + j];
          v = beta == T(0) ? T(0) : beta * v;
        }
    return;
  }
  // All products into c matrix o, in a fixed order: beta applies to the first only.
  auto product_into = [&](int64_t o, T* c, int ld, T beta0, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      gemm(la.trans, lb.trans, M, N, K, alpha, A + outs.a[o] + reds.a[r], lda, B + outs.b[o] + reds.b[r],
           ldb, r == r0 ? beta0 : T(1), c, ld, bf16);
  };

  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t mn = int64_t(M) * N;
  // Partial sums: parts buffers of n_out c matrices each, filled in parallel by fill(t, buffer),
  // then added up in a fixed order, c = beta · c + Σ_t partial[t] (deterministic for a given
  // thread count).
  auto sum_partials = [&](int64_t parts, auto&& fill) {
    // Never cleared: every part's products overwrite their buffer (beta 0 on the first). From
    // the allocator's cache (engine/scratch.h): a fresh vector here cost a zeroing pass and page
    // faults on every weight gradient.
    const CpuScratch<T> storage(size_t(parts * n_out * mn));
    T* const partial_data = storage.data();
    auto partial = [&](size_t i) -> T& { return partial_data[i]; };
    RegionErrors errors;  // fill runs GEMMs, which may allocate (bf16 packing) or check arguments
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < parts; ++t) errors.run([&] { fill(t, partial_data + t * n_out * mn); });
    errors.rethrow();
#pragma omp parallel for schedule(static) if (n_out * mn * parts >= 32768)
    for (int64_t e = 0; e < n_out * mn; ++e) {
      const int64_t o = e / mn, i = (e % mn) / N, j = e % N;
      T sum = 0;
      for (int64_t t = 0; t < parts; ++t) sum += partial(size_t((t * n_out + o) * mn + i * N + j));
      T& v = C[outs.c[o] + i * p.c.rs + j];
      v = beta == T(0) ? sum : beta * v + sum;
    }
  };

  const bool small = double(M) * double(N) * double(K) < kSmallGemmPerThread * threads;
  const bool balanced = n_out % threads == 0 || n_out >= 4 * threads;
  const bool many_outputs = n_out >= threads && (small || balanced);
  const int64_t red_parts = std::min<int64_t>(threads, n_red);
  const bool split_reduction =
      small && !many_outputs && red_parts > 1 && red_parts * n_out * mn <= kMaxPartialElements;
  // One GEMM with a small output and a long contraction (a weight gradient xᵀ·dy over all
  // tokens): OpenBLAS threads split only M and N, so every thread would stream all of K; we
  // split K instead, one chunk per thread.
  // A small-output product that the skinny kernel takes with a long K runs single-threaded in
  // it (its rows are too few to split), so it is split over K here whatever its output size.
  const int64_t k_parts = std::min<int64_t>(threads, K / kMinSplitK);
  const bool skinny_long_k = K > kSkinnyMaxK && skinny_gemm_applies(M, N, K);
  const bool split_k = n_out * n_red == 1 && k_parts > 1 &&
                       (mn < kSplitKMaxOutputPerThread * threads || skinny_long_k) && K >= 2 * std::max(M, N) &&
                       k_parts * mn <= kMaxPartialElements;
  if (threads > 1 && n_out > 1 && (many_outputs || (small && !split_reduction))) {
    // Many c matrices: one thread each; BLAS runs single-threaded inside the region.
    RegionErrors errors;  // as in sum_partials
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < n_out; ++o) errors.run([&] { product_into(o, C + outs.c[o], ldc, beta, 0, n_red); });
    errors.rethrow();
  } else if (threads > 1 && split_reduction) {
    // Few c matrices summing many small products: split the sum over the threads.
    sum_partials(red_parts, [&](int64_t t, T* buffer) {
      for (int64_t o = 0; o < n_out; ++o)
        product_into(o, buffer + o * mn, N, T(0), n_red * t / red_parts, n_red * (t + 1) / red_parts);
    });
  } else if (threads > 1 && split_k) {
    sum_partials(k_parts, [&](int64_t t, T* buffer) {
      const int64_t k0 = K * t / k_parts, k1 = K * (t + 1) / k_parts;
      gemm(la.trans, lb.trans, M, N, int(k1 - k0), alpha, A + outs.a[0] + reds.a[0] + k0 * p.a.cs, lda,
           B + outs.b[0] + reds.b[0] + k0 * p.b.rs, ldb, T(0), buffer, N, bf16);
    });
  } else {
    // Large GEMMs (or a single one): one after the other, each on all of OpenBLAS's threads.
    for (int64_t o = 0; o < n_out; ++o) product_into(o, C + outs.c[o], ldc, beta, 0, n_red);
  }
}

void gemm_cpu(const Tensor& c, const Tensor& a, const Tensor& b, double alpha, double beta) {
  const int64_t nd = c.dim();
  LSF_CHECK(nd >= 2 && a.dim() == nd && b.dim() == nd)
      << "gemm: expected operands of one rank ≥ 2, got shapes " << c.shape() << " = " << a.shape()
      << " · " << b.shape();
  LSF_CHECK(a.dtype() == c.dtype() && b.dtype() == c.dtype())
      << "gemm: dtype mismatch (" << c.dtype() << " = " << a.dtype() << " · " << b.dtype() << ")";
  Problem p;
  p.M = a.size(-2);
  p.K = a.size(-1);
  p.N = b.size(-1);
  bool shapes_ok = b.size(-2) == p.K && c.size(-2) == p.M && c.size(-1) == p.N;
  for (int64_t d = 0; d + 2 < nd; ++d) {
    shapes_ok = shapes_ok && a.shape()[d] == c.shape()[d] && b.shape()[d] == c.shape()[d];
    p.batch.push_back(c.shape()[d]);
  }
  LSF_CHECK(shapes_ok) << "gemm: shapes " << c.shape() << " = " << a.shape() << " · " << b.shape()
                       << " do not match";
  if (c.numel() == 0) return;
  auto describe = [&](Operand& o, const Tensor& t) {
    o.ref = static_cast<char*>(t.raw_data());
    o.rs = t.stride(-2);
    o.cs = t.stride(-1);
    o.batch.assign(t.strides().begin(), t.strides().end() - 2);
  };
  describe(p.a, a);
  describe(p.b, b);
  describe(p.c, c);
  const bool bf16 = bf16_operands({&a, &b});
  dispatch_float(c.dtype(), "matmul", [&]<typename T>() { run<T>(p, T(alpha), T(beta), bf16); });
}

// b(k, j) = weight[j, k] (the forward's weightᵀ: transposed for a row-major weight) or
// weight[k, j] (the input gradient's weight), as skinny_gemm's tb and ldb.
struct WeightOperand {
  bool tb;
  int64_t ldb;
};
WeightOperand transposed_weight(const Tensor& weight) {
  const bool row_major = weight.stride(1) == 1;
  return {row_major, row_major ? weight.stride(0) : weight.stride(1)};
}

// linear's forward (ops/kernels/matmul.h): y [M, N] = x [M, K] · weightᵀ + bias. A product the
// skinny kernel takes in one K chunk adds the bias as it stores each tile (the bits of a
// separate add); any other is summed onto rows already holding the bias (beta = 1), which
// costs no more than the pass that clears c for beta = 0 in OpenBLAS.
void linear_forward_cpu(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  LSF_CHECK(y.dim() == 2 && x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1 && x.size(0) == y.size(0) &&
            x.size(1) == weight.size(1) && weight.size(0) == y.size(1) && bias.size(0) == y.size(1))
      << "linear: shapes y " << y.shape() << " = x " << x.shape() << " · weightᵀ " << weight.shape() << " + bias "
      << bias.shape() << " do not match";
  LSF_CHECK(x.dtype() == y.dtype() && weight.dtype() == y.dtype() && bias.dtype() == y.dtype())
      << "linear: dtype mismatch (y " << y.dtype() << ", x " << x.dtype() << ", weight " << weight.dtype() << ", bias "
      << bias.dtype() << ")";
  const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
  if (M == 0 || N == 0) return;
  const auto [tb, ldb] = transposed_weight(weight);  // op(b) = weightᵀ
  dispatch_float(y.dtype(), "linear", [&]<typename T>() {
    T* Y = y.data_ptr<T>();
    const T* X = x.data_ptr<T>();
    const T* W = weight.data_ptr<T>();
    const T* b = bias.data_ptr<T>();
    // (Operands from bf16 go to gemm_cpu's bf16 kernel instead, where it pays.)
    if (K <= kSkinnyMaxK && skinny_gemm_applies(M, N, K) && !(gemm_bf16_pays(M, N, K) && bf16_operands({&x, &weight}))) {
      skinny_gemm(false, tb, M, N, K, T(1), X, x.stride(0), W, ldb, T(0), Y, N, b);
      return;
    }
#pragma omp parallel for schedule(static) if (M * N >= 4 * kParallelGrain && !omp_in_parallel())
    for (int64_t i = 0; i < M; ++i) std::copy(b, b + N, Y + i * N);
    gemm_cpu(y, x, weight.t(), 1.0, 1.0);
  });
}

// Columns [0, n) of rows [r0, r1) of dy (row stride ld) added into sums, one f64 sum per column
// over the rows in order.
template <typename T>
LSF_SIMD_CLONES void add_column_sums(double* sums, const T* dy, int64_t ld, int64_t r0, int64_t r1, int64_t n) {
  for (int64_t r = r0; r < r1; ++r)
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) sums[j] += double(dy[r * ld + j]);
}

// Whether the skinny kernel takes the weight gradient dW [N, K] = dyᵀ · x with a long contraction
// over rows (gemm_cpu's dispatch for that product: M = N, N = K, K = rows), with the operands
// and outputs laid out as linears_weight_grad_cpu reads and writes them.
bool weight_grad_fuses(const Tensor& dw, const Tensor& db, const Tensor& x, const Tensor& dy) {
  const int64_t rows = x.size(0), K = x.size(1), N = dy.size(1);
  const bool unit_columns = (K <= 1 || x.stride(1) == 1) && (N <= 1 || dy.stride(1) == 1);
  const bool dense_outputs = dw.is_contiguous() && (!db.defined() || db.is_contiguous());
  const bool dtypes = dw.dtype() == x.dtype() && dy.dtype() == x.dtype() && (!db.defined() || db.dtype() == x.dtype());
  return unit_columns && dense_outputs && dtypes && rows > kSkinnyMaxK && skinny_gemm_applies(N, K, rows) &&
         rows >= 2 * std::max(N, K);
}

// The weight and bias gradients of several Linear layers of one x [rows, K] (linear's and
// linears', ops/kernels/matmul.h): dWᵢ [Nᵢ, K] = dyᵢᵀ · x on the skinny kernel, and each bias's
// column sums of dyᵢ taken K chunk by K chunk, right after the skinny kernel has read that chunk
// of dyᵢ (from L2, not memory: a separate sum_to is one more pass over every Linear's output
// gradient). The layers run chunk by chunk, so each chunk of x is read from memory once for all
// of them. Fused only where gemm_cpu would itself run every dyᵢᵀ · x on the skinny kernel with a
// long contraction; the split over threads is then gemm_cpu's (the same K ranges, the same
// chunks, partial sums added in the same order), so each dWᵢ has the GEMM's bits. An undefined
// dbᵢ: no sums for that layer.
bool linears_weight_grad_cpu(const TensorList& dws, const TensorList& dbs, const Tensor& x, const TensorList& dys) {
  LSF_CHECK(!dws.empty() && dbs.size() == dws.size() && dys.size() == dws.size() && x.dim() == 2)
      << "linears backward: expected one dweight, dbias and dy per layer and a 2-D x, got " << dws.size() << ", "
      << dbs.size() << " and " << dys.size() << ", x " << x.shape();
  for (size_t i = 0; i < dws.size(); ++i) {
    const Tensor &dw = dws[i], &db = dbs[i], &dy = dys[i];
    LSF_CHECK(dw.dim() == 2 && dy.dim() == 2 && x.size(0) == dy.size(0) && dw.size(0) == dy.size(1) &&
              dw.size(1) == x.size(1) && (!db.defined() || (db.dim() == 1 && db.size(0) == dy.size(1))))
        << "linear backward: shapes dweight " << dw.shape() << ", dbias " << (db.defined() ? db.shape() : Shape{})
        << ", x " << x.shape() << ", dy " << dy.shape() << " do not match";
    if (!weight_grad_fuses(dw, db, x, dy)) return false;
  }
  const int64_t rows = x.size(0), K = x.size(1), layers = int64_t(dws.size());
  if (bf16_operands({&x}) && bf16_operands(dys))  // gemm_cpu's bf16 kernel instead, where it pays
    for (const Tensor& dy : dys)
      if (gemm_bf16_pays(dy.size(1), K, rows)) return false;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, rows / kMinSplitK));
  // Per part, every layer's dW buffer and column sums, at these offsets.
  std::vector<int64_t> dw_at(size_t(layers) + 1, 0), sums_at(size_t(layers) + 1, 0);
  for (int64_t i = 0; i < layers; ++i) {
    dw_at[size_t(i + 1)] = dw_at[size_t(i)] + dys[size_t(i)].size(1) * K;
    sums_at[size_t(i + 1)] = sums_at[size_t(i)] + dys[size_t(i)].size(1);
  }
  const int64_t part_dw = dw_at.back(), part_sums = sums_at.back();
  dispatch_float(x.dtype(), "linear backward", [&]<typename T>() {
    const T* X = x.data_ptr<T>();
    const int64_t ldx = x.stride(0);
    std::vector<double> sums(size_t(parts * part_sums), 0.0);
    const CpuScratch<T> storage(parts > 1 ? size_t(parts * part_dw) : 0);  // as gemm_cpu's partial sums
    T* const partial = storage.data();  // the parts' dW buffers
    // Part t: rows [r0, r1) into its dW buffers (beta 0 on its first chunk) and column sums.
    auto part = [&](int64_t t) {
      const int64_t r0 = rows * t / parts, r1 = rows * (t + 1) / parts;
      for (int64_t k0 = r0; k0 < r1; k0 += kSkinnyMaxK) {
        const int64_t k1 = std::min(r1, k0 + kSkinnyMaxK);
        for (int64_t i = 0; i < layers; ++i) {
          const Tensor& dy = dys[size_t(i)];
          const T* DY = dy.data_ptr<T>();
          const int64_t N = dy.size(1), ldy = dy.stride(0);
          T* dw = parts == 1 ? dws[size_t(i)].data_ptr<T>() : partial + t * part_dw + dw_at[size_t(i)];
          skinny_gemm(true, false, N, K, k1 - k0, T(1), DY + k0 * ldy, ldy, X + k0 * ldx, ldx, k0 == r0 ? T(0) : T(1),
                      dw, K);
          if (dbs[size_t(i)].defined())
            add_column_sums(sums.data() + t * part_sums + sums_at[size_t(i)], DY, ldy, k0, k1, N);
        }
      }
    };
    if (parts == 1) {
      part(0);
    } else {
      RegionErrors errors;  // part(t) runs the skinny kernel, whose argument checks may throw
#pragma omp parallel for schedule(static)
      for (int64_t t = 0; t < parts; ++t) errors.run([&] { part(t); });
      errors.rethrow();
#pragma omp parallel if (part_dw * parts >= 32768)
      for (int64_t i = 0; i < layers; ++i) {
        T* DW = dws[size_t(i)].data_ptr<T>();
        const T* layer_partial = partial + dw_at[size_t(i)];
#pragma omp for schedule(static)
        for (int64_t e = 0; e < dw_at[size_t(i + 1)] - dw_at[size_t(i)]; ++e) {
          T sum = 0;
          for (int64_t t = 0; t < parts; ++t) sum += layer_partial[t * part_dw + e];
          DW[e] = sum;
        }
      }
    }
    for (int64_t i = 0; i < layers; ++i) {
      if (!dbs[size_t(i)].defined()) continue;
      T* DB = dbs[size_t(i)].data_ptr<T>();
      for (int64_t j = 0; j < dys[size_t(i)].size(1); ++j) {
        double sum = 0;
        for (int64_t t = 0; t < parts; ++t) sum += sums[size_t(t * part_sums + sums_at[size_t(i)] + j)];
        DB[j] = T(sum);
      }
    }
  });
  return true;
}

// linear's weight and bias gradients (ops/kernels/matmul.h): the one-layer case of the above.
bool linear_weight_grad_cpu(const Tensor& dw, const Tensor& db, const Tensor& x, const Tensor& dy) {
  LSF_CHECK(db.defined() && db.dim() == 1 && x.dim() == 2 && dy.dim() == 2)
      << "linear backward: shapes dweight " << dw.shape() << ", dbias " << (db.defined() ? db.shape() : Shape{})
      << ", x " << x.shape() << ", dy " << dy.shape() << " do not match";
  return linears_weight_grad_cpu({dw}, {db}, x, {dy});
}

// linears' forward (ops/kernels/matmul.h): every yᵢ = x · Wᵢᵀ + bᵢ on the skinny kernel in one
// K chunk, as linear_forward_cpu (with a bias) and gemm_cpu (without) run each, grouped.
bool linears_forward_cpu(const TensorList& ys, const Tensor& x, const TensorList& weights, const TensorList& biases) {
  LSF_CHECK(!ys.empty() && weights.size() == ys.size() && biases.size() == ys.size() && x.dim() == 2)
      << "linears: expected one output, weight and bias per layer and a 2-D x, got " << ys.size() << ", "
      << weights.size() << " and " << biases.size() << ", x " << x.shape();
  const int64_t M = x.size(0), K = x.size(1);
  for (size_t i = 0; i < ys.size(); ++i) {
    const Tensor &y = ys[i], &w = weights[i], &b = biases[i];
    LSF_CHECK(y.dim() == 2 && w.dim() == 2 && y.size(0) == M && w.size(1) == K && w.size(0) == y.size(1) &&
              (!b.defined() || (b.dim() == 1 && b.size(0) == y.size(1))))
        << "linears: shapes y " << y.shape() << " = x " << x.shape() << " · weightᵀ " << w.shape() << " + bias "
        << (b.defined() ? b.shape() : Shape{}) << " do not match";
    const bool dtypes = y.dtype() == x.dtype() && w.dtype() == x.dtype() && (!b.defined() || b.dtype() == x.dtype());
    const bool layouts = y.is_contiguous() && (!b.defined() || b.is_contiguous()) && is_gemm_operand(w) &&
                         (K <= 1 || x.stride(1) == 1);
    if (!dtypes || !layouts || K > kSkinnyMaxK || !skinny_gemm_applies(M, y.size(1), K)) return false;
  }
  if (bf16_operands({&x}) && bf16_operands(weights))  // gemm_cpu's bf16 kernel instead, where it pays
    for (const Tensor& y : ys)
      if (gemm_bf16_pays(M, y.size(1), K)) return false;
  dispatch_float(x.dtype(), "linears", [&]<typename T>() {
    std::vector<SkinnyProduct<T>> products;
    for (size_t i = 0; i < ys.size(); ++i) {
      const WeightOperand op = transposed_weight(weights[i]);
      SkinnyProduct<T> p;
      p.tb = op.tb;
      p.n = ys[i].size(1);
      p.k = K;
      p.a = x.data_ptr<T>();
      p.lda = x.stride(0);
      p.b = weights[i].data_ptr<T>();
      p.ldb = op.ldb;
      p.c = ys[i].data_ptr<T>();
      p.ldc = p.n;
      p.bias = biases[i].defined() ? biases[i].data_ptr<T>() : nullptr;
      products.push_back(p);
    }
    skinny_gemm_group(M, products);
  });
  return true;
}

// linears' input gradient (ops/kernels/matmul.h): dx = Σᵢ dyᵢ · Wᵢ on the skinny kernel, the
// products gemm_cpu runs for each layer (beta 0 for the first, 1 after), grouped.
bool linears_input_grad_cpu(const Tensor& dx, const TensorList& dys, const TensorList& weights) {
  LSF_CHECK(!dys.empty() && weights.size() == dys.size() && dx.dim() == 2)
      << "linears backward: expected one dy per weight and a 2-D dx, got " << dys.size() << " and " << weights.size()
      << ", dx " << dx.shape();
  const int64_t M = dx.size(0), K = dx.size(1);
  for (size_t i = 0; i < dys.size(); ++i) {
    const Tensor &dy = dys[i], &w = weights[i];
    LSF_CHECK(dy.dim() == 2 && w.dim() == 2 && dy.size(0) == M && w.size(1) == K && w.size(0) == dy.size(1))
        << "linears backward: shapes dx " << dx.shape() << " = dy " << dy.shape() << " · weight " << w.shape()
        << " do not match";
    const int64_t N = dy.size(1);
    const bool dtypes = dy.dtype() == dx.dtype() && w.dtype() == dx.dtype();
    const bool layouts = (K <= 1 || dx.stride(1) == 1) && (N <= 1 || dy.stride(1) == 1) && is_gemm_operand(w);
    if (!dtypes || !layouts || N > kSkinnyMaxK || !skinny_gemm_applies(M, K, N)) return false;
  }
  if (bf16_operands(dys) && bf16_operands(weights))  // gemm_cpu's bf16 kernel instead, where it pays
    for (const Tensor& dy : dys)
      if (gemm_bf16_pays(M, K, dy.size(1))) return false;
  dispatch_float(dx.dtype(), "linears backward", [&]<typename T>() {
    std::vector<SkinnyProduct<T>> products;
    for (size_t i = 0; i < dys.size(); ++i) {
      const WeightOperand op = transposed_weight(weights[i]);
      SkinnyProduct<T> p;
      p.tb = !op.tb;  // b = W itself: b(k, j) = W[k, j]
      p.n = K;
      p.k = dys[i].size(1);
      p.a = dys[i].data_ptr<T>();
      p.lda = dys[i].stride(0);
      p.b = weights[i].data_ptr<T>();
      p.ldb = op.ldb;
      p.beta = i == 0 ? T(0) : T(1);
      p.c = dx.data_ptr<T>();
      p.ldc = dx.stride(0);
      products.push_back(p);
    }
    skinny_gemm_group(M, products);
  });
  return true;
}

}  // namespace

LSF_REGISTER_KERNEL(gemm_kernel, DeviceType::CPU, gemm_cpu);
LSF_REGISTER_KERNEL(linear_forward_kernel, DeviceType::CPU, linear_forward_cpu);
LSF_REGISTER_KERNEL(linear_weight_grad_kernel, DeviceType::CPU, linear_weight_grad_cpu);
LSF_REGISTER_KERNEL(linears_forward_kernel, DeviceType::CPU, linears_forward_cpu);
LSF_REGISTER_KERNEL(linears_input_grad_kernel, DeviceType::CPU, linears_input_grad_cpu);
LSF_REGISTER_KERNEL(linears_weight_grad_kernel, DeviceType::CPU, linears_weight_grad_cpu);

}  // namespace lsf::cpu
