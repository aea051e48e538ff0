// Learning-rate schedules: argument checks and the formulas, written in the same order of
// operations as their references so that the values agree to the last bit in double.
#include "lsformer/models/optim/schedule.h"

#include <cmath>
#include <numbers>

#include "lsformer/engine/error.h"
#include "lsformer/models/optim/optimizer.h"

namespace lsf::optim {

namespace {

void check_step(const char* type, int64_t step) {
  LSF_CHECK(step >= 0) << type << ": step must be ≥ 0, got " << step;
}

void check_rate(const char* type, const char* what, double v) {
  LSF_CHECK(std::isfinite(v) && v >= 0.0) << type << ": " << what << " must be a finite number ≥ 0, got " << v;
}

}  // namespace

void apply_schedule(const Schedule& schedule, Optimizer& optimizer, int64_t step) {
  optimizer.set_lr(schedule.lr(step));
  if (std::optional<double> m = schedule.momentum(step)) optimizer.set_momentum(*m);
}

// ---- constant ----

ConstantLR::ConstantLR(double lr) : lr_(lr) { check_rate("ConstantLR", "lr", lr); }

double ConstantLR::lr(int64_t step) const {
  check_step("ConstantLR", step);
  return lr_;
}

// ---- warmup, constant ----

WarmupConstant::WarmupConstant(const WarmupConstantOptions& options) : o_(options) {
  check_rate("WarmupConstant", "lr", o_.lr);
  LSF_CHECK(o_.warmup_steps >= 0) << "WarmupConstant: warmup_steps must be ≥ 0, got " << o_.warmup_steps;
}

double WarmupConstant::lr(int64_t step) const {
  check_step("WarmupConstant", step);
  if (step < o_.warmup_steps) return double(step + 1) / double(o_.warmup_steps) * o_.lr;  // fairseq's order
  return o_.lr;
}

// ---- warmup, cosine ----

WarmupCosineOptions vil_warmup_cosine(double lr, int64_t warmup_steps, int64_t total_steps) {
  return WarmupCosineOptions{.lr = lr, .warmup_steps = warmup_steps, .total_steps = total_steps, .min_lr = 1e-6,
                             .warmup_start_factor = 0.002, .rebase = false};
}

WarmupCosine::WarmupCosine(const WarmupCosineOptions& options) : o_(options) {
  const char* type = "WarmupCosine";
  check_rate(type, "lr", o_.lr);
  check_rate(type, "min_lr", o_.min_lr);
  check_rate(type, "warmup_start_factor", o_.warmup_start_factor);
  LSF_CHECK(o_.warmup_steps >= 0 && o_.total_steps > o_.warmup_steps)
      << type << ": need 0 ≤ warmup_steps < total_steps, got warmup_steps " << o_.warmup_steps
      << " and total_steps " << o_.total_steps;
}

double WarmupCosine::lr(int64_t step) const {
  check_step("WarmupCosine", step);
  if (step < o_.warmup_steps) {
    const double a = double(step) / double(o_.warmup_steps);
    return o_.lr * (o_.warmup_start_factor * (1.0 - a) + a);
  }
  const int64_t s = std::min(step, o_.total_steps);
  const double progress = o_.rebase ? double(s - o_.warmup_steps) / double(o_.total_steps - o_.warmup_steps)
                                    : double(s) / double(o_.total_steps);
  return o_.min_lr + (o_.lr - o_.min_lr) * (1.0 + std::cos(std::numbers::pi * progress)) / 2.0;
}

// ---- OneCycle ----

OneCycle::OneCycle(const OneCycleOptions& options) : o_(options) {
  const char* type = "OneCycle";
  LSF_CHECK(o_.total_steps > 0) << type << ": total_steps must be a positive integer, got " << o_.total_steps;
  LSF_CHECK(o_.pct_start >= 0.0 && o_.pct_start <= 1.0)
      << type << ": pct_start must lie in [0, 1], got " << o_.pct_start;
  check_rate(type, "max_lr", o_.max_lr);
  LSF_CHECK(std::isfinite(o_.div_factor) && o_.div_factor > 0.0 && std::isfinite(o_.final_div_factor) &&
            o_.final_div_factor > 0.0)
      << type << ": div_factor and final_div_factor must be positive, got " << o_.div_factor << " and "
      << o_.final_div_factor;
  if (o_.cycle_momentum) {
    check_rate(type, "base_momentum", o_.base_momentum);
    check_rate(type, "max_momentum", o_.max_momentum);
  }
  const double initial_lr = o_.max_lr / o_.div_factor;
  const double min_lr = initial_lr / o_.final_div_factor;
  const double total = double(o_.total_steps);
  const double bm = o_.base_momentum, mm = o_.max_momentum;
  if (o_.three_phase) {
    phases_ = {{o_.pct_start * total - 1.0, initial_lr, o_.max_lr, mm, bm},
               {2.0 * o_.pct_start * total - 2.0, o_.max_lr, initial_lr, bm, mm},
               {total - 1.0, initial_lr, min_lr, mm, mm}};
  } else {
    phases_ = {{o_.pct_start * total - 1.0, initial_lr, o_.max_lr, mm, bm},
               {total - 1.0, o_.max_lr, min_lr, bm, mm}};
  }
  // Every phase is entered by some step in [0, total_steps]; one of zero length would divide
  // by zero there (PyTorch raises ZeroDivisionError at that step).
  double start = 0.0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    LSF_CHECK(phases_[i].end_step - start != 0.0)
        << type << ": phase " << i + 1 << " of " << phases_.size() << " has zero length (pct_start " << o_.pct_start
        << ", total_steps " << o_.total_steps << "); choose pct_start so that pct_start·total_steps ≠ 1"
        << (o_.three_phase ? " and the phases are distinct" : " and < total_steps");
    start = phases_[i].end_step;
  }
}

