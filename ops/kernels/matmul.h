// Internal (not installed): the kernel table entries of the matrix products (ops/matmul.h): the batched GEMM
// every backend implements, and the operand rule its callers follow.
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/matmul.h"

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

// y [M, N] = x [M, K] · weightᵀ + bias, weight [N, K], bias [N] broadcast over the rows (the
// forward of linear, ops/matmul.h). y contiguous and not overlapping the inputs; x with unit
// column stride (any row stride ≥ K); weight a gemm operand (row- or column-major); bias
// contiguous. The bias is part of the product's store, not a second pass over y. A backend
// without it marks it unsupported and linear runs matmul + add there.
LSF_DECLARE_KERNEL(linear_forward_kernel, void(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias));

// The weight and bias gradients of linear in one pass over dy: dweight [N, K] = dyᵀ · x (row-major,
// as a row-major weight) and dbias [N] = Σ over the rows of dy, from x [rows, K] and dy [rows, N]
// (unit column strides, any row strides). Returns false, having written nothing, for the shapes
// a backend does not fuse; the caller then runs the GEMM and sum_to. The CPU fuses the products
// its skinny kernel takes with a long contraction (K, N ≤ 256 and more rows than one K chunk):
// dweight is then the GEMM's bits, and dbias, summed in f64 as sum_to does, within one f32
// rounding of sum_to's.
LSF_DECLARE_KERNEL(linear_weight_grad_kernel,
                   bool(const Tensor& dweight, const Tensor& dbias, const Tensor& x, const Tensor& dy));

// The products of one x through several Linear layers (linears, ops/matmul.h) run together.
// Each returns false, having written nothing, where the backend does not group them; the caller
// then runs each layer's own kernels. The CPU groups them when its skinny kernel takes every
// product (ops/cpu/skinny_gemm.h), running them row block by row block so that x (forward,
// weight gradients) and x's gradient (input gradient) pass through memory once for all the
// layers instead of once per layer; every result has the bits of the layer's own kernels.
//   ys[i] [M, N_i] = x [M, K] · weights[i]ᵀ + biases[i] (undefined: no bias); ys contiguous, x
//     with unit column stride, weights gemm operands, biases contiguous.
LSF_DECLARE_KERNEL(linears_forward_kernel,
                   bool(const TensorList& ys, const Tensor& x, const TensorList& weights, const TensorList& biases));
//   dx [M, K] = Σᵢ dys[i] [M, N_i] · weights[i] [N_i, K], summed in list order (the first
//     product overwrites dx); dx and dys with unit column strides.
LSF_DECLARE_KERNEL(linears_input_grad_kernel, bool(const Tensor& dx, const TensorList& dys, const TensorList& weights));
//   dweights[i] [N_i, K] = dys[i]ᵀ · x (contiguous) and dbiases[i] [N_i] = Σ over the rows of
//     dys[i] (undefined: not wanted), as linear_weight_grad_kernel computes each.
LSF_DECLARE_KERNEL(linears_weight_grad_kernel, bool(const TensorList& dweights, const TensorList& dbiases,
                                                    const Tensor& x, const TensorList& dys));

// True when the last two dims of t (≥ 2-D) are a matrix BLAS can read in place: unit stride in
// one of them, and a leading dimension that covers the other.
bool is_gemm_operand(const Tensor& t);
// t itself when is_gemm_operand(t), else t.contiguous() (not recorded by autograd).
Tensor gemm_operand(const Tensor& t);

}  // namespace lsf
