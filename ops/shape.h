// Joining, splitting and padding: cat, stack, split, pad (constant).
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace lsf {

Tensor cat(const TensorList& tensors, int64_t dim = 0);
Tensor stack(const TensorList& tensors, int64_t dim = 0);
// Pieces of `split_size` along dim (the last may be shorter). Views of x.
TensorList split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// Pieces of the given sizes, which must sum to x.size(dim).
TensorList split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
// Constant padding in PyTorch's order: {last_left, last_right, second_last_left, ...}.
// Negative amounts crop.
Tensor pad(const Tensor& x, const std::vector<int64_t>& padding, double value = 0.0);

}  // namespace lsf
