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

#include "lsformer/engine/tensor.h"

namespace lsf {

// torch.matmul: 1-D · 1-D is a dot product (0-d result); a 1-D left operand is a row vector
// and a 1-D right operand a column vector, the added dim removed from the result; otherwise
// the last two dims are matrices and the leading dims broadcast
// ([2, 1, 3, 4] · [5, 4, 6] → [2, 5, 3, 6]).
Tensor matmul(const Tensor& a, const Tensor& b);
// torch.bmm: a [B, M, K] · b [B, K, N] → [B, M, N]; no broadcasting.
Tensor bmm(const Tensor& a, const Tensor& b);
// torch.nn.functional.linear: x [*, K] · weightᵀ + bias → [*, N], weight [N, K], bias [N] or
// undefined (then matmul(x, weight.t())). The bias is added as the product is stored instead of
// in a second pass over the output (a Linear layer's add). Values: on the skinny kernel's
// products (K, N ≤ 256) bit for bit those of add(matmul(x, weight.t()), bias); on OpenBLAS's the
// product is summed onto the bias, equal to them up to rounding (a few ulp of the sum's
// magnitude). Gradients are those of the composition (the same GEMMs, the bias's by sum_to),
// except where the CPU takes the weight and bias gradients in one pass over dy (a long
// contraction on the skinny kernel: the weight's bits unchanged, the bias's an f64 sum as
// sum_to's, possibly added in another order: within one f32 rounding).
// An x whose leading dims do not fold into one row index without a copy, and a device without
// the fused kernel (CUDA), run the composition.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
// Several Linear layers of one input (an attention's query, key and value projections of x):
// out[i] = linear(x, weights[i], biases[i]) (biases[i] may be undefined), each bit for bit
// linear's. The difference is x's gradient Σᵢ dyᵢ · weights[i]: one buffer that every layer's
// product is summed onto as it is stored, instead of one product per layer that autograd then
// adds up (each extra layer saves writing and re-reading an x-sized gradient). The weight and
// bias gradients are linear's. Values equal the separate layers' up to the order of that sum.
TensorList linears(const Tensor& x, const TensorList& weights, const TensorList& biases);

}  // namespace lsf
