// One training update as `lsf train` runs it, in pieces that the trainer's loop (trainer.cpp)
// and `lsf bench` (bench.cpp) both call, so that the benchmark times the very sequence a run
// performs and the two cannot drift apart:
//
//   TrainStep s = forward_backward(task, model, optimizer, schedule, scaler, precision, step, hook);
//   (data parallelism: the gradients' all-reduce here)
//   const GradientCheck check = check_gradients(model, optimizer, scaler, loss);
//   if (check.update()) grad_norm = apply_update(model, optimizer, grad_clip, want_norm);
//   end_update(optimizer, scaler);
//
// The loss scaler (train.precision = "f16") follows PyTorch's GradScaler: backward runs on the
// scaled loss, unscale_ divides the gradients back and finds any inf or NaN (an overflow: the
// update is skipped and update() lowers the scale, part of the method, not a failure).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "lsformer/models/nn/module.h"
#include "lsformer/models/optim/grad_scaler.h"
#include "lsformer/models/optim/optimizer.h"
#include "lsformer/models/optim/schedule.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/task.h"

namespace lsf::train {

// The schedule's learning rate (and beta1) for update `step`, the task's training forward under
// `precision`'s autocast (the forward only, as PyTorch's autocast), `before_backward` (when
// set: data parallelism's hook), then backward of the loss, scaled by `scaler` when there is
// one. Returns the step; `loss` receives its unscaled value.
TrainStep forward_backward(Task& task, nn::Module& model, optim::Optimizer& optimizer, optim::Schedule& schedule,
                           optim::GradScaler* scaler, Precision precision, int64_t step, float& loss,
                           const std::function<void()>& before_backward = {});

// The first parameter (state_dict name) whose gradient holds a NaN or an infinity; empty when
// all are finite. What check_gradients looks for without a loss scaler (train.non_finite).
std::string first_non_finite_gradient(const nn::Module& model);

// Whether the gradients may update the parameters.
struct GradientCheck {
  bool scaler_skip = false;  // the loss scaler found an overflow (its update() lowers the scale)
  bool faulty = false;       // a non-finite loss or gradient without a scaler skip (train.non_finite)
  std::string bad_param;     // the first parameter with a non-finite gradient ("" if none or not looked for)
  bool update() const { return !scaler_skip && !faulty; }
};

// With a scaler: unscale_ (the gradients back to their true scale; it checks every one of them).
// Then a non-finite `loss`, or without a scaler a non-finite gradient, is a fault: checked
// before clipping, which would spread one NaN to every gradient, and before the optimizer,
// whose moments it would poison for good.
GradientCheck check_gradients(const nn::Module& model, optim::Optimizer& optimizer, optim::GradScaler* scaler,
                              float loss);

// Clips the gradients to optimizer.grad_clip (when > 0) and runs the optimizer's step, in the
// profiler's "optimizer" phase. Returns the gradients' norm before clipping, which clipping
// computes anyway; without clipping it is computed only when `want_norm` (else 0).
double apply_update(const nn::Module& model, optim::Optimizer& optimizer, double grad_clip, bool want_norm);

// The scaler's update (its scale for the next step) and the gradients cleared for the next one.
void end_update(optim::Optimizer& optimizer, optim::GradScaler* scaler);

}  // namespace lsf::train
