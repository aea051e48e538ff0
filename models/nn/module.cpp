#include "lsformer/models/nn/module.h"

#include <ostream>
#include <set>
#include <sstream>

#include "lsformer/engine/autograd.h"

namespace lsf::nn {

std::string LoadReport::str() const {
  std::ostringstream os;
  auto list = [&](const char* what, const std::vector<std::string>& names) {
    if (names.empty()) return;
    os << what << " (" << names.size() << "):";
    for (const auto& n : names) os << " " << n;
    os << "\n";
  };
  list("missing", missing);
  list("unexpected", unexpected);
  list("mismatched", mismatched);
  return ok() ? "all names and shapes match" : os.str();
}

void Module::check_new_name(const std::string& name) const {
  LSF_CHECK(!name.empty() && name.find('.') == std::string::npos)
      << type_name_ << ": invalid name '" << name << "' (non-empty, without dots)";
  for (const auto& s : parameters_) LSF_CHECK(s.name != name) << type_name_ << ": '" << name << "' is already registered";
  for (const auto& s : buffers_) LSF_CHECK(s.name != name) << type_name_ << ": '" << name << "' is already registered";
  for (const auto& c : children_) LSF_CHECK(c.first != name) << type_name_ << ": '" << name << "' is already registered";
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  check_new_name(name);
  LSF_CHECK(t.defined()) << type_name_ << ": parameter '" << name << "' is undefined";
  LSF_CHECK(is_floating(t.dtype())) << type_name_ << ": parameter '" << name << "' must be floating-point, got " << t.dtype();
  if (!t.is_leaf()) t = t.detach();
  t.requires_grad_(true);
  parameters_.push_back({name, t, true});
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_new_name(name);
  LSF_CHECK(t.defined()) << type_name_ << ": buffer '" << name << "' is undefined";
  t = t.detach();
  buffers_.push_back({name, t, persistent});
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  LSF_CHECK(module != nullptr) << type_name_ << ": submodule '" << name << "' is null";
  module->parent_ = this;
  module->name_in_parent_ = name;
  children_.emplace_back(name, std::move(module));
}

Module::~Module() {
  // A child may outlive this module (another handle holds it): it must not point back here.
  for (auto& [name, child] : children_)
    if (child->parent_ == this) child->parent_ = nullptr;
}

std::string Module::path() const {
  std::string p;
  for (const Module* m = this; m->parent_ != nullptr; m = m->parent_)
    p = p.empty() ? m->name_in_parent_ : m->name_in_parent_ + "." + p;
  return p;
}

void Module::visit(const std::string& prefix, bool params, bool buffers, bool persistent_only,
                   NamedTensors& out) const {
  if (params)
    for (const auto& s : parameters_) out.emplace_back(prefix + s.name, s.tensor);
  if (buffers)
    for (const auto& s : buffers_)
      if (s.persistent || !persistent_only) out.emplace_back(prefix + s.name, s.tensor);
  for (const auto& [name, child] : children_) child->visit(prefix + name + ".", params, buffers, persistent_only, out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  visit("", true, false, false, out);
  return out;
}

TensorList Module::parameters() const {
  TensorList out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers(bool persistent_only) const {
  NamedTensors out;
  visit("", false, true, persistent_only, out);
  return out;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  visit("", true, true, true, out);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  for (const auto& [name, child] : children_) {
    out.emplace_back(name, child);
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(name + "." + sub, m);
  }
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [name, child] : children_) child->apply(fn);
  fn(*this);
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

LoadReport Module::check_state_dict(const std::map<std::string, Tensor>& state) const {
  LoadReport report;
  std::set<std::string> known;
  for (const auto& [name, t] : state_dict()) {
    known.insert(name);
    auto it = state.find(name);
    if (it == state.end()) {
      report.missing.push_back(name);
    } else if (!it->second.defined() || it->second.shape() != t.shape() ||
               is_floating(it->second.dtype()) != is_floating(t.dtype())) {
      std::ostringstream os;
      os << name << " (file ";
      if (it->second.defined()) {
        os << it->second.shape() << " " << it->second.dtype();
      } else {
        os << "undefined";
      }
      os << ", module " << t.shape() << " " << t.dtype() << ")";
      report.mismatched.push_back(os.str());
    }
  }
  for (const auto& [name, t] : state)
    if (!known.count(name)) report.unexpected.push_back(name);
  return report;
}

LoadReport Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  LoadReport report = check_state_dict(state);
  LSF_CHECK(!strict || report.ok()) << type_name_ << ": load_state_dict (strict) found differences:\n"
                                    << report.str();
  // Copy what matches (converting dtype, keeping each tensor's device).
  NoGradGuard no_grad;
  for (const auto& [name, t] : state_dict()) {
    auto it = state.find(name);
    if (it == state.end() || !it->second.defined() || it->second.shape() != t.shape() ||
        is_floating(it->second.dtype()) != is_floating(t.dtype()))
      continue;
    t.copy_(it->second.to(t.device()));
  }
  return report;
}

void Module::save(const std::string& path, const Metadata& metadata) const {
  save_safetensors(path, state_dict(), metadata);
}

LoadReport Module::load(const std::string& path, bool strict) {
  return load_state_dict(load_safetensors(path).tensors, strict);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

template <typename Fn>
void Module::for_each_tensor(Fn&& fn) {
  for (auto& s : parameters_) fn(s.tensor);
  for (auto& s : buffers_) fn(s.tensor);
  for (auto& [name, child] : children_) child->for_each_tensor(fn);
}

void Module::zero_grad() {
  for (auto& s : parameters_) s.tensor.set_grad(Tensor());
  for (auto& [name, child] : children_) child->zero_grad();
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for_each_tensor([&](Tensor& t) {
    if (t.device() != device) t.set_data(t.detach().to(device));
  });
}

void Module::to(DType dtype) {
  LSF_CHECK(is_floating(dtype)) << type_name_ << ": to(" << dtype << "): modules convert only to floating-point dtypes";
  NoGradGuard no_grad;
  for_each_tensor([&](Tensor& t) {
    if (is_floating(t.dtype()) && t.dtype() != dtype) t.set_data(t.detach().to(dtype));
  });
}

void Module::print(std::ostream& os, int indent) const {
  const std::string pad(indent, ' ');
  os << type_name_ << "(" << extra_repr();
  if (parameters_.empty() && buffers_.empty() && children_.empty()) {
    os << ")";
    return;
  }
  os << "\n";
  for (const auto& s : parameters_) os << pad << "  " << s.name << ": " << s.tensor.shape() << " " << s.tensor.dtype() << "\n";
  for (const auto& s : buffers_)
    os << pad << "  " << s.name << ": " << s.tensor.shape() << " " << s.tensor.dtype() << " (buffer"
       << (s.persistent ? "" : ", not saved") << ")\n";
  for (const auto& [name, child] : children_) {
    os << pad << "  (" << name << "): ";
    child->print(os, indent + 2);
    os << "\n";
  }
  os << pad << ")";
  if (indent == 0) os << "  # " << parameter_count() << " parameters";
}

std::ostream& operator<<(std::ostream& os, const Module& m) {
  m.print(os);
  return os;
}

}  // namespace lsf::nn
