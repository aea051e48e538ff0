// What every attention module shares: the head layout and the global-token update.
//
//   Tensor q = split_heads(W_q->forward(x), heads);     // [B, n, h·e] → [B, h, n, e]
//   Tensor y = W_o->forward(merge_heads(context));      // [B, h, n, e] → [B, n, h·e]
//
// Heads are the e-wide column groups of the d = h·e features, head-major (column head·e + i), as
// PyTorch's multi-head modules and the official Transformer-LS code lay them out.
#pragma once

#include <cstdint>

#include "lsformer/engine/tensor.h"

namespace lsf::nn {

// x [B, n, h·e] → [B, h, n, e]: a view when x's strides allow it (always for a contiguous x).
Tensor split_heads(const Tensor& x, int64_t heads);
// x [B, h, n, e] → [B, n, h·e] (contiguous; a copy unless x already is in that order).
Tensor merge_heads(const Tensor& x);

// The update of a global token (the LRA CLS of docs/transformer-ls.md §2.3 step 13, the ViL
// global tokens of §4.2 step 10): its query attends over its own key and the layer's context
// vectors, which serve as both keys and values; one softmax in the activation dtype, no dropout:
//   [l_0 | l_j] = [q_g·k_g | q_g·C_j],  p = softmax,  out = p_0·v_g + Σ_j p_j·C_j.
// qg, kg, vg [B, h, 1, e]; context [B, h, n, e]; key_mask [B, n] bool (true for real tokens; a
// padded C_j gets logit −∞) or undefined → [B, h, 1, e].
Tensor global_token_update(const Tensor& qg, const Tensor& kg, const Tensor& vg, const Tensor& context,
                           const Tensor& key_mask = Tensor());

}  // namespace lsf::nn