std::pair<const OneCycle::Phase*, double> OneCycle::locate(int64_t step) const {
  check_step("OneCycle", step);
  LSF_CHECK(step <= o_.total_steps) << "OneCycle: step " << step << " is past total_steps " << o_.total_steps;
  const double s = double(step);
  double start = 0.0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const Phase& p = phases_[i];
    if (s <= p.end_step || i + 1 == phases_.size()) return {&p, (s - start) / (p.end_step - start)};
    start = p.end_step;
  }
  return {&phases_.back(), 1.0};  // not reached: the last phase always matches
}

double OneCycle::anneal(double start, double end, double pct) const {
  if (o_.anneal == Anneal::Linear) return (end - start) * pct + start;
  const double cos_out = std::cos(std::numbers::pi * pct) + 1.0;
  return end + (start - end) / 2.0 * cos_out;
}

double OneCycle::lr(int64_t step) const {
  auto [phase, pct] = locate(step);
  return anneal(phase->start_lr, phase->end_lr, pct);
}

std::optional<double> OneCycle::momentum(int64_t step) const {
  if (!o_.cycle_momentum) return std::nullopt;
  auto [phase, pct] = locate(step);
  return anneal(phase->start_momentum, phase->end_momentum, pct);
}

// ---- warmup, linear decay ----

LinearDecay::LinearDecay(const LinearDecayOptions& options) : o_(options) {
  const char* type = "LinearDecay";
  check_rate(type, "lr", o_.lr);
  check_rate(type, "end_lr", o_.end_lr);
  LSF_CHECK(o_.warmup_steps >= 0 && o_.total_steps > o_.warmup_steps)
      << type << ": need 0 ≤ warmup_steps < total_steps, got warmup_steps " << o_.warmup_steps
      << " and total_steps " << o_.total_steps;
}

double LinearDecay::lr(int64_t step) const {
  check_step("LinearDecay", step);
  if (step < o_.warmup_steps) return o_.lr * double(step) / double(o_.warmup_steps);
  const int64_t s = std::min(step, o_.total_steps);
  return o_.end_lr + (o_.lr - o_.end_lr) * double(o_.total_steps - s) / double(o_.total_steps - o_.warmup_steps);
}

}  // namespace lsf::optim
