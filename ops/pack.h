// Packed sequences: a batch of padded sequences [B, n, F] as the [T, F] rows of its real tokens
// only (T = the number of real tokens), and back.
//
// Why: position-wise layers (Linear, LayerNorm, GELU, dropout, residual adds) give a padded
// position a value that no real token ever reads (attention masks padded keys), yet cost as
// much as a real one; LRA batches are often 40% padding. A model runs those layers on the
// packed rows and unpacks only where a layer needs the [B, n] geometry (the attention core).
// The real tokens' results are those of the padded computation (each row's arithmetic is the
// same); dropout masks are drawn over the packed rows, so with dropout the random numbers differ
// from a padded run's.
//
//   PackedSequences p = packed_sequences(mask);          // mask [B, n] bool, true = real
//   Tensor rows = pack_sequences(x, p);                    // [B, n, F] → [T, F]
//   Tensor heads = unpack_sequences(q, p, /*heads=*/h);    // [T, h·e] → [B, h, n, e], padding 0
//
// Both ops are differentiable and each one's gradient is the other (padding gets none).
#pragma once

#include <cstdint>

#include "lsformer/engine/tensor.h"

namespace lsf {

struct PackedSequences {
  int64_t batch = 0, length = 0;  // B, n
  int64_t total = 0;              // T: real tokens in the batch
  Tensor mask;                    // [B, n] bool, the mask this layout came from
  Tensor rows;                    // i64 [T]: b·n + t of each packed row (sequence by sequence, t ascending)
  Tensor slots;                   // i64 [B·n]: the packed row of (b, t), −1 for padding
  Tensor positions;               // i64 [T]: t of each packed row (for position embeddings)
};

// The layout of a [B, n] bool mask (any pattern of real tokens, on any device; read on the CPU).
PackedSequences packed_sequences(const Tensor& mask);

// heads = 0: x [B, n, F] → [T, F]. heads > 0: x [B, heads, n, e] (the attention head layout)
// → [T, heads·e], head-major within a row as merge_heads gives.
Tensor pack_sequences(const Tensor& x, const PackedSequences& p, int64_t heads = 0);

// heads = 0: x [T, F] → [B, n, F]. heads > 0: x [T, F] → [B, heads, n, F / heads] (split_heads's
// layout, contiguous). Padding positions hold `fill` (e.g. −∞ for logits a softmax must ignore).
Tensor unpack_sequences(const Tensor& x, const PackedSequences& p, int64_t heads = 0, double fill = 0.0);

}  // namespace lsf
