// Selection by mask and by index: masked_fill, where, gather, index_select (and the
// scatter-add kernel their backward passes share).
#pragma once

#include "engine/dispatch.h"
#include "engine/tensor.h"

namespace lsf {

// out = cond ? a : b elementwise; cond (bool), a, b already broadcast to out's shape.
LSF_DECLARE_KERNEL(where_kernel, void(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b));
// out = gather(x, dim, index) (out has index's shape); scatter_add is its transpose:
// out[..., index[i], ...] += src[i] along dim.
LSF_DECLARE_KERNEL(gather_kernel, void(const Tensor& out, const Tensor& x, const Tensor& index, int64_t dim));
LSF_DECLARE_KERNEL(scatter_add_kernel, void(const Tensor& out, const Tensor& index, const Tensor& src, int64_t dim));
// out = x.index_select(dim, index); and its transpose out.index_add_(dim, index, src).
LSF_DECLARE_KERNEL(index_select_kernel, void(const Tensor& out, const Tensor& x, const Tensor& index, int64_t dim));
LSF_DECLARE_KERNEL(index_add_kernel, void(const Tensor& out, const Tensor& index, const Tensor& src, int64_t dim));

// x where mask is false, value where it is true (mask bool, broadcast to x).
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
// out[i][j][k] = x[i][index[i][j][k]][k] for dim 1 (index has x's rank, i64).
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);

}  // namespace lsf
