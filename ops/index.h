// Selection by mask and by index: masked_fill, where, gather, index_select, with PyTorch
// semantics, and the kernels behind them (scatter_add and index_add are the transposes that
// the backward passes of gather and index_select use).
//
// Index tensors are never wrapped: an index outside [0, size) is an lsf::Error naming the op,
// the index value and the size (the backends check before touching memory). The accumulating
// kernels are deterministic: each output element is summed by one thread in index order.
#pragma once

#include "engine/dispatch.h"
#include "engine/tensor.h"

namespace lsf {

// out = cond ? a : b elementwise. cond (bool), a, b are already broadcast to out's shape (zero
// strides allowed); any dtype, one for out, a and b; any strides.
LSF_DECLARE_KERNEL(where_kernel, void(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b));
// out = gather(x, dim, index): out[p] = x[p with p[dim] replaced by index[p]].
// index (i64 or i32) has x's rank with index.size(d) ≤ x.size(d) for d ≠ dim; out has index's
// shape; any strides; any dtype. Throws if an index is outside [0, x.size(dim)).
LSF_DECLARE_KERNEL(gather_kernel, void(const Tensor& out, const Tensor& x, const Tensor& index, int64_t dim));
// The transpose of gather: out[p with p[dim] replaced by index[p]] += src[p].
// index and src share a shape with index.size(d) ≤ out.size(d) for d ≠ dim; out's elements
// must not overlap (e.g. contiguous). Accumulates into out (zero it first for a gradient).
LSF_DECLARE_KERNEL(scatter_add_kernel, void(const Tensor& out, const Tensor& index, const Tensor& src, int64_t dim));
// out = x.index_select(dim, index): index is 1-D (i64 or i32); out is contiguous with x's
// shape except out.size(dim) = index.numel(); x any strides; any dtype.
LSF_DECLARE_KERNEL(index_select_kernel, void(const Tensor& out, const Tensor& x, const Tensor& index, int64_t dim));
// The transpose of index_select, out.index_add_(dim, index, src): for every j,
// out[.., index[j], ..] += src[.., j, ..]. out contiguous; src has out's shape except
// src.size(dim) = index.numel(). Accumulates into out (zero it first for a gradient).
LSF_DECLARE_KERNEL(index_add_kernel, void(const Tensor& out, const Tensor& index, const Tensor& src, int64_t dim));

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
