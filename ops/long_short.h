// Bidirectional long-short attention core (docs/transformer-ls.md §2.3 steps 7–12), fused: one op
// with its own backward.
//
// Every query t attends, through ONE softmax, to
//   (a) R global slots (the dynamic projections K̄, V̄ after LN_G, with the CLS slot first when
//       a CLS is injected), visible to every query, and
//   (b) its window: with ext = max(⌊w/2⌋, 1) and span s = w + 2·ext, the keys
//       j = ⌊t/w⌋·w − ext + u, u = 0..s−1, masked (logit −∞) when j is outside [0, n) or a
//       padded token. w = 0 with `self_slot`: the single key j = t (§2.3 step 8, w = 0 & r = 0);
//       w = 0 without it: no window branch (pure dynamic projection, §2.7).
// Slot order in the logit row is [global R | window s], so the dropout mask over the
// probability tensor [B, h, n, R + s] is element for element the one lsf::dropout draws on that
// tensor from the same generator state (the composed version reproduces the fused one exactly).
// Rows of padded queries are zero (§2.3 step 10). The output is the context C [B, h, n, e].
//
// Kernel (ops/cpu/long_short.cpp): logits of one query block (whole segments) are computed
// while its keys are in cache; nothing of size n × (R + s) is stored: forward keeps only the
// per-row log-sum-exp [B, h, n] and backward recomputes the logits (and the dropout mask, from
// the generator state). Backward is deterministic: window-key gradients of overlapping tiles
// are first written per query block, then summed per key in a fixed order (two phases).
#pragma once

#include "lsformer/engine/random.h"
#include "lsformer/engine/tensor.h"

namespace lsf {

struct LongShortAttentionOptions {
  int64_t window = 0;        // w (see above)
  bool self_slot = false;    // only with window 0
  double dropout = 0.0;      // attention dropout probability p ∈ [0, 1]
  bool training = false;     // dropout is applied only when training
  Generator* generator = nullptr;  // null: the default generator
  int64_t block_queries = 0;  // queries per kernel task, 0: automatic (tests use small blocks to
                              // exercise the merge of overlapping window tiles across tasks)
  // q is multiplied by this first (e^{-1/2} for a raw projection X W_q): bit for bit
  // long_short_attention(mul(q, q_scale), ...), forward and gradients, but inside the fused
  // kernel where the backend can (the CPU), saving the two passes of that mul over q.
  double q_scale = 1.0;
};

// q [B, h, n, e] (scaled by e^{-1/2}, or by options.q_scale), k, v [B, h, n, e] (LN_L-normalised),
// kbar, vbar [B, h, R, e] or undefined (R = 0), mask [B, n] bool or undefined (all real)
// → context [B, h, n, e]. Differentiable in q, k, v, kbar, vbar. q, k, v of any layout with a
// unit stride along e (head-split views of [B, n, h·e] tensors) are read in place; the context
// comes back in q's memory order and the gradients of q, k, v in theirs, so merging the heads
// of such a view is free in both directions.
Tensor long_short_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kbar,
                            const Tensor& vbar, const Tensor& mask, const LongShortAttentionOptions& options);

// The same function composed from primitive ops (matmul, pad, index_select, masked_fill,
// softmax, dropout, cat, ...), materialising the logits [B, h, n, R + s]: the reference the
// fused op is tested against, and a fallback for backends without the fused kernel. With the
// same generator state it draws the same dropout mask as the fused op.
Tensor long_short_attention_composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kbar,
                                     const Tensor& vbar, const Tensor& mask,
                                     const LongShortAttentionOptions& options);

// The joint attention probabilities of the same computation, before dropout: [B, h, n, R + s],
// slot order [global R | window s] as above; row t's window slot u is key j = ⌊t/w⌋·w − ext + u
// (probability 0 when j is outside [0, n) or padded); padded queries' rows are zero. What
// long_short_attention_composed applies dropout to and sums the values with (differentiable);
// what nn::LongShortAttention records for inspection (models/nn/capture.h).
Tensor long_short_attention_probabilities(const Tensor& q, const Tensor& k, const Tensor& kbar, const Tensor& mask,
                                          const LongShortAttentionOptions& options);

}  // namespace lsf
