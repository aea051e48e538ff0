// Dynamic loss scaling for f16 training (issue #20), PyTorch's torch.amp.GradScaler: the loss is
// multiplied by a scale before backward so that small f16 gradients do not flush to zero; the
// gradients are divided by it again before the update, which is skipped when any of them is
// non-finite; the scale halves after such a step and doubles after growth_interval finite ones.
//
//   optim::GradScaler scaler;
//   {
//     AutocastGuard autocast(kF16);
//     loss = cross_entropy(model.forward(x), y);
//   }
//   scaler.scale(loss).backward();
//   scaler.unscale_(optimizer);                   // optional: before clipping the true gradients
//   clip_grad_norm_(model.named_parameters(), 1.0);
//   scaler.step(optimizer);                       // optimizer.step() unless a gradient is inf/NaN
//   scaler.update();
//
// The scale is kept in f32 and updated as PyTorch's _amp_update_scale_ does (a growth that would
// overflow f32 is not applied), so the sequence of scales and skipped steps is PyTorch's for the
// same gradients (tests/test_grad_scaler.cpp against tests/fixtures/grad_scaler.json). bf16 has
// f32's exponent range and needs no scaler.
#pragma once

#include <cstdint>

#include "lsformer/engine/tensor.h"
#include "lsformer/models/optim/optimizer.h"

namespace lsf::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;   // > 1
  double backoff_factor = 0.5;  // in (0, 1)
  int64_t growth_interval = 2000;  // finite steps in a row before the scale grows, ≥ 1
};

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& options = {});

  // loss · scale (differentiable; the loss's own dtype).
  Tensor scale(const Tensor& loss) const;
  // Divides every gradient of the optimizer's parameters by the scale (once per update(): a
  // second call before update() is an error, as in PyTorch) and records whether all are finite.
  // Returns that.
  bool unscale_(Optimizer& optimizer);
  // unscale_ unless already done, then optimizer.step() when every gradient is finite. Returns
  // whether it stepped.
  bool step(Optimizer& optimizer);
  // The new scale from this step's finiteness: × backoff_factor after a non-finite step (and the
  // run of finite ones restarts), × growth_factor after growth_interval finite ones in a row.
  // Needs a step() (or unscale_) since the last update().
  void update();

  double get_scale() const { return double(scale_value_); }
  int64_t growth_tracker() const { return growth_tracker_; }
  const GradScalerOptions& options() const { return options_; }
  // Checkpoints: the scale and the run of finite steps.
  void set_state(double scale, int64_t growth_tracker);

 private:
  GradScalerOptions options_;
  float scale_value_;  // f32, as PyTorch keeps it
  int64_t growth_tracker_ = 0;
  bool unscaled_ = false;  // unscale_ ran since the last update()
  bool found_inf_ = false;
};

}  // namespace lsf::optim
