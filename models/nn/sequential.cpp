// nn::Sequential: registration by position and the chained forward.
#include "lsformer/models/nn/sequential.h"

#include <string>

namespace lsf::nn {

Sequential::Sequential(const std::vector<std::shared_ptr<Layer>>& layers) : Layer("Sequential") {
  for (const auto& layer : layers) append(layer);
}

void Sequential::append(std::shared_ptr<Layer> layer) {
  LSF_CHECK(layer != nullptr) << "Sequential: cannot append a null layer (at index " << layers_.size() << ")";
  register_module(std::to_string(layers_.size()), layer);
  layers_.push_back(std::move(layer));
}

Tensor Sequential::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  Tensor y = x;
  for (const auto& layer : layers_) y = layer->forward(y);
  return y;
}

const std::shared_ptr<Layer>& Sequential::operator[](size_t index) const {
  LSF_CHECK(index < layers_.size()) << "Sequential: index " << index << " is out of range for " << layers_.size()
                                    << " layers";
  return layers_[index];
}

}  // namespace lsf::nn
