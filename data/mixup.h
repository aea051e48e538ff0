// Mixup / CutMix on a batch, as timm's Mixup with mode "batch" (timm/data/mixup.py), and the
// label-smoothed soft targets it produces.
//
// Per batch (one SampleRandom keyed by the batch): with probability `prob` mixing happens; then,
// when both alphas are > 0, CutMix is chosen with probability `switch_prob` (else Mixup); λ ~
// Beta(α, α) of the chosen kind (only one alpha > 0: that kind always). Sample i is mixed with
// sample B − 1 − i (timm flips the batch), so B must be even:
//   Mixup   x_i ← λ·x_i + (1 − λ)·x_{B−1−i}   (float32, λ and 1 − λ rounded to float, as torch)
//   CutMix  cut = (⌊H·√(1−λ)⌋, ⌊W·√(1−λ)⌋), centre cy = randint[0, H), cx = randint[0, W), box rows
//           [clip(cy − cut_h//2), clip(cy + cut_h//2)), columns likewise (clipped to the image);
//           x_i's box ← x_{B−1−i}'s box; λ ← 1 − box area / (H·W) (timm's correct_lam)
// Targets: y = onehot_s(label_i)·λ + onehot_s(label_{B−1−i})·(1 − λ), onehot_s = 1 − s + s/K at
// the label and s/K elsewhere (s = label smoothing), computed in float32 as timm does; rows sum
// to 1 (up to float rounding). When no mixing happens λ = 1 and the targets are just smoothed.
#pragma once

#include <cstdint>

#include "lsformer/data/sample_random.h"
#include "lsformer/engine/tensor.h"

namespace lsf::data {

struct MixupOptions {
  double mixup_alpha = 0.8;   // 0 = no Mixup
  double cutmix_alpha = 1.0;  // 0 = no CutMix
  double prob = 1.0;          // probability that a batch is mixed at all
  double switch_prob = 0.5;   // P(CutMix) when both are enabled
  double label_smoothing = 0.1;
  bool enabled() const { return mixup_alpha > 0 || cutmix_alpha > 0; }
};

struct MixResult {
  double lambda = 1.0;  // the weight of each sample's own label (after CutMix's correction)
  bool mixed = false;
  bool cutmix = false;
  int64_t top = 0, bottom = 0, left = 0, right = 0;  // CutMix box rows [top, bottom), cols [left, right)
};

// Mixes images [B, C, H, W] f32 (contiguous, CPU) in place. Errors on an odd B.
MixResult mix_batch(Tensor& images, const MixupOptions& options, SampleRandom& random);

// Soft targets [B, num_classes] f32 for labels [B] i64 and the batch's λ (see above).
Tensor mixup_targets(const Tensor& labels, int64_t num_classes, double lambda, double label_smoothing);

}  // namespace lsf::data
