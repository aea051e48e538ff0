// softmax and log_softmax over one dimension, numerically stable (max subtracted), with fused
// forward and backward kernels.
#pragma once

#include "engine/dispatch.h"
#include "engine/tensor.h"

namespace lsf {

// y = softmax(x) (or log_softmax when `log`) along `dim` (already wrapped). y contiguous.
LSF_DECLARE_KERNEL(softmax_kernel, void(bool log, const Tensor& y, const Tensor& x, int64_t dim));
// dx from dy and the forward output y: softmax: dx = y·(dy − Σ dy·y); log_softmax:
// dx = dy − exp(y)·Σ dy. dx contiguous.
LSF_DECLARE_KERNEL(softmax_backward_kernel, void(bool log, const Tensor& dx, const Tensor& dy, const Tensor& y, int64_t dim));

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace lsf
