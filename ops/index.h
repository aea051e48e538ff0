// Selection by mask and by index: masked_fill, where, gather, index_select, with PyTorch
// semantics, and the kernels behind them (scatter_add and index_add are the transposes that
// the backward passes of gather and index_select use).
//
// Index tensors are never wrapped: an index outside [0, size) is an lsf::Error naming the op,
// the index value and the size (the backends check before touching memory). The accumulating
// kernels are deterministic: each output element is summed by one thread in index order.
#pragma once

#include "lsformer/engine/tensor.h"

namespace lsf {

// x where mask is false, value where it is true. mask is bool and broadcasts to x's shape (the
// result has x's shape); value must be representable in x's dtype (±inf for attention masks).
// Gradient: dout with the masked positions zeroed.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// condition ? a : b with condition (bool), a and b broadcast together; a and b share a dtype.
// Gradients: dout where condition (to a), elsewhere (to b), each summed back to its shape.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
// out[i][j][k] = x[i][index[i][j][k]][k] for dim 1. index is i64 with x's rank, and
// index.size(d) ≤ x.size(d) for d ≠ dim; out has index's shape. Repeated indices are allowed:
// their gradients add up.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// The slices of x along dim listed by a 1-D index (i64 or i32; repeats allowed).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);

}  // namespace lsf
