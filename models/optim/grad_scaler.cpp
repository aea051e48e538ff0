// optim::GradScaler (see grad_scaler.h), following torch.amp.GradScaler's arithmetic: the scale
// is an f32 value, the unscaling factor the f32 rounding of 1/scale computed in double, and the
// update is _amp_update_scale_'s.
#include "lsformer/models/optim/grad_scaler.h"

#include <cmath>

#include "lsformer/engine/autograd.h"
#include "lsformer/engine/error.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/optim_update.h"

namespace lsf::optim {

namespace {

void check_options(const GradScalerOptions& o) {
  LSF_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0)
      << "GradScaler: init_scale must be a positive finite number, got " << o.init_scale;
  LSF_CHECK(std::isfinite(o.growth_factor) && o.growth_factor > 1.0)
      << "GradScaler: growth_factor must be > 1, got " << o.growth_factor;
  LSF_CHECK(o.backoff_factor > 0.0 && o.backoff_factor < 1.0)
      << "GradScaler: backoff_factor must be in (0, 1), got " << o.backoff_factor;
  LSF_CHECK(o.growth_interval >= 1) << "GradScaler: growth_interval must be ≥ 1, got " << o.growth_interval;
}

}  // namespace

GradScaler::GradScaler(const GradScalerOptions& options) : options_(options) {
  check_options(options_);
  scale_value_ = float(options_.init_scale);
  LSF_CHECK(std::isfinite(scale_value_)) << "GradScaler: init_scale " << options_.init_scale << " overflows f32";
}

Tensor GradScaler::scale(const Tensor& loss) const {
  LSF_CHECK(loss.defined()) << "GradScaler::scale: the loss is undefined";
  LSF_CHECK(is_floating(loss.dtype())) << "GradScaler::scale: expected a floating-point loss, got " << loss.dtype();
  return mul(loss, double(scale_value_));
}

bool GradScaler::unscale_(Optimizer& optimizer) {
  LSF_CHECK(!unscaled_) << "GradScaler::unscale_: already called since the last update() (the gradients would be "
                           "divided twice)";
  // PyTorch: inv_scale = scale.double().reciprocal().float(); every gradient is multiplied by it
  // (non-finite ones too), and found_inf is set if any is non-finite afterwards.
  const double inv_scale = double(float(1.0 / double(scale_value_)));
  TensorList grads;
  for (const auto& [name, p] : optimizer.named_parameters())
    if (Tensor g = p.grad(); g.defined()) grads.push_back(g);
  found_inf_ = false;
  {
    NoGradGuard no_grad;
    for (const Tensor& g : grads) lsf::scale_(g, inv_scale);
  }
  // max |g| of each (NaN when any element is NaN): one synchronisation per device on a GPU.
  for (double m : norm_pow_sums(grads, INFINITY))
    if (!std::isfinite(m)) found_inf_ = true;
  unscaled_ = true;
  return !found_inf_;
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!unscaled_) unscale_(optimizer);
  if (found_inf_) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  LSF_CHECK(unscaled_) << "GradScaler::update: no step() or unscale_() since the last update()";
  if (found_inf_) {
    scale_value_ = float(double(scale_value_) * options_.backoff_factor);
    growth_tracker_ = 0;
  } else if (growth_tracker_ + 1 == options_.growth_interval) {
    const float grown = float(double(scale_value_) * options_.growth_factor);
    if (std::isfinite(grown)) scale_value_ = grown;
    growth_tracker_ = 0;
  } else {
    ++growth_tracker_;
  }
  unscaled_ = false;
  found_inf_ = false;
}

void GradScaler::set_state(double scale, int64_t growth_tracker) {
  LSF_CHECK(std::isfinite(scale) && scale > 0 && std::isfinite(float(scale)))
      << "GradScaler::set_state: the scale must be a positive finite f32 value, got " << scale;
  LSF_CHECK(growth_tracker >= 0 && growth_tracker < options_.growth_interval)
      << "GradScaler::set_state: growth_tracker must be in [0, growth_interval = " << options_.growth_interval
      << "), got " << growth_tracker;
  scale_value_ = float(scale);
  growth_tracker_ = growth_tracker;
  unscaled_ = found_inf_ = false;
}

}  // namespace lsf::optim
