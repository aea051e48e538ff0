// Optimizer update entry points: argument checks, then the fused kernel of the parameter's
// device. These are not autograd ops: they write parameters in place, under NoGradGuard, and
// bump the storage versions of what they write.
#include "lsformer/ops/optim_update.h"
#include "lsformer/ops/kernels/optim_update.h"

#include <cmath>

#include "lsformer/engine/autograd.h"

namespace lsf {

LSF_DEFINE_KERNEL(sgd_update_kernel, void(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdUpdate& u));
LSF_DEFINE_KERNEL(adam_update_kernel, void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                                           const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamUpdate& u));
LSF_DEFINE_KERNEL(adam_multi_update_kernel, void(const std::vector<AdamTensor>& list));
LSF_DEFINE_KERNEL(norm_pow_sum_kernel, double(const Tensor& x, double p));
LSF_DEFINE_KERNEL(norm_pow_sums_kernel, std::vector<double>(const TensorList& xs, double p));
LSF_DEFINE_KERNEL(scale_inplace_kernel, void(const Tensor& x, double factor));

namespace {

// Every state tensor: defined, contiguous, and of the parameter's shape, dtype and device.
void check_state(const char* op, const Tensor& param, const Tensor& state, const char* state_name) {
  LSF_CHECK(state.defined()) << op << ": the " << state_name << " buffer is undefined (parameter shape "
                             << param.shape() << ")";
  LSF_CHECK(state.shape() == param.shape() && state.dtype() == param.dtype() && state.device() == param.device())
      << op << ": " << state_name << " buffer of shape " << state.shape() << " (" << state.dtype() << ", "
      << state.device() << ") does not match the parameter's " << param.shape() << " (" << param.dtype() << ", "
      << param.device() << ")";
  LSF_CHECK(state.is_contiguous()) << op << ": the " << state_name << " buffer must be contiguous (shape "
                                   << state.shape() << ", strides " << state.strides() << ")";
}

void check_param_grad(const char* op, const Tensor& param, const Tensor& grad) {
  check_defined(op, {&param, &grad});
  check_same_device(op, {&param, &grad});
  check_same_dtype(op, {&param, &grad});
  LSF_CHECK(param.shape() == grad.shape()) << op << ": gradient of shape " << grad.shape()
                                           << " does not match the parameter's shape " << param.shape();
  LSF_CHECK(is_floating(param.dtype())) << op << ": expected a floating-point parameter, got " << param.dtype()
                                        << " (shape " << param.shape() << ")";
}

bool finite_nonnegative(double v) { return std::isfinite(v) && v >= 0.0; }

// An in-place write through a broadcast view (stride 0 over a dim of size > 1) would write one
// memory location several times: refused, as PyTorch does.
void check_writable(const char* op, const Tensor& t, const char* what) {
  for (int64_t d = 0; d < t.dim(); ++d)
    LSF_CHECK(t.size(d) <= 1 || t.stride(d) != 0)
        << op << ": the " << what << " (shape " << t.shape() << ", strides " << t.strides()
        << ") is a broadcast view in which several elements share one memory location; it cannot be "
           "written in place";
}

}  // namespace

void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdUpdate& u) {
  const char* op = "sgd_update_";
  check_param_grad(op, param, grad);
  LSF_CHECK(finite_nonnegative(u.lr) && finite_nonnegative(u.momentum) && finite_nonnegative(u.weight_decay) &&
            std::isfinite(u.dampening))
      << op << ": invalid coefficients lr=" << u.lr << ", momentum=" << u.momentum
      << ", dampening=" << u.dampening << ", weight_decay=" << u.weight_decay;
  check_writable(op, param, "parameter");
  if (u.momentum != 0.0) check_state(op, param, momentum_buffer, "momentum_buffer");
  NoGradGuard no_grad;
  sgd_update_kernel(param.device(), param, grad, momentum_buffer, u);
  param.storage()->bump_version();
  if (u.momentum != 0.0) momentum_buffer.storage()->bump_version();
}

