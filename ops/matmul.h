// Matrix products on OpenBLAS (sgemm/dgemm on the CPU): matmul with PyTorch's rules (1-D,
// 2-D, batched, broadcast batch dims) and bmm ([B, n, k] × [B, k, m]).
#pragma once

#include "engine/dispatch.h"
#include "engine/tensor.h"

namespace lsf {

// c[b] = alpha · op(a[b]) · op(b[b]) + beta · c[b] for every batch b, where op transposes when
// asked. a, b, c are 3-D [batch, rows, cols] with unit stride in their last or second-to-last
// dim (a transposed view is passed as is, with its transpose flag derived from the strides).
LSF_DECLARE_KERNEL(gemm_kernel, void(const Tensor& c, const Tensor& a, const Tensor& b, double alpha, double beta));

Tensor matmul(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);

}  // namespace lsf
