// Internal (not installed): the kernel table entries of the classification losses (ops/loss.h).
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/loss.h"

namespace lsf {

// Legend: N batch, C classes, K = d1·d2·... positions per sample (1 for [N, C] input); the op
// views every input as input [N, C, K] and target [N, K], both contiguous.

// What a forward loss kernel reports besides its per-element output.
struct ClassLossStats {
  double sum = 0;            // Σ of the per-element losses (f64 accumulation)
  int64_t count = 0;         // elements whose target is not ignore_index
  int64_t bad_index = -1;    // flat index in target of the first target outside [0, C), or −1
  int64_t bad_value = 0;     // that target's value
};

// loss [N, K] (overwritten; may be undefined when only the sum is wanted) and lse [N, K]
// (log Σ_c exp(logits), overwritten; what the backward reuses; f32 for bf16/f16 logits, whose
// rounding would otherwise scale every softmax value of the backward) from logits [N, C, K] and
// target [N, K]. Ignored elements get loss 0.
LSF_DECLARE_KERNEL(cross_entropy_forward_kernel, ClassLossStats(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& target, int64_t ignore_index, double label_smoothing));
// dlogits [N, C, K] (overwritten) = scale·dloss·(softmax(logits) − (1 − ε)·onehot(target) − ε/C),
// 0 for ignored elements. dloss: [N, K] (one gradient per element) or 0-d (one for all).
LSF_DECLARE_KERNEL(cross_entropy_backward_kernel, void(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits, const Tensor& lse, const Tensor& target, int64_t ignore_index, double label_smoothing, double scale));

// loss [N, K] (overwritten; may be undefined) = −log_probs[n, target, k], 0 where ignored.
LSF_DECLARE_KERNEL(nll_loss_forward_kernel, ClassLossStats(const Tensor& loss, const Tensor& log_probs, const Tensor& target, int64_t ignore_index));
// dlog_probs [N, C, K] (overwritten) = −scale·dloss at each non-ignored target, 0 elsewhere.
LSF_DECLARE_KERNEL(nll_loss_backward_kernel, void(const Tensor& dlog_probs, const Tensor& dloss, const Tensor& target, int64_t ignore_index, double scale));

}  // namespace lsf
