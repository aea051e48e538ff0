// Internal (not installed): the kernel table entries of the fused optimizer updates and the gradient-norm
// helpers (ops/optim_update.h), and the per-step Adam coefficients every backend computes alike.
#pragma once

#include "lsformer/engine/dispatch.h"
#include <cmath>
#include "lsformer/ops/optim_update.h"

namespace lsf {

// An AdamUpdate's per-step constants in a kernel's element type, computed once (in double) by
// every backend the same way, so CPU and CUDA round them alike.
template <typename T>
struct AdamCoefficients {
  T neg_step_size, bc2_sqrt, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, wd, decay_factor;
  bool l2, decoupled, amsgrad;
};

template <typename T>
AdamCoefficients<T> adam_coefficients(const AdamUpdate& u) {
  const double t = double(u.step);
  const double bias_correction1 = 1.0 - std::pow(u.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(u.beta2, t);
  return AdamCoefficients<T>{.neg_step_size = T(-(u.lr / bias_correction1)),
                             .bc2_sqrt = T(std::sqrt(bias_correction2)),
                             .beta1 = T(u.beta1),
                             .one_minus_beta1 = T(1.0 - u.beta1),
                             .beta2 = T(u.beta2),
                             .one_minus_beta2 = T(1.0 - u.beta2),
                             .eps = T(u.eps),
                             .wd = T(u.weight_decay),
                             .decay_factor = T(1.0 - u.lr * u.weight_decay),
                             .l2 = !u.decoupled && u.weight_decay != 0.0,
                             .decoupled = u.decoupled,
                             .amsgrad = u.amsgrad};
}

// param [*], grad [*] (any strides); momentum_buffer [*] contiguous, undefined iff momentum == 0.
// Updates param (and the buffer) in place.
LSF_DECLARE_KERNEL(sgd_update_kernel, void(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdUpdate& u));

// param [*], grad [*] (any strides); exp_avg, exp_avg_sq [*] contiguous; max_exp_avg_sq [*]
// contiguous, undefined unless amsgrad. Updates param and the moments in place.
LSF_DECLARE_KERNEL(adam_update_kernel, void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                                            const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamUpdate& u));

// Every entry updated exactly as adam_update_kernel updates it, all tensors on one device. The
// CPU loops over the entries; CUDA runs the contiguous f32 / f64 entries in one launch over
// fixed chunks of every tensor (the fused AdamW step over all parameters).
LSF_DECLARE_KERNEL(adam_multi_update_kernel, void(const std::vector<AdamTensor>& list));

// Σ|x|^p accumulated in double (p = 2: the squared L2 norm); p = +inf: max |x| (NaN if any NaN).
LSF_DECLARE_KERNEL(norm_pow_sum_kernel, double(const Tensor& x, double p));
// norm_pow_sum_kernel of every tensor (the op groups them by device; none empty), each value the bits that
// kernel gives; CUDA runs them all before one copy to the host and one synchronisation.
LSF_DECLARE_KERNEL(norm_pow_sums_kernel, std::vector<double>(const TensorList& xs, double p));

// x ← x · factor, in place (x any strides).
LSF_DECLARE_KERNEL(scale_inplace_kernel, void(const Tensor& x, double factor));

}  // namespace lsf
