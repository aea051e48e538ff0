// CPU reductions. The reduced dims are brought innermost (a copy only when they are not
// already), so every reduction is a set of independent contiguous rows; reducing the leading
// dims of a contiguous tensor (bias gradients) instead accumulates whole rows, which
// vectorises over the kept dims.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/kernels/reduce.h"

namespace lsf::cpu {
namespace {

// f64 accumulation for floats, i64 for integers.
template <typename T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  return false;
}

template <typename T>
T extremum_of(const T* row, int64_t n, bool is_max) {
  T best = row[0];
  for (int64_t i = 1; i < n; ++i) {
    T v = row[i];
    if (is_nan(best)) break;  // NaN propagates
    if (is_nan(v) || (is_max ? v > best : v < best)) best = v;
  }
  return best;
}

// x viewed as [rows, n] contiguous; out has `rows` elements.
template <typename T, typename O>
void reduce_rows(ReduceOp op, O* out, const T* x, int64_t rows, int64_t n) {
  auto one_row = [&](int64_t r) {
    const T* row = x + r * n;
    if (op == ReduceOp::Sum) {
      Acc<T> acc = 0;
      for (int64_t i = 0; i < n; ++i) acc += Acc<T>(row[i]);
      out[r] = O(acc);
    } else {
      out[r] = O(extremum_of(row, n, op == ReduceOp::Max));
    }
  };
  if (rows == 1 && n >= 2 * kParallelGrain && op == ReduceOp::Sum) {
    Acc<T> acc = 0;
#pragma omp parallel for reduction(+ : acc) schedule(static)
    for (int64_t i = 0; i < n; ++i) acc += Acc<T>(x[i]);
    out[0] = O(acc);
    return;
  }
#pragma omp parallel for schedule(static) if (rows * n >= kParallelGrain && rows > 1)
  for (int64_t r = 0; r < rows; ++r) one_row(r);
}

// x viewed as [outer, inner] contiguous, reduced over `outer`. A task owns a block of whole
// columns and walks every row in order, so each column's sum has one order whatever the split.
// Blocks are as wide as splitting the columns over the threads allows (kLeadingMinBlock …
// kLeadingMaxBlock accumulators, in L1): each row's slice is then one long contiguous run the
// prefetchers stream. With fixed 64-column blocks, 256-byte pieces a row apart, the bias
// gradients of a 512-wide layer grew 3.6× per doubling of rows once x no longer fit in cache.
constexpr int64_t kLeadingMinBlock = 64, kLeadingMaxBlock = 1024;

// Too few columns to give every thread a block (a 64-wide bias gradient over 16 384 rows):
// rows in fixed chunks of kLeadingRowChunk, each reduced over all columns in parallel, then the
// chunk results combined in chunk order. The chunk size, not the thread count, fixes the order
// of every sum, so results do not depend on the threads.
constexpr int64_t kLeadingRowChunk = 1024;

// Folds v into a running max (min): a NaN best stays NaN, a NaN v is taken (NaN propagates).
template <typename T>
inline void keep_extremum(T& best, T v, bool is_max) {
  if (!is_nan(best) && (is_nan(v) || (is_max ? v > best : v < best))) best = v;
}

// Rows [i0, i1) of columns [j0, j1) of x [*, inner], row by row (each row's slice one
// contiguous run): added into acc, or folded into best (which starts as row i0).
template <typename T>
void sum_rows(const T* x, int64_t inner, int64_t i0, int64_t i1, int64_t j0, int64_t j1, Acc<T>* acc) {
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j) acc[j - j0] += Acc<T>(x[i * inner + j]);
}
template <typename T>
void extremum_rows(const T* x, int64_t inner, int64_t i0, int64_t i1, int64_t j0, int64_t j1, bool is_max, T* best) {
  for (int64_t j = j0; j < j1; ++j) best[j - j0] = x[i0 * inner + j];
  for (int64_t i = i0 + 1; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j) keep_extremum(best[j - j0], x[i * inner + j], is_max);
}

template <typename T, typename O>
void reduce_leading_row_chunks(ReduceOp op, O* out, const T* x, int64_t outer, int64_t inner) {
  const int64_t chunks = (outer + kLeadingRowChunk - 1) / kLeadingRowChunk;
  auto rows_of = [&](int64_t c) { return std::pair{c * kLeadingRowChunk, std::min(outer, (c + 1) * kLeadingRowChunk)}; };
  const bool is_max = op == ReduceOp::Max;
  if (op == ReduceOp::Sum) {
    std::vector<Acc<T>> partial(size_t(chunks * inner), Acc<T>(0));
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const auto [i0, i1] = rows_of(c);
      sum_rows(x, inner, i0, i1, 0, inner, partial.data() + c * inner);
    }
    for (int64_t j = 0; j < inner; ++j) {
      Acc<T> sum = 0;
      for (int64_t c = 0; c < chunks; ++c) sum += partial[size_t(c * inner + j)];
      out[j] = O(sum);
    }
    return;
  }
  std::vector<T> partial(size_t(chunks * inner));
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const auto [i0, i1] = rows_of(c);
    extremum_rows(x, inner, i0, i1, 0, inner, is_max, partial.data() + c * inner);
  }
  for (int64_t j = 0; j < inner; ++j) {
    T best = partial[size_t(j)];
    for (int64_t c = 1; c < chunks; ++c) keep_extremum(best, partial[size_t(c * inner + j)], is_max);
    out[j] = O(best);
  }
}

