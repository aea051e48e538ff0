// Reductions: sum, mean, amax/amin, max/min with indices, argmax/argmin, var, and sum_to
// (the broadcast-undo used by every broadcasting backward).
//
// dims may be negative; an empty dims list reduces every dimension. keepdim keeps reduced
// dimensions with size 1. Float sums accumulate in f64 on the CPU.
#pragma once

#include <vector>

#include "lsformer/engine/tensor.h"

namespace lsf {

Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// Largest value over dims; the gradient is shared equally among tied maxima (as torch.amax).
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

struct ValuesIndices {
  Tensor values;
  Tensor indices;  // i64
};
// Max along one dim with the index of the (first) maximum; the gradient goes to that index.
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements (0-d)
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);

// Variance over dims with Bessel's correction by default (divides by N - correction).
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
           bool keepdim = false);

// Sums x down to `shape`, which x's shape broadcasts from: leading dims are summed away and
// dims where `shape` has 1 are summed with keepdim. Returns x itself when shapes match.
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace lsf
