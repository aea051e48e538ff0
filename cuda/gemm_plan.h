// How the CUDA gemm_kernel (cuda/matmul.cu) turns the contract of ops/matmul.h into cuBLAS
// strided-batched calls. CUDA-free, so a CPU test (tests/test_cuda_alloc_bins.cpp) can run
// the plan through a reference column-major GEMM and compare it with the CPU kernel.
//
// Plan (steps 1–3 are ops/kernels/gemm_problem.h's, shared with the CPU kernel; then cuBLAS's own shape):
//  1. Each operand is a matrix (rows, cols, element strides) plus one stride per batch dim;
//     size-1 batch dims are dropped.
//  2. Batch dims fold into M, N or K when the strides allow (same rules as the CPU): one large
//     GEMM instead of a batch of small ones, and summed-over dims become contraction.
//  3. If c is column-major, compute cᵀ = bᵀ·aᵀ, so c is always row-major with ldc = its row
//     stride. A row-major product C = A·B is cuBLAS's column-major Cᵀ = Bᵀ·Aᵀ: m = N,
//     n = M, operand order swapped, each transpose flag read from the operand's strides.
//  4. Batch dims where c has a nonzero stride are "output" dims; the largest becomes cuBLAS's
//     batch (any strides, 0 for a broadcast operand), the others a host loop. Dims where c has
//     stride 0 are summed: one call per index, in order, the first with the caller's beta and
//     the rest accumulating (beta = 1), all on one stream, so no two calls race on c.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

#include "lsformer/engine/error.h"
#include "lsformer/engine/tensor.h"
#include "lsformer/ops/kernels/gemm_problem.h"

namespace lsf::cuda::gemm_plan {

// One cuBLAS column-major strided-batched GEMM; a, b, c are element offsets from the data
// pointers of the kernel's a, b and c tensors (a and b may have been swapped: a_is_b says so).
struct Call {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  bool a_is_b = false;  // cuBLAS's A operand reads the tensor b (and its B reads a)
  int64_t a = 0, lda = 0, stride_a = 0;
  int64_t b = 0, ldb = 0, stride_b = 0;
  int64_t c = 0, ldc = 0, stride_c = 0;
  int64_t batch = 1;
  bool accumulate = false;  // beta = 1 instead of the caller's beta
};

struct Plan {
  int64_t M = 0, N = 0, K = 0;
  std::vector<Call> calls;  // empty when K == 0: then c = beta·c
};

namespace detail {

// Which tensor an operand reads (a and b swap places when the problem is transposed).
struct Which {
  bool is_b = false;
};
using Operand = gemm::Operand<Which>;
using Problem = gemm::Problem<Which>;
using gemm::Layout;

}  // namespace detail

// The calls for c [*, M, N] = a [*, M, K] · b [*, K, N] (shapes already checked to match;
// strides in elements). Throws lsf::Error for operands cuBLAS cannot read in place.
inline Plan make_plan(const Shape& c_shape, const Strides& a_strides, const Strides& b_strides,
                      const Strides& c_strides, int64_t K) {
  using namespace detail;
  const size_t nd = c_shape.size();
  Problem p;
  p.M = c_shape[nd - 2];
  p.N = c_shape[nd - 1];
  p.K = K;
  p.batch.assign(c_shape.begin(), c_shape.end() - 2);
  auto describe = [&](Operand& o, const Strides& s, bool is_b) {
    o.rs = s[nd - 2];
    o.cs = s[nd - 1];
    o.batch.assign(s.begin(), s.end() - 2);
    o.ref.is_b = is_b;
  };
  describe(p.a, a_strides, false);
  describe(p.b, b_strides, true);
  describe(p.c, c_strides, false);
  const gemm::Layouts layouts = gemm::checked_layouts(p, "cuBLAS");
  const Layout &la = layouts.a, &lb = layouts.b, &lc = layouts.c;
  Plan plan;
  plan.M = p.M;
  plan.N = p.N;
  plan.K = p.K;
  if (p.K == 0) return plan;

  // Output dims (c stride ≠ 0): the largest is cuBLAS's batch; reduction dims (c stride 0).
  std::vector<size_t> loop_dims, red_dims;
  int64_t batch_dim = -1;
  for (size_t d = 0; d < p.batch.size(); ++d) {
    if (p.c.batch[d] == 0) {
      red_dims.push_back(d);
    } else if (batch_dim < 0 || p.batch[d] > p.batch[size_t(batch_dim)]) {
      if (batch_dim >= 0) loop_dims.push_back(size_t(batch_dim));
      batch_dim = int64_t(d);
    } else {
      loop_dims.push_back(d);
    }
  }
  const int64_t batch = batch_dim < 0 ? 1 : p.batch[size_t(batch_dim)];
  LSF_CHECK(batch <= INT_MAX) << "gemm: batch " << batch << " exceeds cuBLAS's 32-bit integer range";
  auto bstride = [&](const Operand& o) { return batch_dim < 0 ? int64_t(0) : o.batch[size_t(batch_dim)]; };

  // Loop dims (outer) then reduction dims (inner), last dim fastest.
  std::vector<size_t> dims = loop_dims;
  dims.insert(dims.end(), red_dims.begin(), red_dims.end());
  int64_t red_count = 1;
  for (size_t d : red_dims) red_count *= p.batch[d];
  const gemm::BatchOffsets offsets = gemm::batch_offsets(p, dims);
  plan.calls.reserve(size_t(offsets.size()));
  for (int64_t i = 0; i < offsets.size(); ++i) {
    // Row-major C = A·B as column-major Cᵀ = Bᵀ·Aᵀ.
    Call call;
    call.m = p.N;
    call.n = p.M;
    call.k = p.K;
    call.trans_a = lb.trans;
    call.trans_b = la.trans;
    call.a_is_b = p.b.ref.is_b;
    call.a = offsets.b[size_t(i)];
    call.lda = lb.ld;
    call.stride_a = bstride(p.b);
    call.b = offsets.a[size_t(i)];
    call.ldb = la.ld;
    call.stride_b = bstride(p.a);
    call.c = offsets.c[size_t(i)];
    call.ldc = lc.ld;
    call.stride_c = bstride(p.c);
    call.batch = batch;
    call.accumulate = i % red_count != 0;
    plan.calls.push_back(call);
  }
  return plan;
}

}  // namespace lsf::cuda::gemm_plan
