// Internal (not installed): the kernel table entry of pack_sequences / unpack_sequences (ops/pack.h).
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/pack.h"

namespace lsf {

// Copies rows between packed [T, H·e] and padded [B, H, n, e] (both contiguous, f32/f64; H = 1
// is the plain [B, n, F] layout; T and B·n read from the shapes).
//   to_padded: padded[b, h, t] = packed[index[b·n + t], h·e …] or `fill` where index < 0
//              (index = PackedSequences::slots, i64 [B·n]);
//   else:      packed[r, h·e …] = padded[b, h, t] with b·n + t = index[r]
//              (index = PackedSequences::rows, i64 [T]).
// Every output element is written exactly once (deterministic; no accumulation).
LSF_DECLARE_KERNEL(repack_rows_kernel,
                   void(const Tensor& packed, const Tensor& padded, const Tensor& index, bool to_padded, double fill));

}  // namespace lsf
