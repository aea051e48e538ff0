// softmax and log_softmax over one dimension, numerically stable (max subtracted), with fused
// forward and backward kernels.
#pragma once

#include "lsformer/engine/tensor.h"

namespace lsf {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace lsf
