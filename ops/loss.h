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

#include "lsformer/engine/tensor.h"

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

}  // namespace lsf
