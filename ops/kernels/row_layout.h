// The row layout the fused attention kernels read (CPU and CUDA): any strides, as long as each
// row's feature (last) axis is contiguous, so a head view such as split_heads(X W) passes as it
// is, without a copy.
#pragma once

#include "lsformer/engine/tensor.h"

namespace lsf {

// t itself when its last axis is contiguous (or has at most one element), else a contiguous copy.
inline Tensor rows_contiguous(const Tensor& t) {
  return t.size(-1) <= 1 || t.strides().back() == 1 ? t : t.contiguous();
}

}  // namespace lsf
