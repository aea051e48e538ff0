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

#include "engine/dispatch.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace lsf {

struct LongShortGeometry {
  int64_t window = 0;      // w ≥ 0 (n must be a multiple of w when w > 0)
  bool self_slot = false;  // w = 0 only: one window slot, the query's own key
  int64_t block = 0;       // queries per kernel task (rounded up to whole segments); 0: automatic
  // Derived: ext and span of the window band; `seg` groups queries that share a band.
  int64_t ext() const { return window > 0 ? (window / 2 > 1 ? window / 2 : 1) : 0; }
  int64_t span() const { return window > 0 ? window + 2 * ext() : (self_slot ? 1 : 0); }
  int64_t seg() const { return window > 0 ? window : 1; }
};

struct LongShortDropout {
  uint32_t threshold = 0;  // keep slot i ⇔ (Philox word i >> 8) ≥ threshold; 0 keeps all
  double scale = 1.0;      // kept probabilities are multiplied by this (1/(1 − p))
  GeneratorState state;    // the counter range reserved for the [B, h, n, R + s] tensor
};

// out [B, h, n, e] (overwritten), lse [B, h, n] (log-sum-exp of each row's logits; overwritten);
// q, k, v [B, h, n, e], kbar, vbar [B, h, R, e] (R may be 0), mask [B, n] u8 (1 = real token;
// every tensor contiguous and of one float dtype except the mask).
LSF_DECLARE_KERNEL(long_short_attention_kernel,
                   void(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& kbar, const Tensor& vbar, const Tensor& mask, LongShortGeometry geo,
                        LongShortDropout drop));
// Gradients (each overwritten; an undefined one is not computed): dq, dk, dv [B, h, n, e],
// dkbar, dvbar [B, h, R, e], from dout [B, h, n, e] and the forward's inputs and lse.
LSF_DECLARE_KERNEL(long_short_attention_backward_kernel,
                   void(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dkbar,
                        const Tensor& dvbar, const Tensor& dout, const Tensor& lse, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& kbar, const Tensor& vbar,
                        const Tensor& mask, LongShortGeometry geo, LongShortDropout drop));

struct LongShortAttentionOptions {
  int64_t window = 0;        // w (see above)
  bool self_slot = false;    // only with window 0
  double dropout = 0.0;      // attention dropout probability p ∈ [0, 1]
  bool training = false;     // dropout is applied only when training
  Generator* generator = nullptr;  // null: the default generator
  int64_t block_queries = 0;  // queries per kernel task, 0: automatic (tests use small blocks to
                              // exercise the merge of overlapping window tiles across tasks)
};

// q [B, h, n, e] (already scaled by e^{-1/2}), k, v [B, h, n, e] (LN_L-normalised),
// kbar, vbar [B, h, R, e] or undefined (R = 0), mask [B, n] bool or undefined (all real)
// → context [B, h, n, e]. Differentiable in q, k, v, kbar, vbar.
Tensor long_short_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kbar,
                            const Tensor& vbar, const Tensor& mask, const LongShortAttentionOptions& options);

// The same function composed from primitive ops (matmul, pad, index_select, masked_fill,
// softmax, dropout, cat, ...), materialising the logits [B, h, n, R + s]: the reference the
// fused op is tested against, and a fallback for backends without the fused kernel. With the
// same generator state it draws the same dropout mask as the fused op.
Tensor long_short_attention_composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kbar,
                                     const Tensor& vbar, const Tensor& mask,
                                     const LongShortAttentionOptions& options);

}  // namespace lsf
