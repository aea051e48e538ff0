// Reverse-mode automatic differentiation, define-by-run.
//
// An op whose inputs require grad (and grad mode is on) records a Node: the backward function,
// the tensors it saved, and one Edge per input to the node that produced that input (or to the
// input's AccumulateGrad if it is a leaf). Tensor::backward() walks this graph in reverse
// topological order with an explicit work list, so a chain of any length runs without
// recursion; contributions to a tensor used several times are summed before its node runs.
//
// The backward convention (ops/ follow it everywhere): a node receives one gradient per output
// (zeros are filled in for outputs that got none) and returns one gradient per input, leaving
// undefined the inputs whose `needs[i]` is false. Backward runs with grad mode off: there is no
// backward of backward. Anomaly mode (engine/anomaly.h) checks forward outputs and backward
// gradients for NaN / Inf and names the op and its forward call site.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lsformer/engine/tensor.h"

namespace lsf {

// ---- grad mode ----
bool grad_mode_enabled();
// Turns recording off in its scope: { lsf::NoGradGuard g; ...optimizer step... }
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

namespace autograd {

struct Edge {
  std::shared_ptr<Node> node;  // null: that input needs no gradient
  int input_nr = 0;            // which output of `node` the input was
  bool valid() const { return node != nullptr; }
};

struct OutputMeta {
  Shape shape;
  DType dtype;
  Device device;
};

class Node {
 public:
  explicit Node(std::string name) : name_(std::move(name)) {}
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  // Where the op ran in the forward pass (the module path; engine/anomaly.h): recorded only in
  // anomaly mode, "" otherwise.
  const std::string& call_site() const { return call_site_; }
  void set_call_site(std::string site) { call_site_ = std::move(site); }
  // grads: one per output (never undefined). Returns one gradient per next edge.
  virtual TensorList apply(const TensorList& grads) = 0;
  // Drops saved tensors after a backward without retain_graph.
  virtual void release() {}

  std::vector<Edge> next_edges;      // one per input of the op
  std::vector<OutputMeta> outputs;   // one per output of the op

  // Tensor::retain_grad(): the engine stores the gradient this node receives for output `nr`
  // into that tensor's grad() before running the node. Weak: a retaining node never keeps its
  // output alive (the output holds the node), and a dead output is skipped.
  void retain_output(int nr, const std::shared_ptr<TensorImpl>& output);
  const std::vector<std::weak_ptr<TensorImpl>>& retained_outputs() const { return retained_; }

 private:
  std::string name_;
  std::string call_site_;
  std::vector<std::weak_ptr<TensorImpl>> retained_;  // empty, or one per output (null: not retained)
};

// Adds incoming gradients into a leaf's .grad.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  TensorList apply(const TensorList& grads) override;

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// A value saved for backward: a detached handle plus the storage version at save time.
// Reading it after an in-place write to that storage throws instead of silently using the
// new values.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t);
  const Tensor& get() const;
  bool defined() const { return value_.defined(); }

 private:
  Tensor value_;
  uint64_t version_ = 0;
};

using NeedsGrad = std::vector<bool>;
// grads: one per output; needs: one per input. Returns one gradient per input.
using BackwardFn = std::function<TensorList(const TensorList& grads, const NeedsGrad& needs)>;

// True when grad mode is on and one of `inputs` requires grad: the op should record.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);
bool any_requires_grad(const TensorList& inputs);

// Connects `outputs` to a new node running `backward`, if any_requires_grad(inputs).
// Returns false (and records nothing) otherwise. Capture SavedTensor values, never plain
// Tensors that might be outputs of this op: an output holding its own node is a cycle.
bool record(const std::string& name, const TensorList& inputs, const TensorList& outputs,
            BackwardFn backward);

// Runs backward from `roots` with the given gradients (engine core of Tensor::backward).
void run_backward(const TensorList& roots, const TensorList& grads, bool retain_graph);

// The gradient edge of a tensor: its grad_fn, or its leaf accumulator (created on demand).
Edge gradient_edge(const Tensor& t);

}  // namespace autograd
}  // namespace lsf
