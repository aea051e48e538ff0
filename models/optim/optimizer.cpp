// Optimizer base: group bookkeeping, the step loop, and state save/load with validation.
#include "lsformer/models/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "lsformer/engine/autograd.h"
#include "lsformer/engine/error.h"

namespace lsf::optim {

using nlohmann::json;

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + ("'" + items[i] + "'");
  return out;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

}  // namespace

Optimizer::Optimizer(std::string type_name, std::vector<NamedTensors> groups)
    : type_name_(std::move(type_name)), groups_(std::move(groups)) {
  const char* type = type_name_.c_str();
  LSF_CHECK(!groups_.empty()) << type << ": no parameter groups given";
  std::map<std::string, size_t> names;
  std::map<const TensorImpl*, std::string> impls;
  size_t total = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (const auto& [name, p] : groups_[g]) {
      LSF_CHECK(!name.empty()) << type << ": group " << g << " holds a parameter with an empty name";
      LSF_CHECK(p.defined()) << type << ": parameter '" << name << "' (group " << g << ") is undefined";
      LSF_CHECK(is_floating(p.dtype())) << type << ": parameter '" << name << "' has dtype " << p.dtype()
                                        << "; only floating-point tensors can be optimized";
      LSF_CHECK(p.is_leaf()) << type << ": parameter '" << name << "' (shape " << p.shape()
                             << ") is not a leaf tensor; an optimizer can only update leaves";
      auto [it, fresh] = names.emplace(name, g);
      LSF_CHECK(fresh) << type << ": parameter name '" << name << "' appears twice (groups " << it->second
                       << " and " << g << ")";
      auto [jt, fresh_impl] = impls.emplace(p.impl(), name);
      LSF_CHECK(fresh_impl) << type << ": parameters '" << jt->second << "' and '" << name
                            << "' are the same tensor; it would be updated twice per step";
      ++total;
    }
  }
  LSF_CHECK(total > 0) << type << ": got an empty parameter list";
  states_.resize(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) states_[g].resize(groups_[g].size());
}

void Optimizer::check_group(size_t group) const {
  LSF_CHECK(group < groups_.size()) << type_name_ << ": group " << group << " does not exist (the optimizer has "
                                    << groups_.size() << " group" << (groups_.size() == 1 ? "" : "s") << ")";
}

void Optimizer::step() {
  NoGradGuard no_grad;
  std::vector<PendingUpdate> updates;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t i = 0; i < groups_[g].size(); ++i) {
      const auto& [name, p] = groups_[g][i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      LSF_CHECK(grad.shape() == p.shape()) << type_name_ << ": gradient of '" << name << "' has shape " << grad.shape()
                                           << ", the parameter " << p.shape();
      updates.push_back({g, &p, std::move(grad), &states_[g][i]});
    }
  }
  update_all(updates);
  ++step_count_;
}

void Optimizer::update_all(const std::vector<PendingUpdate>& updates) {
  for (const PendingUpdate& u : updates) {
    ++u.state->step;
    try {
      update(u.group, *u.param, u.grad, *u.state);
    } catch (...) {
      --u.state->step;  // the update threw before writing anything (argument checks come first)
      throw;
    }
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const auto& group : groups_) {
    for (const auto& [name, p] : group) {
      if (set_to_none) {
        p.set_grad(Tensor());
      } else if (Tensor g = p.grad(); g.defined()) {
        g.zero_();
      }
    }
  }
}

const NamedTensors& Optimizer::group_params(size_t group) const {
  check_group(group);
  return groups_[group];
}

NamedTensors Optimizer::named_parameters() const {
  NamedTensors all;
  for (const auto& group : groups_) all.insert(all.end(), group.begin(), group.end());
  return all;
}

double Optimizer::lr(size_t group) const {
  check_group(group);
  return group_lr(group);
}

void Optimizer::set_lr(size_t group, double lr) {
  check_group(group);
  detail::check_lr(type_name_.c_str(), group, lr);
  set_group_lr(group, lr);
}

void Optimizer::set_lr(double lr) {
  for (size_t g = 0; g < groups_.size(); ++g) set_lr(g, lr);
}

double Optimizer::momentum(size_t group) const {
  check_group(group);
  return group_momentum(group);
}

void Optimizer::set_momentum(size_t group, double momentum) {
  check_group(group);
  set_group_momentum(group, momentum);
}

void Optimizer::set_momentum(double momentum) {
  for (size_t g = 0; g < groups_.size(); ++g) set_momentum(g, momentum);
}

const ParamState* Optimizer::state(const std::string& param_name) const {
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].size(); ++i)
      if (groups_[g][i].first == param_name) return states_[g][i].step > 0 ? &states_[g][i] : nullptr;
  return nullptr;
}

NamedTensors Optimizer::state_tensors() const {
  NamedTensors out;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].size(); ++i)
      for (const auto& [buffer, t] : states_[g][i].buffers) out.emplace_back(groups_[g][i].first + "." + buffer, t);
  return out;
}

