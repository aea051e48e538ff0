// Embedding lookup: rows of a weight table [num_embeddings, dim] gathered by integer ids of any
// shape. Rows at padding_idx receive no gradient. And one_hot, its non-differentiable cousin.
//
// Ids are checked against the table: an id outside [0, num_embeddings) is an lsf::Error that
// names the id and the table size, never an out-of-bounds read.
#pragma once

#include <optional>

#include "engine/dispatch.h"
#include "engine/tensor.h"

namespace lsf {

// y[i] = weight[ids[i]] (overwrites y). y [n, dim] contiguous, weight [num_embeddings, dim]
// contiguous, ids [n] contiguous (i32/i64). Throws naming the first out-of-range id.
LSF_DECLARE_KERNEL(embedding_forward_kernel, void(const Tensor& y, const Tensor& weight, const Tensor& ids));
// dweight[ids[i]] += dy[i] for every id (dweight zeroed by the caller), skipping padding_idx
// (−1: none). dy [n, dim], ids [n] (i32/i64), dweight [num_embeddings, dim], all contiguous.
// Deterministic: each row of dweight is summed by one thread in the order ids occur.
LSF_DECLARE_KERNEL(embedding_backward_kernel, void(const Tensor& dweight, const Tensor& dy, const Tensor& ids, int64_t padding_idx));
// out[i, ids[i]] = 1 (out zeroed by the caller). out [n, num_classes] i64 contiguous, ids [n]
// contiguous (i32/i64). Throws naming the first id outside [0, num_classes).
LSF_DECLARE_KERNEL(one_hot_kernel, void(const Tensor& out, const Tensor& ids));

// weight [V, D] (f32/f64), ids [*] (i32/i64) → [*, D]. padding_idx in [−V, V) (negative counts
// from the end, as in PyTorch): that row's gradient stays zero.
Tensor embedding(const Tensor& weight, const Tensor& ids, std::optional<int64_t> padding_idx = std::nullopt);

// [*, num_classes] i64 tensor with a 1 at each id (num_classes −1: max id + 1), like
// torch.nn.functional.one_hot. Negative ids and ids ≥ num_classes are errors.
Tensor one_hot(const Tensor& ids, int64_t num_classes = -1);

}  // namespace lsf
