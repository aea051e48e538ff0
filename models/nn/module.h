// nn::Module: the base of every layer and model.
//
// A module registers its parameters, buffers and submodules by name, in order. Names compose
// into dotted paths exactly like PyTorch's state_dict keys ("blocks.0.norm1.weight"): list
// children are numbered 0, 1, ...; per module, its own parameters come first, then its
// persistent buffers, then each child's entries. Registration is the single source of names,
// so checkpoints, printouts and optimizer groups cannot drift apart.
//
//   class Mlp : public lsf::nn::Module {
//    public:
//     Mlp() : Module("Mlp") {
//       fc1 = register_module("fc1", std::make_shared<Linear>(8, 32));
//       fc2 = register_module("fc2", std::make_shared<Linear>(32, 8));
//     }
//     std::shared_ptr<Linear> fc1, fc2;
//   };
//
// Layers hold Tensor handles to their parameters; to(device) and load_state_dict() change the
// data behind those handles in place (Tensor::set_data), so the handles stay valid.
#pragma once

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lsformer/engine/anomaly.h"
#include "lsformer/engine/safetensors.h"
#include "lsformer/engine/tensor.h"

namespace lsf::nn {

// Shapes and tensors print inside lsf::nn too (our operator<< below would hide lsf's).
using ::lsf::operator<<;

struct LoadReport {
  std::vector<std::string> missing;      // expected by the module, absent from the file
  std::vector<std::string> unexpected;   // in the file, unknown to the module
  std::vector<std::string> mismatched;   // present in both with a different shape (with both shapes)
  bool ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  std::string str() const;               // a readable summary
};

class Module {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // ---- registration (from constructors) ----
  // Registers `t` as a parameter (marks it requires_grad) and returns the handle.
  Tensor register_parameter(const std::string& name, Tensor t);
  // Buffers are state that is not trained (running statistics, fixed tables). Non-persistent
  // buffers move with to(device) but are not saved.
  Tensor register_buffer(const std::string& name, Tensor t, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // ---- traversal ----
  NamedTensors named_parameters() const;  // dotted names, registration order
  TensorList parameters() const;
  NamedTensors named_buffers(bool persistent_only = false) const;
  // Parameters and persistent buffers, as PyTorch's state_dict orders them.
  NamedTensors state_dict() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  // Every descendant with its dotted path, depth first in registration order (not this module).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules() const;
  // Calls fn on every descendant, then on this module (as PyTorch's Module.apply), e.g. to
  // re-initialise every Linear: model.apply([](Module& m) { if (auto* l = dynamic_cast<Linear*>(&m)) ... });
  void apply(const std::function<void(Module&)>& fn);
  int64_t parameter_count() const;
  // The dotted path from the outermost module that registered this one ("encoder.layers.1.attn",
  // the prefix of its state_dict keys there); "" for a module no other module registered. A
  // module registered under several parents reports its latest registration.
  std::string path() const;

  // ---- state ----
  // Copies values into this module's tensors (converting dtype, keeping device). Strict mode
  // throws an lsf::Error listing every missing, unexpected and mis-shaped name; non-strict mode
  // loads what matches and returns the report.
  LoadReport load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);
  // What load_state_dict would report, without changing anything.
  LoadReport check_state_dict(const std::map<std::string, Tensor>& state) const;
  // Checkpoint files (safetensors): state_dict plus optional metadata.
  void save(const std::string& path, const Metadata& metadata = {}) const;
  LoadReport load(const std::string& path, bool strict = true);

  // ---- modes and placement ----
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();  // drops every parameter's gradient
  void to(Device device);
  void to(DType dtype);  // floating-point parameters and buffers only

  // ---- printing ----
  const std::string& type_name() const { return type_name_; }
  // Constructor arguments worth showing, e.g. "in_features=8, out_features=32, bias=true".
  virtual std::string extra_repr() const { return ""; }
  // The module tree with parameter shapes and counts.
  void print(std::ostream& os, int indent = 0) const;

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> module);

 private:
  struct Slot {
    std::string name;
    Tensor tensor;
    bool persistent = true;
  };
  void check_new_name(const std::string& name) const;
  void visit(const std::string& prefix, bool params, bool buffers, bool persistent_only, NamedTensors& out) const;
  template <typename Fn>
  void for_each_tensor(Fn&& fn);

  std::string type_name_;
  bool training_ = true;
  std::vector<Slot> parameters_;
  std::vector<Slot> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  const Module* parent_ = nullptr;  // who registered this module last (cleared when it dies)
  std::string name_in_parent_;
};

// Opened at the top of a module's forward: names the module (its path and type) as the
// forward call site of the ops inside, for anomaly mode's messages (engine/anomaly.h). Free
// when anomaly mode is off (one thread-local load).
class ModuleScope {
 public:
  explicit ModuleScope(const Module& module)
      : scope_([&module] {
          const std::string p = module.path();
          return (p.empty() ? std::string("the root module") : p) + " (" + module.type_name() + ")";
        }) {}

 private:
  autograd::CallSiteScope scope_;
};

std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace lsf::nn
