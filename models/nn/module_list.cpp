// nn::ModuleList: registration by position and bounds-checked access.
#include "lsformer/models/nn/module_list.h"

namespace lsf::nn {

ModuleList::ModuleList(const std::vector<std::shared_ptr<Module>>& modules) : Module("ModuleList") {
  for (const auto& m : modules) append(m);
}

void ModuleList::append(std::shared_ptr<Module> module) {
  LSF_CHECK(module != nullptr) << "ModuleList: cannot append a null module (at index " << modules_.size() << ")";
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t index) const {
  LSF_CHECK(index < modules_.size()) << "ModuleList: index " << index << " is out of range for "
                                     << modules_.size() << " modules";
  return modules_[index];
}

}  // namespace lsf::nn