template <typename T, typename O>
void reduce_leading(ReduceOp op, O* out, const T* x, int64_t outer, int64_t inner) {
  if (outer * inner >= kParallelGrain && inner < 2 * kLeadingMinBlock && outer >= 2 * kLeadingRowChunk &&
      !omp_in_parallel() && omp_get_max_threads() > 1) {
    reduce_leading_row_chunks<T, O>(op, out, x, outer, inner);
    return;
  }
  const bool parallel = outer * inner >= kParallelGrain && inner >= 2 * kLeadingMinBlock && !omp_in_parallel();
  const int64_t parts = parallel ? omp_get_max_threads() : 1;
  const int64_t block = std::clamp((inner + parts - 1) / parts, kLeadingMinBlock, kLeadingMaxBlock);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t j0 = 0; j0 < inner; j0 += block) {
    const int64_t j1 = std::min(inner, j0 + block);
    if (op == ReduceOp::Sum) {
      Acc<T> acc[kLeadingMaxBlock] = {};
      sum_rows(x, inner, 0, outer, j0, j1, acc);
      for (int64_t j = j0; j < j1; ++j) out[j] = O(acc[j - j0]);
    } else {
      T best[kLeadingMaxBlock];
      extremum_rows(x, inner, 0, outer, j0, j1, op == ReduceOp::Max, best);
      for (int64_t j = j0; j < j1; ++j) out[j] = O(best[j - j0]);
    }
  }
}

void reduce(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<bool>& mask) {
  const int64_t nd = x.dim();
  // Kept dims first, reduced dims last.
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < nd; ++d)
    if (!mask[d]) perm.push_back(d);
  const size_t kept = perm.size();
  for (int64_t d = 0; d < nd; ++d)
    if (mask[d]) perm.push_back(d);
  int64_t rows = 1, n = 1;
  for (int64_t d = 0; d < nd; ++d) (mask[d] ? n : rows) *= x.shape()[d];

  // Are the reduced dims exactly the leading ones of a contiguous tensor?
  bool leading = x.is_contiguous() && kept < perm.size();
  for (size_t i = 0; i < perm.size() - kept && leading; ++i) leading = mask[i];

  dispatch_numeric(x.dtype() == kBool ? kU8 : x.dtype(), "reduce", [&]<typename T>() {
    dispatch_numeric(out.dtype() == kBool ? kU8 : out.dtype(), "reduce", [&]<typename O>() {
      O* o = static_cast<O*>(out.raw_data());
      if (leading && kept > 0) {
        reduce_leading<T, O>(op, o, static_cast<const T*>(x.raw_data()), n, rows);
        return;
      }
      Tensor rowwise = x.detach().permute(perm);
      if (!rowwise.is_contiguous()) rowwise = rowwise.clone();
      reduce_rows<T, O>(op, o, static_cast<const T*>(rowwise.raw_data()), rows, n);
    });
  });
}

void arg_reduce(bool is_max, const Tensor& indices, const Tensor& x, int64_t dim) {
  Tensor rowwise = x.detach().transpose(dim, -1);
  if (!rowwise.is_contiguous()) rowwise = rowwise.clone();
  // indices is x's shape with `dim` = 1; its element order matches rowwise's rows only after
  // the same transpose, so write through a transposed view.
  Tensor idx_view = indices.transpose(dim, -1);
  const int64_t n = x.shape()[dim];
  const int64_t rows = x.numel() / std::max<int64_t>(n, 1);
  Tensor packed = idx_view.is_contiguous() ? idx_view : empty(idx_view.shape(), indices.options());
  dispatch_numeric(x.dtype(), is_max ? "argmax" : "argmin", [&]<typename T>() {
    const T* px = static_cast<const T*>(rowwise.raw_data());
    int64_t* pi = static_cast<int64_t*>(packed.raw_data());
#pragma omp parallel for schedule(static) if (rows * n >= kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = px + r * n;
      int64_t best = 0;
      for (int64_t i = 1; i < n && !is_nan(row[best]); ++i)
        if (is_nan(row[i]) || (is_max ? row[i] > row[best] : row[i] < row[best])) best = i;
      pi[r] = best;
    }
  });
  if (!packed.is_same(idx_view)) {
    map<int64_t, int64_t>(idx_view, [](int64_t v) { return v; }, packed);
  }
}

}  // namespace

LSF_REGISTER_KERNEL(reduce_kernel, DeviceType::CPU, reduce);
LSF_REGISTER_KERNEL(arg_reduce_kernel, DeviceType::CPU, arg_reduce);

}  // namespace lsf::cpu
