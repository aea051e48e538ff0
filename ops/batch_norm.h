// Batch normalisation over the channel dim of x [N, C, *] (torch.nn.functional.batch_norm):
//   y = (x − mean_c) / √(var_c + eps) · weight_c + bias_c
// Training (or no running statistics given): mean_c and the biased var_c over the N·S values of
// channel c (S = product of the trailing dims), and the running statistics, when given, are
// updated in place as PyTorch does:
//   running_mean ← (1 − momentum)·running_mean + momentum·mean_c
//   running_var  ← (1 − momentum)·running_var  + momentum·var_c·M/(M − 1)   (unbiased, M = N·S)
// Evaluation: mean_c and var_c are the running statistics (no update).
//
// Backward (x̂ = (x − mean)·invstd, g = dy·weight, sums over the M values of a channel):
//   training: dx = invstd·(g − Σg/M − x̂·Σ(g·x̂)/M)   (the batch statistics depend on x)
//   eval:     dx = invstd·g
//   dweight = Σ dy·x̂, dbias = Σ dy. The running statistics get no gradient (they are buffers).
// The CPU kernels accumulate the per-channel sums in double.
#pragma once

#include "lsformer/engine/tensor.h"

namespace lsf {

struct BatchNormOptions {
  bool training = true;   // batch statistics (and running-statistics update) vs running statistics
  double momentum = 0.1;  // weight of the new batch statistic in the running average, in [0, 1]
  double eps = 1e-5;      // added to the variance, ≥ 0
};

// x [N, C, *] (at least 2-D), f32 or f64; running_mean / running_var [C] of x's dtype or both
// undefined (then batch statistics are used in eval mode too, as PyTorch); weight / bias [C] or
// undefined. Returns y of x's shape. Training needs more than one value per channel.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, const BatchNormOptions& options = {});

}  // namespace lsf
