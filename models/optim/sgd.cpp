// SGD: option checks (as torch.optim.SGD's constructor makes them) and the per-parameter update
// through the fused kernel of ops/optim_update.h.
#include "lsformer/models/optim/sgd.h"

#include <cmath>

#include "lsformer/engine/error.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/optim_update.h"

namespace lsf::optim {

namespace {

std::vector<NamedTensors> params_of(const std::vector<ParamGroup<SGDOptions>>& groups) {
  std::vector<NamedTensors> out;
  for (const auto& g : groups) out.push_back(g.params);
  return out;
}

void validate(size_t group, const SGDOptions& o) {
  detail::check_lr("SGD", group, o.lr);
  detail::check_nonnegative("SGD", group, "momentum", o.momentum);
  detail::check_nonnegative("SGD", group, "weight_decay", o.weight_decay);
  LSF_CHECK(std::isfinite(o.dampening)) << "SGD: invalid dampening " << o.dampening << " (group " << group << ")";
  LSF_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0))
      << "SGD: Nesterov momentum requires a momentum > 0 and zero dampening (group " << group
      << " has momentum " << o.momentum << ", dampening " << o.dampening << ")";
}

}  // namespace

SGD::SGD(const NamedTensors& params, const SGDOptions& options) : SGD(std::vector<ParamGroup<SGDOptions>>{{params, options}}) {}

SGD::SGD(const std::vector<ParamGroup<SGDOptions>>& groups) : Optimizer("SGD", params_of(groups)) {
  for (size_t g = 0; g < groups.size(); ++g) {
    validate(g, groups[g].options);
    options_.push_back(groups[g].options);
  }
}

const SGDOptions& SGD::options(size_t group) const {
  check_group(group);
  return options_[group];
}

void SGD::set_options(size_t group, const SGDOptions& options) {
  check_group(group);
  validate(group, options);
  options_[group] = options;
}

void SGD::set_group_momentum(size_t group, double momentum) {
  SGDOptions o = options_[group];
  o.momentum = momentum;
  set_options(group, o);
}

OptionMap SGD::option_map(size_t group) const {
  const SGDOptions& o = options(group);
  return {{"lr", o.lr}, {"momentum", o.momentum}, {"dampening", o.dampening}, {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov}};
}

void SGD::set_option_map(size_t group, const OptionMap& m) {
  detail::check_option_keys("SGD", group, m, {"lr", "momentum", "dampening", "weight_decay", "nesterov"});
  set_options(group, SGDOptions{.lr = detail::option_number("SGD", group, m, "lr"),
                                .momentum = detail::option_number("SGD", group, m, "momentum"),
                                .dampening = detail::option_number("SGD", group, m, "dampening"),
                                .weight_decay = detail::option_number("SGD", group, m, "weight_decay"),
                                .nesterov = detail::option_flag("SGD", group, m, "nesterov")});
}

std::vector<std::string> SGD::required_buffers(size_t group) const {
  // A buffer exists once a step ran with momentum; momentum may have been 0 then (OneCycle can
  // change it), so none is required.
  return {};
}

void SGD::update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) {
  const SGDOptions& o = options_[group];
  SgdUpdate u{.lr = o.lr, .momentum = o.momentum, .dampening = o.dampening, .weight_decay = o.weight_decay,
              .nesterov = o.nesterov, .init_buffer = false};
  Tensor buffer;
  if (o.momentum != 0.0) {
    auto it = state.buffers.find("momentum_buffer");
    if (it == state.buffers.end()) {
      buffer = empty(param.shape(), param.options());  // written, not read, on its first use
      u.init_buffer = true;
    } else {
      buffer = it->second;
    }
  }
  sgd_update_(param, grad, buffer, u);
  if (u.init_buffer) state.buffers["momentum_buffer"] = buffer;
}

}  // namespace lsf::optim
