// lsf::optim::Optimizer: parameter groups, per-parameter state, step / zero_grad, and state
// save/load for checkpoints. SGD, Adam and AdamW (models/optim/sgd.h, adam.h) derive from it.
//
//   auto groups = optim::decay_groups(model.named_parameters(), optim::AdamWOptions{.lr = 8e-4,
//                                     .weight_decay = 0.1}, optim::vil_no_decay_patterns());
//   optim::AdamW opt(groups);
//   for (...) { loss.backward(); opt.step(); opt.zero_grad(); }
//
// Parameters are named (NamedTensors, as Module::named_parameters() returns them): names key
// the saved state, so a checkpoint can be checked against the model it is loaded into. A
// parameter whose .grad is undefined is skipped by step(): its state and step count stay.
//
// Saved state (PyTorch's optimizer.state_dict(), split for safetensors):
//   state_tensors()  "<param name>.<buffer>" → the live state buffers, e.g. "fc1.weight.exp_avg",
//                    "fc1.weight.exp_avg_sq", "fc1.weight.max_exp_avg_sq", "fc1.weight.momentum_buffer"
//   state_json()     a JSON string: optimizer type, step() count, every group's options and
//                    parameter names, every parameter's step count and buffer names
// A checkpoint stores the tensors with the JSON string in its __metadata__ (save()/load() do
// exactly that for a file of their own). load_state() validates everything — type, groups,
// parameter names, buffer names and shapes — before it changes anything, and reports every
// problem in one lsf::Error. Loading restores the groups' options too (lr, betas, ...), as
// PyTorch's load_state_dict does.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "lsformer/engine/safetensors.h"
#include "lsformer/engine/tensor.h"

namespace lsf::optim {

// A group's options as plain values (what state_json() stores, and a way to print them).
using OptionValue = std::variant<double, bool>;
using OptionMap = std::map<std::string, OptionValue>;

// Parameters that share options (PyTorch's param_groups entries).
template <typename Options>
struct ParamGroup {
  NamedTensors params;
  Options options;
};

// What an optimizer keeps per parameter.
struct ParamState {
  int64_t step = 0;                       // updates applied to this parameter
  std::map<std::string, Tensor> buffers;  // by buffer name; each of the parameter's shape
};

// The metadata key under which save() stores state_json().
inline constexpr const char* kOptimizerMetadataKey = "optimizer";

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const std::string& type_name() const { return type_name_; }  // "SGD", "Adam", "AdamW"

  // One parameter step() is about to update.
  struct PendingUpdate {
    size_t group;
    const Tensor* param;
    Tensor grad;        // defined, of the parameter's shape
    ParamState* state;  // `step` not yet incremented
  };

  // One update of every parameter that has a gradient (under NoGradGuard; in place).
  void step();
  // Drops every gradient (set_to_none, the default, as Module::zero_grad) or zeroes it in place.
  void zero_grad(bool set_to_none = true);
  // Number of step() calls (also saved and restored).
  int64_t step_count() const { return step_count_; }

  // ---- groups ----
  size_t num_groups() const { return groups_.size(); }
  const NamedTensors& group_params(size_t group) const;
  NamedTensors named_parameters() const;  // every group's, in group order
  // Learning rate of one group; set_lr(lr) sets every group's (what schedules do).
  double lr(size_t group = 0) const;
  void set_lr(size_t group, double lr);
  void set_lr(double lr);
  // The momentum that OneCycle cycles: SGD's momentum, Adam's and AdamW's beta1.
  double momentum(size_t group = 0) const;
  void set_momentum(size_t group, double momentum);
  void set_momentum(double momentum);
  // A group's options by name ("lr", "beta1", "weight_decay", "amsgrad", ...).
  virtual OptionMap option_map(size_t group) const = 0;

  // ---- state ----
  // The state of one parameter (null before its first update or for an unknown name).
  const ParamState* state(const std::string& param_name) const;
  NamedTensors state_tensors() const;  // live buffers, not copies
  std::string state_json() const;
  void load_state(const std::map<std::string, Tensor>& tensors, const std::string& json);
  // A safetensors file holding state_tensors() and, under kOptimizerMetadataKey, state_json().
  void save(const std::string& path) const;
  void load(const std::string& path);

 protected:
  Optimizer(std::string type_name, std::vector<NamedTensors> groups);

  // Applies one update to `param` (grad defined, of its shape). `state.step` is already
  // incremented; missing buffers are the derived class's to create.
  virtual void update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) = 0;
  // Updates every parameter that has a gradient, in parameter order. The default increments
  // each state's step and calls update() (an update that throws leaves its step as it was);
  // Adam overrides it to update all parameters of one GPU in a single multi-tensor launch.
  virtual void update_all(const std::vector<PendingUpdate>& updates);
  // Every buffer name the optimizer may keep, and those a loaded state must hold for a
  // parameter with `state.step` ≥ 1 under group `group`'s (already loaded) options.
  virtual std::vector<std::string> buffer_names() const = 0;
  virtual std::vector<std::string> required_buffers(size_t group) const = 0;
  // Validates and sets one group's options from a map with exactly option_map()'s keys.
  virtual void set_option_map(size_t group, const OptionMap& options) = 0;
  virtual double group_lr(size_t group) const = 0;
  virtual void set_group_lr(size_t group, double lr) = 0;
  virtual double group_momentum(size_t group) const = 0;
  virtual void set_group_momentum(size_t group, double momentum) = 0;

  void check_group(size_t group) const;

 private:
  std::string type_name_;
  std::vector<NamedTensors> groups_;
  std::vector<std::vector<ParamState>> states_;  // parallel to groups_
  int64_t step_count_ = 0;
};

// ---- option validation shared by the optimizers (throw lsf::Error naming optimizer and group) ----
namespace detail {
void check_lr(const char* type, size_t group, double lr);
void check_nonnegative(const char* type, size_t group, const char* what, double value);
// Reads `key` from `options` as a double / bool; an absent key or a wrong type is an error.
double option_number(const char* type, size_t group, const OptionMap& options, const char* key);
bool option_flag(const char* type, size_t group, const OptionMap& options, const char* key);
// Rejects keys other than `keys`.
void check_option_keys(const char* type, size_t group, const OptionMap& options, const std::vector<std::string>& keys);
}  // namespace detail

// ---- weight-decay groups by parameter name ----

// The no-decay name patterns of the ViL-LS recipe (docs/transformer-ls.md §4.5): a parameter whose
// name contains any of them is not decayed.
std::vector<std::string> vil_no_decay_patterns();

struct DecaySplit {
  NamedTensors decay;     // names matching no pattern
  NamedTensors no_decay;  // names containing at least one pattern
};
// Splits by substring match, keeping the parameters' order.
DecaySplit split_by_name(const NamedTensors& params, const std::vector<std::string>& no_decay_patterns);

// Two groups: {decay, options} and {no_decay, options with weight_decay = 0}, always both (so
// group 0 is the decayed one even when a group is empty).
template <typename Options>
std::vector<ParamGroup<Options>> decay_groups(const NamedTensors& params, const Options& options,
                                              const std::vector<std::string>& no_decay_patterns) {
  DecaySplit split = split_by_name(params, no_decay_patterns);
  Options no_decay = options;
  no_decay.weight_decay = 0.0;
  return {ParamGroup<Options>{std::move(split.decay), options},
          ParamGroup<Options>{std::move(split.no_decay), no_decay}};
}

}  // namespace lsf::optim
