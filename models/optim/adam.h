// Adam and AdamW, exactly as torch.optim.Adam / AdamW define them in PyTorch 1.13 (single-tensor
// path, maximize = false):
//
//   Adam   g ← grad + weight_decay·p                       (L2 penalty in the gradient)
//   AdamW  p ← p·(1 − lr·weight_decay)                     (decoupled decay, before the update)
//   both   m ← β1·m + (1 − β1)·g;   v ← β2·v + (1 − β2)·g²;   amsgrad: v̂ ← max(v̂, v)
//          p ← p − lr/(1 − β1^t) · m / (√v / √(1 − β2^t) + eps)      (t: the parameter's step)
//
// eps is added after the square root of the bias-corrected second moment. (HuggingFace's and
// fairseq's AdamW add it to √v before the correction and decay after / before the step: a
// different eps scale early in training and a second-order difference in the decay.)
// Buffers: "exp_avg", "exp_avg_sq", and "max_exp_avg_sq" with amsgrad, created at a
// parameter's first update.
#pragma once

#include <array>

#include "lsformer/models/optim/optimizer.h"
#include "lsformer/ops/optim_update.h"

namespace lsf::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};  // each in [0, 1)
  double eps = 1e-8;
  double weight_decay = 0.0;  // L2 penalty added to the gradient
  bool amsgrad = false;
};

struct AdamWOptions {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};  // each in [0, 1)
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: p ← p·(1 − lr·weight_decay) each step
  bool amsgrad = false;
};

namespace detail {

// Adam and AdamW share everything but the decay, which is decoupled for AdamWOptions.
template <typename Options>
class AdamFamily : public Optimizer {
 public:
  static constexpr bool kDecoupled = std::is_same_v<Options, AdamWOptions>;

  explicit AdamFamily(const NamedTensors& params, const Options& options = {});
  explicit AdamFamily(const std::vector<ParamGroup<Options>>& groups);

  const Options& options(size_t group = 0) const;
  void set_options(size_t group, const Options& options);  // validated
  OptionMap option_map(size_t group) const override;

 protected:
  void update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  // On one CUDA device: every parameter in one multi-tensor launch (the fused AdamW step).
  void update_all(const std::vector<PendingUpdate>& updates) override;
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}; }
  std::vector<std::string> required_buffers(size_t group) const override;
  void set_option_map(size_t group, const OptionMap& options) override;
  double group_lr(size_t group) const override { return options_[group].lr; }
  void set_group_lr(size_t group, double lr) override { options_[group].lr = lr; }
  double group_momentum(size_t group) const override { return options_[group].betas[0]; }
  void set_group_momentum(size_t group, double beta1) override;

 private:
  // One parameter's kernel arguments for update number `step`; buffers it lacks are made (zero)
  // into `created`, which joins the state only once the update has succeeded.
  AdamTensor prepare(size_t group, const Tensor& param, const Tensor& grad, const ParamState& state, int64_t step,
                     std::map<std::string, Tensor>& created) const;

  std::vector<Options> options_;
};

extern template class AdamFamily<AdamOptions>;
extern template class AdamFamily<AdamWOptions>;

}  // namespace detail

class Adam final : public detail::AdamFamily<AdamOptions> {
 public:
  using AdamFamily::AdamFamily;
};

class AdamW final : public detail::AdamFamily<AdamWOptions> {
 public:
  using AdamFamily::AdamFamily;
};

}  // namespace lsf::optim
