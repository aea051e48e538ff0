// Classification losses: cross_entropy from logits (fused log-softmax + NLL, with
// ignore_index and label smoothing) and nll_loss from log-probabilities. PyTorch semantics:
// input [N, C] or [N, C, d1, ...] (class dim 1) or [C]; target i64 [N] or [N, d1, ...].
#pragma once

#include <cstdint>

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

}  // namespace lsf
