// Matrix products on OpenBLAS (sgemm/dgemm on the CPU): matmul with PyTorch's rules (1-D,
// 2-D, batched, broadcast batch dims) and bmm ([B, n, k] × [B, k, m]).
//
// Dimension legend: M rows of the result, N its columns, K the contracted length; leading
// dims are batch dims. Both ops accept f32 and f64 (one dtype, one device); integer dtypes are
// not supported (BLAS has no integer GEMM), and say so.
//
// No copies around BLAS: a matrix whose last two dims have unit stride in either is handed to
// BLAS as is, with the transpose flag read from its strides; a broadcast batch dim is a zero
// stride, never a materialised expand. Only a matrix with unit stride in neither of its last
// two dims (or an expanded one) is made contiguous first.
#pragma once

#include "engine/dispatch.h"
#include "engine/tensor.h"

namespace lsf {

// c[i] = alpha · a[i] · b[i] + beta · c[i] over the batch index i (accumulation is explicit in
// beta: 0 overwrites c, 1 adds to it).
//   a [*, M, K], b [*, K, N], c [*, M, N]: equal ranks (≥ 2) and equal batch sizes *.
//   a and b: each matrix has unit stride in its last or second-to-last dim (gemm_operand
//     makes that so); batch strides are arbitrary, 0 broadcasting one matrix over the batch.
//   c: each matrix has unit stride in one of its last two dims; a batch dim where c has
//     stride 0 is a reduction: the products along it are summed into the one c matrix
//     (how the backward of a broadcast operand sums over the broadcast dims without a
//     temporary). c must not overlap a or b.
// The CPU kernel folds batch dims into M, N or K when the strides allow (a [B, T, K] × a
// broadcast [K, N] becomes one [B·T, K] × [K, N] GEMM), then runs large GEMMs one after the
// other on OpenBLAS's threads and small ones in an OpenMP loop over the batch.
LSF_DECLARE_KERNEL(gemm_kernel, void(const Tensor& c, const Tensor& a, const Tensor& b, double alpha, double beta));

// True when the last two dims of t (≥ 2-D) are a matrix BLAS can read in place: unit stride in
// one of them, and a leading dimension that covers the other.
bool is_gemm_operand(const Tensor& t);
// t itself when is_gemm_operand(t), else t.contiguous() (not recorded by autograd).
Tensor gemm_operand(const Tensor& t);

// torch.matmul: 1-D · 1-D is a dot product (0-d result); a 1-D left operand is a row vector
// and a 1-D right operand a column vector, the added dim removed from the result; otherwise
// the last two dims are matrices and the leading dims broadcast
// ([2, 1, 3, 4] · [5, 4, 6] → [2, 5, 3, 6]).
Tensor matmul(const Tensor& a, const Tensor& b);
// torch.bmm: a [B, M, K] · b [B, K, N] → [B, M, N]; no broadcasting.
Tensor bmm(const Tensor& a, const Tensor& b);

}  // namespace lsf
