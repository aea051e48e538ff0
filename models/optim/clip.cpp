// clip_grad_norm_: the global norm from per-tensor Σ|g|^p partials (ops/optim_update.h,
// norm_pow_sums: one device synchronisation per device), then one in-place scaling per gradient.
#include "lsformer/models/optim/clip.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "lsformer/engine/error.h"
#include "lsformer/ops/optim_update.h"

namespace lsf::optim {

namespace {

void check_norm_type(const char* op, double norm_type) {
  LSF_CHECK(norm_type > 0.0 && !std::isnan(norm_type))
      << op << ": norm_type must be positive or inf, got " << norm_type;
}

double total_norm(const char* op, const TensorList& parameters, double norm_type) {
  check_norm_type(op, norm_type);
  const bool is_max = std::isinf(norm_type);
  TensorList grads;
  for (const Tensor& p : parameters) {
    LSF_CHECK(p.defined()) << op << ": a parameter is undefined";
    if (Tensor g = p.grad(); g.defined()) grads.push_back(g);
  }
  // Each gradient's Σ|g|^p (on a GPU: one synchronisation per device for all of them), summed
  // on the host in parameter order as before.
  double acc = 0.0;
  for (const double v : norm_pow_sums(grads, norm_type)) {
    if (is_max) {
      acc = (std::isnan(v) || std::isnan(acc)) ? std::nan("") : std::max(acc, v);
    } else {
      acc += v;
    }
  }
  if (is_max || norm_type == 1.0) return acc;
  if (norm_type == 2.0) return std::sqrt(acc);
  return std::pow(acc, 1.0 / norm_type);
}

TensorList tensors_of(const NamedTensors& named) {
  TensorList out;
  for (const auto& [name, t] : named) out.push_back(t);
  return out;
}

}  // namespace

double grad_norm(const TensorList& parameters, double norm_type) {
  return total_norm("grad_norm", parameters, norm_type);
}

ClipResult clip_grad_norm_(const TensorList& parameters, double max_norm, double norm_type, NonFinite non_finite) {
  const char* op = "clip_grad_norm_";
  LSF_CHECK(std::isfinite(max_norm) && max_norm >= 0.0)
      << op << ": max_norm must be a finite number ≥ 0, got " << max_norm;
  ClipResult r;
  r.norm = total_norm(op, parameters, norm_type);
  r.finite = std::isfinite(r.norm);
  if (!r.finite) {
    LSF_CHECK(non_finite != NonFinite::Error)
        << op << ": the total norm of order " << norm_type << " of the gradients is " << r.norm
        << " (non-finite), so they cannot be clipped; skip this step (NonFinite::Skip) or scale "
           "anyway (NonFinite::Ignore)";
    if (non_finite == NonFinite::Skip) return r;
  }
  // PyTorch: coef = max_norm / (norm + 1e-6), clamped to ≤ 1 (NaN stays NaN).
  const double coef = max_norm / (r.norm + 1e-6);
  if (!(coef < 1.0) && !std::isnan(coef)) return r;
  for (const Tensor& p : parameters) {
    Tensor g = p.grad();
    if (g.defined()) scale_(g, coef);
  }
  r.clipped = true;
  return r;
}

ClipResult clip_grad_norm_(const NamedTensors& parameters, double max_norm, double norm_type, NonFinite non_finite) {
  return clip_grad_norm_(tensors_of(parameters), max_norm, norm_type, non_finite);
}

}  // namespace lsf::optim
