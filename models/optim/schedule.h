// Learning-rate schedules as pure functions of the step (0-based: the lr used by the step-th
// optimizer update), and apply_schedule() which writes them into an optimizer's groups.
//
//   for (int64_t step = 0; step < total; ++step) {
//     optim::apply_schedule(schedule, opt, step);   // lr (and momentum) for this update
//     ...forward, backward, clip...; opt.step();
//   }
//
// What the paper's three code bases use (docs/transformer-ls.md §2.6, §3.8, §4.5):
//   LRA      OneCycle{.max_lr = 1e-4, .total_steps = N, .pct_start = warmup/N, .anneal = Linear}
//            — also cycles AdamW's beta1 0.95 → 0.85 → 0.95
//   char-LM  WarmupConstant{.lr, .warmup_steps}        (fairseq "fixed" + warmup)
//   ViL      WarmupCosine(vil_warmup_cosine(lr, warmup, total))
// Every schedule reproduces its reference formula operation for operation in double.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace lsf::optim {

class Optimizer;

class Schedule {
 public:
  virtual ~Schedule() = default;
  // The learning rate for update number `step` ≥ 0.
  virtual double lr(int64_t step) const = 0;
  // The momentum (SGD momentum / Adam's beta1) for that update, when the schedule sets one.
  virtual std::optional<double> momentum(int64_t step) const { return std::nullopt; }
};

// Sets every group's lr (and momentum, when the schedule gives one) for update `step`.
void apply_schedule(const Schedule& schedule, Optimizer& optimizer, int64_t step);

// ---- constant ----
class ConstantLR final : public Schedule {
 public:
  explicit ConstantLR(double lr);
  double lr(int64_t step) const override;

 private:
  double lr_;
};

// ---- linear warmup, then constant (fairseq's "fixed" schedule with warmup_updates) ----
// lr·(step + 1)/warmup_steps while step < warmup_steps, then lr.
struct WarmupConstantOptions {
  double lr = 0.0;
  int64_t warmup_steps = 0;
};
class WarmupConstant final : public Schedule {
 public:
  explicit WarmupConstant(const WarmupConstantOptions& options);
  double lr(int64_t step) const override;

 private:
  WarmupConstantOptions o_;
};

// ---- linear warmup, then cosine decay to a floor ----
// Warmup (step < warmup_steps), a = step / warmup_steps:
//     lr · (warmup_start_factor·(1 − a) + a)
// Then, with steps past total_steps held at total_steps:
//   rebase = true:   min_lr + (lr − min_lr)·(1 + cos(π·(step − warmup)/(total − warmup)))/2
//   rebase = false:  min_lr + (lr − min_lr)·(1 + cos(π·step/total))/2   (on the global step, so
//                    the cosine starts slightly below the peak: the ViL code)
struct WarmupCosineOptions {
  double lr = 0.0;  // peak
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // > warmup_steps; the cosine reaches min_lr here
  double min_lr = 0.0;
  double warmup_start_factor = 0.0;  // warmup starts at lr·warmup_start_factor
  bool rebase = true;
};
// The ViL-LS recipe: warmup from 0.002·lr, floor 1e-6, cosine on the global step.
WarmupCosineOptions vil_warmup_cosine(double lr, int64_t warmup_steps, int64_t total_steps);
class WarmupCosine final : public Schedule {
 public:
  explicit WarmupCosine(const WarmupCosineOptions& options);
  double lr(int64_t step) const override;

 private:
  WarmupCosineOptions o_;
};

// ---- OneCycle: torch.optim.lr_scheduler.OneCycleLR (PyTorch 1.13) ----
// Phases (end steps as PyTorch computes them, in floating point):
//   two-phase    [0, pct_start·total − 1]: initial_lr → max_lr, momentum max → base
//                (…, total − 1]:            max_lr → min_lr,     momentum base → max
//   three_phase  [0, pct·total − 1]: initial → max; (…, 2·pct·total − 2]: max → initial;
//                (…, total − 1]: initial → min_lr, momentum held at max
// with initial_lr = max_lr/div_factor, min_lr = initial_lr/final_div_factor. Defined for
// 0 ≤ step ≤ total_steps (step = total_steps extrapolates the last phase, as PyTorch does).
enum class Anneal { Cos, Linear };
struct OneCycleOptions {
  double max_lr = 0.0;
  int64_t total_steps = 0;
  double pct_start = 0.3;
  Anneal anneal = Anneal::Cos;  // PyTorch's default; the LRA scripts use Linear
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
};
class OneCycle final : public Schedule {
 public:
  explicit OneCycle(const OneCycleOptions& options);
  double lr(int64_t step) const override;
  std::optional<double> momentum(int64_t step) const override;

 private:
  struct Phase {
    double end_step;
    double start_lr, end_lr, start_momentum, end_momentum;
  };
  // The phase of `step` and the fraction of it done (PyTorch's pct).
  std::pair<const Phase*, double> locate(int64_t step) const;
  double anneal(double start, double end, double pct) const;
  OneCycleOptions o_;
  std::vector<Phase> phases_;
};

// ---- linear warmup, then linear decay ----
// lr·step/warmup_steps while step < warmup_steps (from 0, as HuggingFace's linear schedule),
// then end_lr + (lr − end_lr)·(total − step)/(total − warmup), held at end_lr from total_steps.
struct LinearDecayOptions {
  double lr = 0.0;
  int64_t total_steps = 0;  // > warmup_steps
  int64_t warmup_steps = 0;
  double end_lr = 0.0;
};
class LinearDecay final : public Schedule {
 public:
  explicit LinearDecay(const LinearDecayOptions& options);
  double lr(int64_t step) const override;

 private:
  LinearDecayOptions o_;
};

}  // namespace lsf::optim
