// nn::Sequential: layers applied one after the other, as torch.nn.Sequential. Children are
// named by position, "0", "1", ..., so parameters appear as "3.weight" (PyTorch's keys).
//
//   auto mlp = std::make_shared<Sequential>(std::vector<std::shared_ptr<Layer>>{
//       std::make_shared<Linear>(8, 32), std::make_shared<GELU>(), std::make_shared<Linear>(32, 8)});
#pragma once

#include <memory>
#include <vector>

#include "lsformer/models/nn/layer.h"

namespace lsf::nn {

class Sequential : public Layer {
 public:
  Sequential() : Layer("Sequential") {}
  explicit Sequential(const std::vector<std::shared_ptr<Layer>>& layers);

  // Appends a layer under the next index and returns it.
  template <typename L>
  std::shared_ptr<L> push_back(std::shared_ptr<L> layer) {
    static_assert(std::is_base_of_v<Layer, L>, "Sequential holds Layers");
    append(layer);
    return layer;
  }
  // An empty Sequential is the identity.
  Tensor forward(const Tensor& x) override;

  size_t size() const { return layers_.size(); }
  bool empty() const { return layers_.empty(); }
  // Bounds-checked (throws lsf::Error naming the index and the size).
  const std::shared_ptr<Layer>& operator[](size_t index) const;
  auto begin() const { return layers_.begin(); }
  auto end() const { return layers_.end(); }

 private:
  void append(std::shared_ptr<Layer> layer);
  std::vector<std::shared_ptr<Layer>> layers_;
};

}  // namespace lsf::nn