std::string Optimizer::state_json() const {
  json j;
  j["type"] = type_name_;
  j["format"] = 1;
  j["step_count"] = step_count_;
  json groups = json::array();
  json state = json::object();
  for (size_t g = 0; g < groups_.size(); ++g) {
    json options = json::object();
    for (const auto& [key, value] : option_map(g)) {
      if (const double* d = std::get_if<double>(&value)) {
        options[key] = *d;
      } else {
        options[key] = std::get<bool>(value);
      }
    }
    json names = json::array();
    for (size_t i = 0; i < groups_[g].size(); ++i) {
      const std::string& name = groups_[g][i].first;
      names.push_back(name);
      const ParamState& st = states_[g][i];
      if (st.step == 0) continue;
      json buffers = json::array();
      for (const auto& [buffer, t] : st.buffers) buffers.push_back(buffer);
      state[name] = {{"step", st.step}, {"buffers", buffers}};
    }
    groups.push_back({{"options", options}, {"params", names}});
  }
  j["groups"] = groups;
  j["state"] = state;
  return j.dump();
}

void Optimizer::load_state(const std::map<std::string, Tensor>& tensors, const std::string& json_text) {
  const std::string where = type_name_ + ".load_state";
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    LSF_FAIL() << where << ": the state JSON does not parse: " << e.what();
  }
  std::vector<std::string> problems;
  auto fail_if = [&]() {
    if (problems.empty()) return;
    std::string msg = where + ": the saved optimizer state does not fit this optimizer:";
    for (const auto& p : problems) msg += "\n  - " + p;
    LSF_FAIL() << msg;
  };

  // ---- structure: type, groups, parameter names ----
  try {
    const std::string type = j.at("type").get<std::string>();
    LSF_CHECK(type == type_name_) << where << ": the state was saved by a " << type << " optimizer, this is "
                                  << type_name_;
    LSF_CHECK(j.at("format").get<int>() == 1) << where << ": unknown state format " << j.at("format");
    const json& groups = j.at("groups");
    LSF_CHECK(groups.is_array() && groups.size() == groups_.size())
        << where << ": the state has " << (groups.is_array() ? groups.size() : 0) << " parameter groups, this optimizer "
        << groups_.size();
    for (size_t g = 0; g < groups_.size(); ++g) {
      std::vector<std::string> saved = groups[g].at("params").get<std::vector<std::string>>();
      std::vector<std::string> ours;
      for (const auto& [name, p] : groups_[g]) ours.push_back(name);
      if (saved == ours) continue;
      std::vector<std::string> missing, unexpected;
      for (const auto& n : ours)
        if (std::find(saved.begin(), saved.end(), n) == saved.end()) missing.push_back(n);
      for (const auto& n : saved)
        if (std::find(ours.begin(), ours.end(), n) == ours.end()) unexpected.push_back(n);
      std::string msg = "group " + std::to_string(g) + " holds different parameters:";
      if (!missing.empty()) msg += " not in the state: " + join(missing) + ";";
      if (!unexpected.empty()) msg += " unknown parameter names in the state: " + join(unexpected) + ";";
      if (missing.empty() && unexpected.empty()) msg += " the same names in another order";
      problems.push_back(msg);
    }
  } catch (const json::exception& e) {
    LSF_FAIL() << where << ": malformed state JSON: " << e.what();
  }
  fail_if();

  // ---- options (validated by the derived class; restored if anything below fails) ----
  std::vector<OptionMap> previous;
  for (size_t g = 0; g < groups_.size(); ++g) previous.push_back(option_map(g));
  auto restore_options = [&]() {
    for (size_t g = 0; g < groups_.size(); ++g) set_option_map(g, previous[g]);
  };
  try {
    for (size_t g = 0; g < groups_.size(); ++g) {
      OptionMap options;
      for (const auto& [key, value] : j["groups"][g].at("options").items()) {
        if (value.is_boolean()) {
          options[key] = value.get<bool>();
        } else if (value.is_number()) {
          options[key] = value.get<double>();
        } else {
          LSF_FAIL() << where << ": group " << g << " option '" << key << "' is neither a number nor a boolean: "
                     << value.dump();
        }
      }
      set_option_map(g, options);
    }

    // ---- per-parameter state and tensors ----
    const std::vector<std::string> known_buffers = buffer_names();
    std::vector<std::vector<ParamState>> fresh(groups_.size());
    std::set<std::string> used_keys;
    std::map<std::string, std::pair<size_t, size_t>> index;
    for (size_t g = 0; g < groups_.size(); ++g) {
      fresh[g].resize(groups_[g].size());
      for (size_t i = 0; i < groups_[g].size(); ++i) index[groups_[g][i].first] = {g, i};
    }
    const json& state = j.at("state");
    LSF_CHECK(state.is_object()) << where << ": \"state\" must be an object";
    for (const auto& [name, entry] : state.items()) {
      auto it = index.find(name);
      if (it == index.end()) {
        problems.push_back("unknown parameter name '" + name + "' in the state");
        continue;
      }
      auto [g, i] = it->second;
      const Tensor& param = groups_[g][i].second;
      ParamState& st = fresh[g][i];
      st.step = entry.at("step").get<int64_t>();
      if (st.step < 1) problems.push_back("parameter '" + name + "': step " + std::to_string(st.step) + " < 1");
      std::vector<std::string> buffers = entry.at("buffers").get<std::vector<std::string>>();
      for (const auto& b : required_buffers(g))
        if (std::find(buffers.begin(), buffers.end(), b) == buffers.end())
          problems.push_back("parameter '" + name + "': the state lacks its '" + b + "' buffer");
      for (const auto& b : buffers) {
        if (std::find(known_buffers.begin(), known_buffers.end(), b) == known_buffers.end()) {
          problems.push_back("parameter '" + name + "': unknown buffer '" + b + "' (a " + type_name_ + " keeps " +
                             join(known_buffers) + ")");
          continue;
        }
        const std::string key = name + "." + b;
        auto t = tensors.find(key);
        if (t == tensors.end()) {
          problems.push_back("tensor '" + key + "' is missing");
          continue;
        }
        used_keys.insert(key);
        const Tensor& src = t->second;
        if (!src.defined() || src.shape() != param.shape() || !is_floating(src.dtype())) {
          problems.push_back("tensor '" + key + "' has shape " + (src.defined() ? shape_str(src.shape()) : "<undefined>") +
                             (src.defined() && !is_floating(src.dtype()) ? " and an integer dtype" : "") +
                             ", the parameter " + shape_str(param.shape()));
          continue;
        }
        // A private copy in the parameter's dtype, on its device.
        st.buffers[b] = src.detach().to(param.options()).clone();
      }
    }
    std::vector<std::string> unexpected;
    for (const auto& [key, t] : tensors)
      if (!used_keys.count(key)) unexpected.push_back(key);
    if (!unexpected.empty())
      problems.push_back("unexpected tensors (no parameter state names them): " + join(unexpected));
    fail_if();
    states_ = std::move(fresh);
    step_count_ = j.at("step_count").get<int64_t>();
  } catch (const json::exception& e) {
    restore_options();
    LSF_FAIL() << where << ": malformed state JSON: " << e.what();
  } catch (...) {
    restore_options();
    throw;
  }
}