namespace {

void check_adam(const char* op, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamUpdate& u) {
  check_param_grad(op, param, grad);
  LSF_CHECK(finite_nonnegative(u.lr) && finite_nonnegative(u.eps) && finite_nonnegative(u.weight_decay) &&
            u.beta1 >= 0.0 && u.beta1 < 1.0 && u.beta2 >= 0.0 && u.beta2 < 1.0 && u.step >= 1)
      << op << ": invalid coefficients lr=" << u.lr << ", betas=(" << u.beta1 << ", " << u.beta2
      << "), eps=" << u.eps << ", weight_decay=" << u.weight_decay << ", step=" << u.step;
  check_writable(op, param, "parameter");
  check_state(op, param, exp_avg, "exp_avg");
  check_state(op, param, exp_avg_sq, "exp_avg_sq");
  if (u.amsgrad) check_state(op, param, max_exp_avg_sq, "max_exp_avg_sq");
}

void bump_adam_versions(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamUpdate& u) {
  param.storage()->bump_version();
  exp_avg.storage()->bump_version();
  exp_avg_sq.storage()->bump_version();
  if (u.amsgrad) max_exp_avg_sq.storage()->bump_version();
}

}  // namespace

void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                  const Tensor& max_exp_avg_sq, const AdamUpdate& u) {
  check_adam("adam_update_", param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, u);
  NoGradGuard no_grad;
  adam_update_kernel(param.device(), param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, u);
  bump_adam_versions(param, exp_avg, exp_avg_sq, max_exp_avg_sq, u);
}

void adam_multi_update_(const std::vector<AdamTensor>& list) {
  const char* op = "adam_multi_update_";
  if (list.empty()) return;
  for (const AdamTensor& t : list) {
    check_adam(op, t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq, t.u);
    LSF_CHECK(t.param.device() == list.front().param.device())
        << op << ": every tensor must be on one device, got " << list.front().param.device() << " and "
        << t.param.device() << " (parameter shape " << t.param.shape() << ")";
  }
  NoGradGuard no_grad;
  adam_multi_update_kernel(list.front().param.device(), list);
  for (const AdamTensor& t : list) bump_adam_versions(t.param, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq, t.u);
}

namespace {
void check_norm_input(const char* op, const Tensor& x, double p) {
  check_defined(op, {&x});
  LSF_CHECK(p > 0.0) << op << ": the norm order must be positive or inf, got " << p << " (shape " << x.shape() << ")";
  LSF_CHECK(is_floating(x.dtype())) << op << ": expected a floating-point tensor, got " << x.dtype() << " (shape "
                                    << x.shape() << ")";
}
}  // namespace

double norm_pow_sum(const Tensor& x, double p) {
  check_norm_input("norm_pow_sum", x, p);
  if (x.numel() == 0) return 0.0;
  return norm_pow_sum_kernel(x.device(), x, p);
}

std::vector<double> norm_pow_sums(const TensorList& xs, double p) {
  const char* op = "norm_pow_sums";
  for (const Tensor& x : xs) check_norm_input(op, x, p);
  std::vector<double> values(xs.size(), 0.0);  // an empty tensor's sum is 0
  // One kernel call per device, over its non-empty tensors in list order.
  std::vector<bool> done(xs.size(), false);
  for (size_t first = 0; first < xs.size(); ++first) {
    if (done[first] || xs[first].numel() == 0) continue;
    const Device device = xs[first].device();
    TensorList group;
    std::vector<size_t> at;
    for (size_t i = first; i < xs.size(); ++i)
      if (!done[i] && xs[i].numel() > 0 && xs[i].device() == device) {
        group.push_back(xs[i]);
        at.push_back(i);
        done[i] = true;
      }
    const std::vector<double> sums = norm_pow_sums_kernel(device, group, p);
    LSF_CHECK(sums.size() == group.size()) << op << ": internal error: " << sums.size() << " values for "
                                           << group.size() << " tensors";
    for (size_t k = 0; k < at.size(); ++k) values[at[k]] = sums[k];
  }
  return values;
}

void scale_(const Tensor& x, double factor) {
  check_defined("scale_", {&x});
  LSF_CHECK(is_floating(x.dtype())) << "scale_: expected a floating-point tensor, got " << x.dtype()
                                    << " (shape " << x.shape() << ")";
  check_writable("scale_", x, "tensor");
  if (x.numel() == 0) return;
  NoGradGuard no_grad;
  scale_inplace_kernel(x.device(), x, factor);
  x.storage()->bump_version();
}

}  // namespace lsf
