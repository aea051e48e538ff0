// How a batched product c [*, M, N] = a [*, M, K] · b [*, K, N] given by strides becomes as few
// BLAS calls as possible: the planning the CPU kernel (ops/cpu/matmul.cpp) and the cuBLAS plan
// (cuda/gemm_plan.h) share. CUDA-free and header-only.
//
//  1. Each operand is a matrix (rows, cols, element strides) plus one stride per batch dim.
//  2. fold_batch merges batch dims into the matrices when the strides allow, so one large GEMM
//     replaces a loop of small ones: into M when b is broadcast along the dim and the dim
//     continues a's and c's rows (x [B, T, K] · w [K, N]); into N symmetrically; into K when c
//     is summed along the dim and it continues a's columns and b's rows (the weight gradient
//     xᵀ · dy summed over B). Size-1 batch dims are dropped.
//  3. transpose_problem turns c = a·b into cᵀ = bᵀ·aᵀ, for a column-major c.
//  4. checked_layouts runs 2 and 3 and returns the three BLAS layouts, checked; batch_offsets
//     lists the operands' offsets for every index of the remaining batch dims.
//
// Operand<Ref> carries what a backend needs to find the tensor again (`ref`): a data pointer on
// the CPU, which-tensor-is-it on CUDA. transpose_problem swaps a and b, refs included.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>
#include <vector>

#include "lsformer/engine/tensor.h"

namespace lsf::gemm {

template <typename Ref>
struct Operand {
  Ref ref{};
  int64_t rs = 0, cs = 0;  // element strides of the matrix's rows and columns
  Strides batch;           // element strides of the batch dims
};

template <typename Ref>
struct Problem {
  int64_t M = 0, N = 0, K = 0;
  Shape batch;
  Operand<Ref> a, b, c;  // a [M, K], b [K, N], c [M, N]
};

// A matrix as a row-major BLAS operand: trans when it is stored column-major; ld its leading
// dimension. Sizes ≤ 1 leave a stride free.
struct Layout {
  bool ok = false;
  bool trans = false;
  int64_t ld = 0;
};

inline Layout blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cols <= 1 || cs == 1) {
    int64_t ld = rows <= 1 ? std::max<int64_t>(cols, 1) : rs;
    if (ld >= std::max<int64_t>(cols, 1)) return {true, false, ld};
  }
  if (rows <= 1 || rs == 1) {
    int64_t ld = cols <= 1 ? std::max<int64_t>(rows, 1) : cs;
    if (ld >= std::max<int64_t>(rows, 1)) return {true, true, ld};
  }
  return {};
}

template <typename Ref>
bool layouts_ok(const Problem<Ref>& p) {
  return blas_layout(p.M, p.K, p.a.rs, p.a.cs).ok && blas_layout(p.K, p.N, p.b.rs, p.b.cs).ok &&
         blas_layout(p.M, p.N, p.c.rs, p.c.cs).ok;
}

// Can a batch dim with stride `dstride` extend a matrix axis (size, stride) so that the pair
// (batch index d, axis index i) becomes the single index d·size + i?
inline bool extends(int64_t size, int64_t stride, int64_t dstride) {
  return dstride != 0 && (size == 1 || dstride == stride * size);
}
// The merged axis's stride.
inline int64_t merged_stride(int64_t size, int64_t stride, int64_t dstride) { return size == 1 ? dstride : stride; }

template <typename Ref>
void erase_batch_dim(Problem<Ref>& p, size_t d) {
  p.batch.erase(p.batch.begin() + d);
  for (Operand<Ref>* o : {&p.a, &p.b, &p.c}) o->batch.erase(o->batch.begin() + d);
}

