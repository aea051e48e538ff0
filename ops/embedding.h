// Embedding lookup: rows of a weight table [num_embeddings, dim] gathered by integer ids of any
// shape. Rows at padding_idx receive no gradient.
#pragma once

#include <optional>

#include "engine/dispatch.h"
#include "engine/tensor.h"

namespace lsf {

// dweight[ids[i]] += dy[i] for every id (dweight zeroed by the caller), skipping padding_idx
// (−1: none). dy [n, dim], ids [n] (i32/i64), dweight [num_embeddings, dim].
LSF_DECLARE_KERNEL(embedding_backward_kernel, void(const Tensor& dweight, const Tensor& dy, const Tensor& ids, int64_t padding_idx));

Tensor embedding(const Tensor& weight, const Tensor& ids, std::optional<int64_t> padding_idx = std::nullopt);

// [*, num_classes] i64 tensor with a 1 at each id (num_classes −1: max id + 1).
Tensor one_hot(const Tensor& ids, int64_t num_classes = -1);

}  // namespace lsf
