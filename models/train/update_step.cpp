// One training update in pieces shared by the trainer's loop and `lsf bench` (see update_step.h).
#include "lsformer/models/train/update_step.h"

#include <cmath>
#include <vector>

#include "lsformer/engine/autocast.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/engine/profiler.h"
#include "lsformer/models/optim/clip.h"
#include "lsformer/ops/optim_update.h"

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

// max |g| of every gradient (NaN or inf exactly when the gradient holds one), all of them in one
// pass each and, on a GPU, one synchronisation per device: the loss scaler's own check
// (GradScaler::unscale_), which also names the parameter without a second pass.
std::string first_non_finite_gradient(const nn::Module& model) {
  NoGradGuard no_grad;
  std::vector<std::string> names;
  TensorList grads;
  for (const auto& [name, p] : model.named_parameters())
    if (Tensor g = p.grad(); g.defined()) {
      names.push_back(name);
      grads.push_back(g);
    }
  const std::vector<double> max_abs = norm_pow_sums(grads, INFINITY);
  for (size_t i = 0; i < max_abs.size(); ++i)
    if (!std::isfinite(max_abs[i])) return names[i];
  return {};
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
