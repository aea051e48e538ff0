// nn::ModuleList: an indexed list of submodules, as torch.nn.ModuleList. Children are named by
// position ("blocks.0.norm1.weight"); it has no forward: the owner calls its elements.
//
//   blocks = register_module("blocks", std::make_shared<ModuleList>());
//   for (int i = 0; i < depth; ++i) blocks->push_back(std::make_shared<Block>(dim));
//   for (size_t i = 0; i < blocks->size(); ++i) x = blocks->at<Block>(i)->forward(x, mask);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lsformer/models/nn/module.h"

namespace lsf::nn {

class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  explicit ModuleList(const std::vector<std::shared_ptr<Module>>& modules);

  // Appends a module under the next index and returns it.
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    append(module);
    return module;
  }

  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  // Bounds-checked (throws lsf::Error naming the index and the size).
  const std::shared_ptr<Module>& operator[](size_t index) const;
  // The element as its concrete type; throws when it is not an M.
  template <typename M>
  std::shared_ptr<M> at(size_t index) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[index]);
    LSF_CHECK(m != nullptr) << "ModuleList: element " << index << " is a " << modules_[index]->type_name()
                            << ", not the requested type";
    return m;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  void append(std::shared_ptr<Module> module);
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace lsf::nn
