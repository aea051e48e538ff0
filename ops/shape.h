// Joining, splitting and padding: cat, stack, split, pad (constant), with PyTorch semantics.
//
// cat and pad allocate a new tensor and copy through the engine's strided copy_kernel, so they
// work for every dtype and on every backend without kernels of their own. split returns views
// of its input (narrow), whose backward is the view machinery's (ops/view.cpp).
//
// Backward: cat hands each input the matching narrow() of the gradient (a copy only when that
// slice is not contiguous); pad's backward is pad of the gradient by the negated amounts, which
// crops what was padded and zero-fills what was cropped.
#pragma once

#include <vector>

#include "lsformer/engine/tensor.h"

namespace lsf {

// Joins tensors along dim (negative counts from the end). All inputs share dtype, device and
// rank (≥ 1), and their shapes match except along dim. An empty list is an error.
Tensor cat(const TensorList& tensors, int64_t dim = 0);
// Joins same-shaped tensors along a new dimension `dim` (in [-rank-1, rank]):
// cat of each tensor unsqueezed at dim.
Tensor stack(const TensorList& tensors, int64_t dim = 0);
// Pieces of `split_size` along dim (the last may be shorter). Views of x. split_size 0 is
// allowed only for an empty dimension (one empty piece), as in PyTorch.
TensorList split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// Pieces of the given sizes (each ≥ 0), which must sum to x.size(dim). Views of x.
TensorList split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
// Constant padding in PyTorch's F.pad order: {last_left, last_right, second_last_left, ...};
// an even number of values, at most two per dimension of x. Negative amounts crop; cropping
// more than a dimension holds (a negative result size) is an error. `value` must be
// representable in x's dtype.
Tensor pad(const Tensor& x, const std::vector<int64_t>& padding, double value = 0.0);

}  // namespace lsf
