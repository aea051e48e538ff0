// Internal (not installed): the kernel table entries of the reductions (ops/reduce.h).
#pragma once

#include "lsformer/engine/dispatch.h"
#include <vector>
#include "lsformer/ops/reduce.h"

namespace lsf {

enum class ReduceOp : uint8_t { Sum, Max, Min };

// out (contiguous, x's shape with reduced dims set to 1) = op over `reduce_mask` dims of x.
LSF_DECLARE_KERNEL(reduce_kernel, void(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<bool>& reduce_mask));

// indices (i64, contiguous, x's shape with `dim` set to 1) = position of the max (or min) along dim;
// the first one among ties; a NaN counts as the maximum and the minimum.
LSF_DECLARE_KERNEL(arg_reduce_kernel, void(bool is_max, const Tensor& indices, const Tensor& x, int64_t dim));

}  // namespace lsf
