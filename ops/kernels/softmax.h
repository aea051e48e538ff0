// Internal (not installed): the kernel table entries of softmax / log_softmax (ops/softmax.h), and the
// [outer, n, inner] view every backend's kernel takes of its input.
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/softmax.h"

namespace lsf {

// y = softmax(x) (or log_softmax when `log`) along `dim` (already wrapped). y contiguous.
LSF_DECLARE_KERNEL(softmax_forward_kernel, void(bool log, const Tensor& y, const Tensor& x, int64_t dim));

// dx from dy and the forward output y: softmax: dx = y·(dy − Σ dy·y); log_softmax:
// dx = dy − exp(y)·Σ dy. dx contiguous.
LSF_DECLARE_KERNEL(softmax_backward_kernel, void(bool log, const Tensor& dx, const Tensor& dy, const Tensor& y, int64_t dim));

// y = masked_softmax(x, keep) over the last dim (ops/softmax.h); keep is bool, already expanded
// to x's shape (strides may be 0). y contiguous.
LSF_DECLARE_KERNEL(masked_softmax_forward_kernel, void(const Tensor& y, const Tensor& x, const Tensor& keep));

// A contiguous tensor seen by the softmax kernels of every backend: [outer, n, inner], n the
// softmax dim.
struct SoftmaxGeometry {
  int64_t outer = 1, n = 1, inner = 1;
};
inline SoftmaxGeometry softmax_geometry(const Shape& shape, int64_t dim) {
  SoftmaxGeometry g;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (d < dim) g.outer *= shape[d];
    else if (d == dim) g.n = shape[d];
    else g.inner *= shape[d];
  }
  return g;
}

}  // namespace lsf
