// Stochastic gradient descent with momentum, exactly torch.optim.SGD (PyTorch 1.13):
//
//   g ← grad + weight_decay·p
//   buf ← g on the first step with momentum, else momentum·buf + (1 − dampening)·g
//   g ← g + momentum·buf (nesterov) or buf
//   p ← p − lr·g
//
// The buffer ("momentum_buffer") exists only once a step ran with momentum ≠ 0.
#pragma once

#include "lsformer/models/optim/optimizer.h"

namespace lsf::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2 penalty added to the gradient
  bool nesterov = false;      // needs momentum > 0 and dampening = 0
};

class SGD final : public Optimizer {
 public:
  explicit SGD(const NamedTensors& params, const SGDOptions& options = {});
  explicit SGD(const std::vector<ParamGroup<SGDOptions>>& groups);

  const SGDOptions& options(size_t group = 0) const;
  void set_options(size_t group, const SGDOptions& options);  // validated
  OptionMap option_map(size_t group) const override;

 protected:
  void update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  std::vector<std::string> buffer_names() const override { return {"momentum_buffer"}; }
  std::vector<std::string> required_buffers(size_t group) const override;
  void set_option_map(size_t group, const OptionMap& options) override;
  double group_lr(size_t group) const override { return options_[group].lr; }
  void set_group_lr(size_t group, double lr) override { options_[group].lr = lr; }
  double group_momentum(size_t group) const override { return options_[group].momentum; }
  void set_group_momentum(size_t group, double momentum) override;

 private:
  std::vector<SGDOptions> options_;
};

}  // namespace lsf::optim