// Step 2: merges batch dims into M, N or K while the strides allow.
template <typename Ref>
void fold_batch(Problem<Ref>& p) {
  for (size_t d = p.batch.size(); d-- > 0;)
    if (p.batch[d] == 1) erase_batch_dim(p, d);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t d = p.batch.size(); d-- > 0;) {
      const int64_t n = p.batch[d], sa = p.a.batch[d], sb = p.b.batch[d], sc = p.c.batch[d];
      Problem<Ref> q = p;
      if (sc == 0 && extends(p.K, p.a.cs, sa) && extends(p.K, p.b.rs, sb)) {
        q.a.cs = merged_stride(p.K, p.a.cs, sa);  // summed over: part of the contraction
        q.b.rs = merged_stride(p.K, p.b.rs, sb);
        q.K *= n;
      } else if (sb == 0 && extends(p.M, p.a.rs, sa) && extends(p.M, p.c.rs, sc)) {
        q.a.rs = merged_stride(p.M, p.a.rs, sa);  // b shared: more rows of a and c
        q.c.rs = merged_stride(p.M, p.c.rs, sc);
        q.M *= n;
      } else if (sa == 0 && extends(p.N, p.b.cs, sb) && extends(p.N, p.c.cs, sc)) {
        q.b.cs = merged_stride(p.N, p.b.cs, sb);  // a shared: more columns of b and c
        q.c.cs = merged_stride(p.N, p.c.cs, sc);
        q.N *= n;
      } else {
        continue;
      }
      erase_batch_dim(q, d);
      if (!layouts_ok(q)) continue;
      p = std::move(q);
      changed = true;
    }
  }
}

// Step 3: cᵀ [N, M] = bᵀ [N, K] · aᵀ [K, M].
template <typename Ref>
void transpose_problem(Problem<Ref>& p) {
  std::swap(p.a, p.b);
  std::swap(p.M, p.N);
  for (Operand<Ref>* o : {&p.a, &p.b, &p.c}) std::swap(o->rs, o->cs);
}

// Steps 2–4: folds the batch dims, makes c row-major, and returns the BLAS layouts of a, b, c.
// Throws lsf::Error (naming `blas`) when an operand is not a matrix BLAS can read in place or
// a size exceeds BLAS's 32-bit integers.
struct Layouts {
  Layout a, b, c;
};
template <typename Ref>
Layouts checked_layouts(Problem<Ref>& p, const char* blas) {
  fold_batch(p);
  if (!blas_layout(p.M, p.N, p.c.rs, p.c.cs).ok || blas_layout(p.M, p.N, p.c.rs, p.c.cs).trans) transpose_problem(p);
  const Layouts l{blas_layout(p.M, p.K, p.a.rs, p.a.cs), blas_layout(p.K, p.N, p.b.rs, p.b.cs),
                  blas_layout(p.M, p.N, p.c.rs, p.c.cs)};
  LSF_CHECK((l.a.ok || p.K == 0) && (l.b.ok || p.K == 0) && l.c.ok && !l.c.trans)
      << "gemm: an operand is not a matrix " << blas << " can read in place (strides a {" << p.a.rs << ", "
      << p.a.cs << "}, b {" << p.b.rs << ", " << p.b.cs << "}, c {" << p.c.rs << ", " << p.c.cs
      << "}); pass gemm_operand(t)";
  const int64_t sizes[] = {p.M, p.N, p.K, l.a.ld, l.b.ld, l.c.ld};
  for (int64_t v : sizes)
    LSF_CHECK(v <= INT_MAX) << "gemm: size " << v << " exceeds " << blas << "'s 32-bit integer range";
  return l;
}

// Element offsets of a, b and c for every index of a set of batch dims (last dim fastest).
struct BatchOffsets {
  std::vector<int64_t> a, b, c;
  int64_t size() const { return int64_t(a.size()); }
};
template <typename Ref>
BatchOffsets batch_offsets(const Problem<Ref>& p, const std::vector<size_t>& dims) {
  BatchOffsets o;
  int64_t count = 1;
  for (size_t d : dims) count *= p.batch[d];
  o.a.reserve(size_t(count));
  o.b.reserve(size_t(count));
  o.c.reserve(size_t(count));
  std::vector<int64_t> index(dims.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t oa = 0, ob = 0, oc = 0;
    for (size_t j = 0; j < dims.size(); ++j) {
      oa += index[j] * p.a.batch[dims[j]];
      ob += index[j] * p.b.batch[dims[j]];
      oc += index[j] * p.c.batch[dims[j]];
    }
    o.a.push_back(oa);
    o.b.push_back(ob);
    o.c.push_back(oc);
    for (size_t j = dims.size(); j-- > 0;) {  // odometer increment, last dim fastest
      if (++index[j] < p.batch[dims[j]]) break;
      index[j] = 0;
    }
  }
  return o;
}

}  // namespace lsf::gemm
