// One training update in pieces shared by the trainer's loop and `lsf bench` (see update_step.h).
#include "lsformer/models/train/update_step.h"

#include <cmath>

#include "lsformer/engine/autocast.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/engine/profiler.h"
#include "lsformer/models/optim/clip.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/reduce.h"

namespace lsf::train {

TrainStep forward_backward(Task& task, nn::Module& model, optim::Optimizer& optimizer, optim::Schedule& schedule,
                           optim::GradScaler* scaler, Precision precision, int64_t step, float& loss,
                           const std::function<void()>& before_backward) {
  optim::apply_schedule(schedule, optimizer, step);  // lr and beta1 for this update
  TrainStep s;
  {
    AutocastGuard autocast(autocast_dtype_of(precision));  // the forward only, as PyTorch's autocast
    s = task.train_step(model, step);
  }
  loss = s.loss.item<float>();
  if (before_backward) before_backward();
  (scaler ? scaler->scale(s.loss) : s.loss).backward();
  return s;
}

// One reduction over all gradients (x·0 is 0 for finite x, NaN otherwise), and a
// search parameter by parameter only when it finds something.
std::string first_non_finite_gradient(const nn::Module& model) {
  NoGradGuard no_grad;
  const NamedTensors params = model.named_parameters();
  Tensor probe;
  for (const auto& [name, p] : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor s = sum(mul(g, 0.0)).to(kF64);
    probe = probe.defined() ? add(probe, s) : s;
  }
  if (!probe.defined() || std::isfinite(probe.item<double>())) return {};
  for (const auto& [name, p] : params) {
    const Tensor g = p.grad();
    if (g.defined() && !std::isfinite(sum(mul(g, 0.0)).to(kF64).item<double>())) return name;
  }
  return "?";  // unreachable: the sum saw a non-finite gradient
}

GradientCheck check_gradients(const nn::Module& model, optim::Optimizer& optimizer, optim::GradScaler* scaler,
                              float loss) {
  GradientCheck c;
  c.scaler_skip = scaler != nullptr && !scaler->unscale_(optimizer);
  // With the scaler, unscale_ has just checked every gradient: no second walk over them.
  if (!scaler) c.bad_param = first_non_finite_gradient(model);
  c.faulty = !c.scaler_skip && (!std::isfinite(loss) || !c.bad_param.empty());
  return c;
}

double apply_update(const nn::Module& model, optim::Optimizer& optimizer, double grad_clip, bool want_norm) {
  profiler::PhaseScope phase("optimizer");
  double norm = 0.0;
  if (grad_clip > 0)
    norm = optim::clip_grad_norm_(model.named_parameters(), grad_clip).norm;
  else if (want_norm)
    norm = optim::grad_norm(model.parameters());
  optimizer.step();
  return norm;
}

void end_update(optim::Optimizer& optimizer, optim::GradScaler* scaler) {
  if (scaler) scaler->update();
  profiler::PhaseScope phase("optimizer");
  optimizer.zero_grad();
}

}  // namespace lsf::train
