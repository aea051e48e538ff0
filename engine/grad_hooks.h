// Gradient-ready hooks on leaves (parameters): data-parallel training (models/dist/
// gradient_reducer.h) starts averaging a parameter's gradient across ranks while the rest of the
// backward pass still runs.
//
//   int id = lsf::autograd::add_grad_ready_hook(weight, [](const Tensor& w) { use(w.grad()); });
//   loss.backward();                        // the hook runs once weight.grad() is final
//   lsf::autograd::remove_grad_ready_hook(weight, id);
//
// `hook(leaf)` runs right after a backward pass has accumulated the leaf's gradient into
// leaf.grad() (engine/autograd.cpp, AccumulateGrad). The engine sums every contribution to a node
// before running it, so the hook runs once per backward in which the leaf receives a gradient,
// and leaf.grad() is then final for that pass (plus what earlier passes accumulated when grads
// are not zeroed between them). It runs on the thread running backward, in the engine's node
// order; a leaf that receives no gradient (unused, or every path to it gave none) gets no call.
// A hook must not run backward itself.
//
// The hooks live in a table of the autograd engine keyed by the leaf (a weak reference: a table
// entry never keeps a tensor alive, and an entry whose tensor has died is dropped), not in the
// tensor, so that tensors that have none pay nothing but one atomic load per accumulation.
#pragma once

#include <functional>

#include "lsformer/engine/tensor.h"

namespace lsf::autograd {

using GradReadyHook = std::function<void(const Tensor& leaf)>;
// `leaf` must be a leaf that requires grad. Returns an id for remove_grad_ready_hook.
int add_grad_ready_hook(const Tensor& leaf, GradReadyHook hook);
// Removes hook `id` of `leaf`; an id that `leaf` does not hold is an error.
void remove_grad_ready_hook(const Tensor& leaf, int id);
// Hooks registered on `leaf`.
int grad_ready_hook_count(const Tensor& leaf);

}  // namespace lsf::autograd
