// Adam / AdamW: option checks (as PyTorch's constructors make them), lazy state creation and
// the per-parameter update through the fused kernel of ops/optim_update.h.
//
// On the GPU, one step updates every parameter in one multi-tensor launch
// (adam_multi_update_, through update_all) when all parameters that have a gradient sit on one
// CUDA device with gradients of their device and dtype. Everything else (the CPU, mixed
// devices) updates each parameter in turn.
#include "lsformer/models/optim/adam.h"

#include <cmath>
#include <map>

#include "lsformer/engine/error.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/optim_update.h"

namespace lsf::optim::detail {

namespace {

template <typename Options>
const char* type_of() {
  return AdamFamily<Options>::kDecoupled ? "AdamW" : "Adam";
}

template <typename Options>
std::vector<NamedTensors> params_of(const std::vector<ParamGroup<Options>>& groups) {
  std::vector<NamedTensors> out;
  for (const auto& g : groups) out.push_back(g.params);
  return out;
}

// True when the whole step can be one multi-tensor launch: more than one parameter, all on one
// CUDA device, each with a gradient of its device and dtype.
bool fusable(const std::vector<Optimizer::PendingUpdate>& updates) {
  if (updates.size() < 2) return false;
  const Device device = updates.front().param->device();
  if (device.type != DeviceType::CUDA) return false;
  for (const auto& u : updates) {
    const Tensor& p = *u.param;
    if (p.device() != device || u.grad.device() != device || u.grad.dtype() != p.dtype() || !is_floating(p.dtype()))
      return false;
  }
  return true;
}

template <typename Options>
void validate(size_t group, const Options& o) {
  const char* type = type_of<Options>();
  check_lr(type, group, o.lr);
  check_nonnegative(type, group, "epsilon", o.eps);
  check_nonnegative(type, group, "weight_decay", o.weight_decay);
  for (int i = 0; i < 2; ++i)
    LSF_CHECK(o.betas[i] >= 0.0 && o.betas[i] < 1.0)
        << type << ": invalid beta parameter at index " << i << ": " << o.betas[i] << " (group " << group
        << "); betas must lie in [0, 1)";
}

}  // namespace

template <typename Options>
AdamFamily<Options>::AdamFamily(const NamedTensors& params, const Options& options)
    : AdamFamily(std::vector<ParamGroup<Options>>{{params, options}}) {}

template <typename Options>
AdamFamily<Options>::AdamFamily(const std::vector<ParamGroup<Options>>& groups)
    : Optimizer(type_of<Options>(), params_of(groups)) {
  for (size_t g = 0; g < groups.size(); ++g) {
    validate(g, groups[g].options);
    options_.push_back(groups[g].options);
  }
}

template <typename Options>
const Options& AdamFamily<Options>::options(size_t group) const {
  check_group(group);
  return options_[group];
}

template <typename Options>
void AdamFamily<Options>::set_options(size_t group, const Options& options) {
  check_group(group);
  validate(group, options);
  options_[group] = options;
}

template <typename Options>
void AdamFamily<Options>::set_group_momentum(size_t group, double beta1) {
  Options o = options_[group];
  o.betas[0] = beta1;
  set_options(group, o);
}

template <typename Options>
OptionMap AdamFamily<Options>::option_map(size_t group) const {
  const Options& o = options(group);
  return {{"lr", o.lr}, {"beta1", o.betas[0]}, {"beta2", o.betas[1]}, {"eps", o.eps},
          {"weight_decay", o.weight_decay}, {"amsgrad", o.amsgrad}};
}

template <typename Options>
void AdamFamily<Options>::set_option_map(size_t group, const OptionMap& m) {
  const char* type = type_of<Options>();
  check_option_keys(type, group, m, {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad"});
  Options o;
  o.lr = option_number(type, group, m, "lr");
  o.betas = {option_number(type, group, m, "beta1"), option_number(type, group, m, "beta2")};
  o.eps = option_number(type, group, m, "eps");
  o.weight_decay = option_number(type, group, m, "weight_decay");
  o.amsgrad = option_flag(type, group, m, "amsgrad");
  set_options(group, o);
}

template <typename Options>
std::vector<std::string> AdamFamily<Options>::required_buffers(size_t group) const {
  if (options_[group].amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

template <typename Options>
AdamTensor AdamFamily<Options>::prepare(size_t group, const Tensor& param, const Tensor& grad, const ParamState& state,
                                        int64_t step, std::map<std::string, Tensor>& created) const {
  const Options& o = options_[group];
  // Zero moments at the first update (and a zero running maximum when amsgrad is switched on
  // later, which is what a fresh one would hold).
  auto buffer = [&](const char* name) -> Tensor {
    auto it = state.buffers.find(name);
    if (it != state.buffers.end()) return it->second;
    return created[name] = zeros(param.shape(), param.options());
  };
  Tensor exp_avg = buffer("exp_avg"), exp_avg_sq = buffer("exp_avg_sq");
  Tensor max_exp_avg_sq = o.amsgrad ? buffer("max_exp_avg_sq") : Tensor();
  const AdamUpdate u{.lr = o.lr, .beta1 = o.betas[0], .beta2 = o.betas[1], .eps = o.eps,
                     .weight_decay = o.weight_decay, .decoupled = kDecoupled, .amsgrad = o.amsgrad, .step = step};
  return {param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, u};
}

template <typename Options>
void AdamFamily<Options>::update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) {
  std::map<std::string, Tensor> created;
  const AdamTensor t = prepare(group, param, grad, state, state.step, created);
  adam_update_(t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq, t.u);
  state.buffers.merge(created);
}

template <typename Options>
void AdamFamily<Options>::update_all(const std::vector<PendingUpdate>& updates) {
  if (!fusable(updates)) {
    Optimizer::update_all(updates);
    return;
  }
  std::vector<AdamTensor> list;
  std::vector<std::map<std::string, Tensor>> created(updates.size());
  list.reserve(updates.size());
  for (size_t k = 0; k < updates.size(); ++k) {
    const PendingUpdate& up = updates[k];
    list.push_back(prepare(up.group, *up.param, up.grad, *up.state, up.state->step + 1, created[k]));
  }
  adam_multi_update_(list);  // checks every entry before it writes any
  for (size_t k = 0; k < updates.size(); ++k) {
    ++updates[k].state->step;
    updates[k].state->buffers.merge(created[k]);
  }
}

template class AdamFamily<AdamOptions>;
template class AdamFamily<AdamWOptions>;

}  // namespace lsf::optim::detail
