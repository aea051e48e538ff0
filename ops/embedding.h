// Embedding lookup: rows of a weight table [num_embeddings, dim] gathered by integer ids of any
// shape. Rows at padding_idx receive no gradient. And one_hot, its non-differentiable cousin.
//
// Ids are checked against the table: an id outside [0, num_embeddings) is an lsf::Error that
// names the id and the table size, never an out-of-bounds read.
#pragma once

#include <optional>

#include "lsformer/engine/tensor.h"

namespace lsf {

// weight [V, D] (f32/f64), ids [*] (i32/i64) → [*, D]. padding_idx in [−V, V) (negative counts
// from the end, as in PyTorch): that row's gradient stays zero.
Tensor embedding(const Tensor& weight, const Tensor& ids, std::optional<int64_t> padding_idx = std::nullopt);

// [*, num_classes] i64 tensor with a 1 at each id (num_classes −1: max id + 1), like
// torch.nn.functional.one_hot. Negative ids and ids ≥ num_classes are errors.
Tensor one_hot(const Tensor& ids, int64_t num_classes = -1);

}  // namespace lsf
