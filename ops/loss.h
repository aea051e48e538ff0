// Classification losses: cross_entropy from logits (fused log-softmax + NLL, with
// ignore_index and label smoothing) and nll_loss from log-probabilities. PyTorch semantics:
// input [N, C] or [N, C, d1, ...] (class dim 1) or [C]; target i64 (or i32) [N], [N, d1, ...]
// or 0-d for a [C] input.
//
// With label smoothing ε and C classes, the target distribution is (1 − ε)·onehot + ε/C, so
// per element: loss = (1 − ε)·(−log p_t) + (ε/C)·Σ_c (−log p_c), and 0 where the target is
// ignore_index. Mean divides the sum by the number of non-ignored elements (both terms, as in
// PyTorch 1.13); when every element is ignored that is 0/0 = nan, as in PyTorch.
// A target outside [0, C) that is not ignore_index is an error naming the op, value and C.
#pragma once

#include <cstdint>

#include "engine/dispatch.h"
#include "engine/tensor.h"

namespace lsf {

enum class Reduction { Mean, Sum, None };

struct CrossEntropyOptions {
  int64_t ignore_index = -100;     // targets equal to it contribute nothing (and don't count)
  double label_smoothing = 0.0;    // in [0, 1]: target mixes with the uniform distribution
  Reduction reduction = Reduction::Mean;  // Mean divides by the number of non-ignored targets
};

struct NllLossOptions {
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options = {});
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& options = {});

// ---- kernels ----
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
// (log Σ_c exp(logits), overwritten; what the backward reuses) from logits [N, C, K] and
// target [N, K]. Ignored elements get loss 0.
LSF_DECLARE_KERNEL(cross_entropy_kernel, ClassLossStats(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& target, int64_t ignore_index, double label_smoothing));
// dlogits [N, C, K] (overwritten) = scale·dloss·(softmax(logits) − (1 − ε)·onehot(target) − ε/C),
// 0 for ignored elements. dloss: [N, K] (one gradient per element) or 0-d (one for all).
LSF_DECLARE_KERNEL(cross_entropy_backward_kernel, void(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits, const Tensor& lse, const Tensor& target, int64_t ignore_index, double label_smoothing, double scale));
// loss [N, K] (overwritten; may be undefined) = −log_probs[n, target, k], 0 where ignored.
LSF_DECLARE_KERNEL(nll_loss_kernel, ClassLossStats(const Tensor& loss, const Tensor& log_probs, const Tensor& target, int64_t ignore_index));
// dlog_probs [N, C, K] (overwritten) = −scale·dloss at each non-ignored target, 0 elsewhere.
LSF_DECLARE_KERNEL(nll_loss_backward_kernel, void(const Tensor& dlog_probs, const Tensor& dloss, const Tensor& target, int64_t ignore_index, double scale));

}  // namespace lsf
