// Internal (not installed): the kernel table entries of embedding and one_hot (ops/embedding.h).
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/embedding.h"

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

}  // namespace lsf
