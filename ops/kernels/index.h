// Internal (not installed): the kernel table entries of masked_fill / where / gather / index_select
// (ops/index.h), and the scatter kernels their backward passes use.
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/index.h"

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

}  // namespace lsf
