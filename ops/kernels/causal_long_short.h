// Internal (not installed): the kernel table entries of the fused causal long-short attention
// (ops/causal_long_short.h).
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/causal_long_short.h"

namespace lsf {

// out [B, h, M, e] (overwritten) and lse [B, h, M] (overwritten; log Σ exp of each query's
// logits, which the backward reuses to recompute the probabilities without storing them).
LSF_DECLARE_KERNEL(causal_long_short_forward_kernel,
                   void(const Tensor& out, const Tensor& lse, const CausalLongShortInputs& in,
                        const CausalLongShortGeometry& g));

// Gradients (each overwritten, undefined when not needed) in the fields of `grads`, named like
// the inputs; dout [B, h, M, e] and the forward's out and lse. The logits are recomputed.
LSF_DECLARE_KERNEL(causal_long_short_backward_kernel,
                   void(const CausalLongShortInputs& grads, const Tensor& dout, const Tensor& out,
                        const Tensor& lse, const CausalLongShortInputs& in, const CausalLongShortGeometry& g));

}  // namespace lsf
