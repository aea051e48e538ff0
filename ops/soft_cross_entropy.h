// soft_cross_entropy: cross-entropy against soft (probability) targets, as timm's
// SoftTargetCrossEntropy — the loss of the Mixup / CutMix recipe (data/mixup.h):
//
//   loss = mean over the batch of  −Σ_k target[b, k] · log_softmax(logits)[b, k]
//
// logits [B, K] and target [B, K] of one floating dtype and device. It is composed of
// differentiable ops (log_softmax, mul, sum, mean, neg), so it needs no backward of its own:
// d loss / d logits = (softmax(logits)·Σ_k target − target) / B, and targets may carry
// gradients too. Targets are not checked to sum to 1 (timm does not either).
#pragma once

#include "lsformer/engine/tensor.h"

namespace lsf {

Tensor soft_cross_entropy(const Tensor& logits, const Tensor& target);

}  // namespace lsf
