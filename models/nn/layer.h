// nn::Layer: a Module with one input tensor and one output tensor.
//
// The interface Sequential chains and ModuleList can hold without knowing the concrete type:
// Linear, LayerNorm, Embedding (its input is the id tensor), Dropout, Conv2d, Mlp, the
// activations and Sequential itself are Layers. Modules with several inputs (attention blocks
// taking a mask, ...) derive from Module directly and define their own forward.
#pragma once

#include <string>

#include "lsformer/engine/random.h"
#include "lsformer/models/nn/module.h"

namespace lsf::nn {

class Layer : public Module {
 public:
  explicit Layer(std::string type_name) : Module(std::move(type_name)) {}
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
};

}  // namespace lsf::nn
