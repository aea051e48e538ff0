// softmax and log_softmax over one dimension, numerically stable (max subtracted), with fused
// forward and backward kernels.
#pragma once

#include "lsformer/engine/tensor.h"

namespace lsf {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// x [..., n], keep bool broadcastable to x's shape → y [..., n]: the softmax over the last dim of
// the entries whose keep is true; the others are 0, and a row with none kept is all 0 (not NaN).
// Equal to softmax(masked_fill(x, !keep, −inf)) with those rows zeroed, in one pass over x and no
// [..., n] temporaries (attention over padded sequences: keep = query real ∧ key real). The
// gradient is softmax's (y (dy − Σ dy·y)), which is 0 wherever y is. Backends without the fused
// kernel (CUDA, for now) run that composition.
Tensor masked_softmax(const Tensor& x, const Tensor& keep);

}  // namespace lsf