void Optimizer::save(const std::string& path) const {
  save_safetensors(path, state_tensors(), {{kOptimizerMetadataKey, state_json()}});
}

void Optimizer::load(const std::string& path) {
  SafetensorsContents c = load_safetensors(path);
  auto it = c.metadata.find(kOptimizerMetadataKey);
  LSF_CHECK(it != c.metadata.end()) << type_name_ << ".load: '" << path << "' has no '" << kOptimizerMetadataKey
                                    << "' metadata entry; it is not an optimizer state file";
  load_state(c.tensors, it->second);
}

// ---- option validation ----

namespace detail {

void check_lr(const char* type, size_t group, double lr) {
  LSF_CHECK(std::isfinite(lr) && lr >= 0.0) << type << ": invalid learning rate " << lr << " (group " << group
                                            << "); it must be a finite number ≥ 0";
}

void check_nonnegative(const char* type, size_t group, const char* what, double value) {
  LSF_CHECK(std::isfinite(value) && value >= 0.0) << type << ": invalid " << what << " " << value << " (group "
                                                  << group << "); it must be a finite number ≥ 0";
}

double option_number(const char* type, size_t group, const OptionMap& options, const char* key) {
  auto it = options.find(key);
  LSF_CHECK(it != options.end()) << type << ": group " << group << " options lack '" << key << "'";
  const double* d = std::get_if<double>(&it->second);
  LSF_CHECK(d != nullptr) << type << ": group " << group << " option '" << key << "' must be a number";
  return *d;
}

bool option_flag(const char* type, size_t group, const OptionMap& options, const char* key) {
  auto it = options.find(key);
  LSF_CHECK(it != options.end()) << type << ": group " << group << " options lack '" << key << "'";
  const bool* b = std::get_if<bool>(&it->second);
  LSF_CHECK(b != nullptr) << type << ": group " << group << " option '" << key << "' must be a boolean";
  return *b;
}

void check_option_keys(const char* type, size_t group, const OptionMap& options, const std::vector<std::string>& keys) {
  for (const auto& [key, value] : options)
    LSF_CHECK(std::find(keys.begin(), keys.end(), key) != keys.end())
        << type << ": group " << group << " has an unknown option '" << key << "' (" << type << " options: "
        << join(keys) << ")";
}

}  // namespace detail

// ---- decay groups ----

std::vector<std::string> vil_no_decay_patterns() {
  return {"pos_embed", "cls_token", "norm.weight", "norm.bias", "norm_embed", "head.bias", "relative_position"};
}

DecaySplit split_by_name(const NamedTensors& params, const std::vector<std::string>& no_decay_patterns) {
  DecaySplit split;
  for (const auto& entry : params) {
    bool match = std::any_of(no_decay_patterns.begin(), no_decay_patterns.end(),
                             [&](const std::string& pat) { return entry.first.find(pat) != std::string::npos; });
    (match ? split.no_decay : split.decay).push_back(entry);
  }
  return split;
}

}  // namespace lsf::optim
