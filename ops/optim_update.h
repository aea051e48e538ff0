// Fused optimizer updates and the gradient-norm helpers behind clip_grad_norm_.
//
// One pass over each parameter: the parameter, its gradient and its state buffers are read once
// and written in place, in the parameter's own storage (whose version is bumped, so autograd
// refuses a saved value that an optimizer step has since changed). Each kernel reproduces the
// sequence of tensor operations of PyTorch 1.13's single-tensor optimizer loop, rounding after
// every operation in the parameter's dtype, with the scalar coefficients computed in double and
// rounded once (as PyTorch passes Python floats):
//
//   SGD   g ← grad + wd·p;  buf ← g (first step) | momentum·buf + (1 − dampening)·g;
//         d ← g + momentum·buf (nesterov) | buf;  p ← p − lr·d
//   Adam  g ← grad + wd·p;  m ← β1·m + (1 − β1)·g;  v ← β2·v + (1 − β2)·g²;  [vmax ← max(vmax, v)]
//         p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + eps)
//   AdamW the same without the L2 term, after the decoupled decay p ← p · (1 − lr·wd)
//
// A backend adds the same kernels under the same names (cuda/optim_update.cu): one fused AdamW
// step per parameter tensor. Tensors may have any strides (a transposed parameter, a gradient
// in its input's layout); state buffers are contiguous and of the parameter's shape and dtype.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "lsformer/engine/tensor.h"

namespace lsf {

struct SgdUpdate {
  double lr = 0;
  double momentum = 0;      // 0: no buffer is used (momentum_buffer may be undefined)
  double dampening = 0;
  double weight_decay = 0;  // L2: added to the gradient
  bool nesterov = false;
  bool init_buffer = false;  // the buffer's first use: buf ← g (PyTorch's clone of d_p)
};

struct AdamUpdate {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled = false;  // AdamW: p ← p·(1 − lr·wd) before the update; Adam: wd·p added to grad
  bool amsgrad = false;    // normalise by the running maximum of v (max_exp_avg_sq)
  int64_t step = 1;        // this update's step number t ≥ 1 (bias corrections 1 − β^t)
};

// One tensor's share of a multi-tensor Adam / AdamW step: the operands adam_update_kernel takes
// and the tensor's own coefficients (step numbers and group options may differ per tensor).
struct AdamTensor {
  Tensor param;           // [*] any strides
  Tensor grad;            // [*] any strides
  Tensor exp_avg;         // [*] contiguous
  Tensor exp_avg_sq;      // [*] contiguous
  Tensor max_exp_avg_sq;  // [*] contiguous; undefined unless u.amsgrad
  AdamUpdate u;
};

// ---- checked entry points (used by lsf::optim) ----
// Check shapes, dtypes and devices, run the kernel under NoGradGuard, bump the versions of
// every storage written.
void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdUpdate& u);
void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const Tensor& max_exp_avg_sq, const AdamUpdate& u);
// Every entry checked as adam_update_ checks it (all before anything is written; all on one
// device), then one adam_multi_update_kernel call; versions bumped as adam_update_ does.
void adam_multi_update_(const std::vector<AdamTensor>& list);
// Σ|x|^p in double, or max |x| for p = +inf; p > 0.
double norm_pow_sum(const Tensor& x, double p);
// norm_pow_sum of each tensor, the same values: on a GPU one synchronisation per device for the
// whole list instead of one per tensor (clip_grad_norm_ over every parameter).
std::vector<double> norm_pow_sums(const TensorList& xs, double p);
// x ← x · factor in place (not recorded by autograd).
void scale_(const Tensor& x, double factor);

}  // namespace lsf
