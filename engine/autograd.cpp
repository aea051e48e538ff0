// The autograd engine (see autograd.h): the grad-mode switch, recording nodes for an op's
// outputs, and the iterative backward pass — dependency counting, summing gradients of tensors
// used more than once, accumulation into leaves, freeing saved tensors unless retain_graph — and
// an iterative graph teardown, so that very long chains neither recurse nor overflow the stack.
// Also the table of gradient-ready hooks (engine/grad_hooks.h), run by AccumulateGrad.
#include "lsformer/engine/autograd.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include <unordered_map>
#include <unordered_set>

#include "lsformer/engine/anomaly.h"
#include "lsformer/engine/core_kernels.h"
#include "lsformer/engine/grad_hooks.h"
#include "lsformer/engine/profiler.h"

namespace lsf {

namespace {
thread_local bool g_grad_enabled = true;
}

bool grad_mode_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

namespace autograd {

// Destroying the last handle to a long chain of nodes would otherwise recurse once per node
// (each node's edges own the next). Instead, a node hands its edges to a per-thread list that
// the outermost destructor drains in a loop.
Node::~Node() {
  thread_local std::vector<std::shared_ptr<Node>> pending;
  thread_local bool draining = false;
  for (auto& e : next_edges)
    if (e.node) pending.push_back(std::move(e.node));
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    n.reset();  // may run ~Node, which only appends to `pending`
  }
  draining = false;
}

namespace {

// A tensor equal to `t`, in a fresh contiguous buffer that nobody else holds.
Tensor owned_copy(const Tensor& t) {
  Tensor out = empty(t.shape(), t.options());
  copy_kernel(t.device(), out, t);
  return out;
}

// Whether gradient sums may add into `t` in place: nothing else can see its buffer (this is the
// only handle to it, it owns its whole storage, no view of it exists, no graph hangs on it), so
// the copy owned_copy makes would be wasted (as PyTorch steals such buffers). A leaf's .grad
// must also be contiguous; a sum inside the graph may keep any dense layout (a kernel's
// gradient written token-major for a head-split input, say), and then the sum keeps it.
bool exclusively_held(const Tensor& t, bool any_dense_layout) {
  return t.impl_ptr().use_count() == 1 && t.storage().use_count() == 1 &&
         (any_dense_layout ? t.is_non_overlapping_and_dense() : t.is_contiguous()) && t.offset() == 0 &&
         t.storage()->nbytes() == t.nbytes() && !t.impl()->autograd;
}

class FunctionNode final : public Node {
 public:
  // Remembers the profiler phase it was recorded in, so that its backward is charged to it.
  FunctionNode(std::string name, BackwardFn fn)
      : Node(std::move(name)), fn_(std::move(fn)), phase_(profiler::current_phase()) {}
  const char* phase() const { return phase_; }
  TensorList apply(const TensorList& grads) override {
    LSF_CHECK(!released_) << "backward: trying to backward through the graph a second time (the "
                             "tensors saved by '"
                          << name() << "' were freed by the first backward); call backward("
                          << "gradient, /*retain_graph=*/true) the first time";
    NeedsGrad needs(next_edges.size());
    for (size_t i = 0; i < next_edges.size(); ++i) needs[i] = next_edges[i].valid();
    return fn_(grads, needs);
  }
  void release() override {
    fn_ = nullptr;  // drops every SavedTensor the closure captured
    released_ = true;
  }

 private:
  BackwardFn fn_;
  bool released_ = false;
  const char* phase_;
};

}  // namespace

namespace {

// The gradient-ready hooks (grad_hooks.h), keyed by the leaf's address so that AccumulateGrad
// finds a parameter's hooks without scanning every parameter's (a data-parallel model has one
// hook per parameter). The weak pointer tells a live leaf from a dead one whose address a new
// tensor reuses. `count` lets AccumulateGrad skip the lock when no hook exists anywhere (the
// common case: no data parallelism).
struct HookEntry {
  std::weak_ptr<TensorImpl> leaf;
  int id;
  GradReadyHook hook;
};
struct HookTable {
  std::mutex mutex;
  std::unordered_multimap<const TensorImpl*, HookEntry> entries;
  std::atomic<int> count{0};
  int next_id = 1;
  // Drops entries whose tensor has died (their address may be reused by a new tensor).
  void prune() {
    std::erase_if(entries, [](const auto& kv) { return kv.second.leaf.expired(); });
    count = int(entries.size());
  }
};
HookTable& hook_table() {
  static HookTable table;
  return table;
}

// The hooks of `leaf`, copied out of the table (a hook may remove itself while running), in the
// order they were added.
std::vector<GradReadyHook> hooks_of(const TensorImpl* leaf) {
  HookTable& table = hook_table();
  std::vector<GradReadyHook> hooks;
  if (table.count.load(std::memory_order_relaxed) == 0) return hooks;
  std::lock_guard<std::mutex> lock(table.mutex);
  std::vector<const HookEntry*> found;
  const auto [first, last] = table.entries.equal_range(leaf);
  for (auto it = first; it != last; ++it)
    if (it->second.leaf.lock().get() == leaf) found.push_back(&it->second);
  std::sort(found.begin(), found.end(), [](const HookEntry* a, const HookEntry* b) { return a->id < b->id; });
  for (const HookEntry* e : found) hooks.push_back(e->hook);
  return hooks;
}

}  // namespace

int add_grad_ready_hook(const Tensor& leaf, GradReadyHook hook) {
  LSF_CHECK(leaf.defined() && leaf.requires_grad() && !leaf.grad_fn())
      << "add_grad_ready_hook: the tensor must be a leaf that requires grad (a parameter)";
  LSF_CHECK(hook != nullptr) << "add_grad_ready_hook: empty hook";
  HookTable& table = hook_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  table.prune();
  const int id = table.next_id++;
  table.entries.emplace(leaf.impl(), HookEntry{leaf.impl_ptr(), id, std::move(hook)});
  table.count = int(table.entries.size());
  return id;
}

void remove_grad_ready_hook(const Tensor& leaf, int id) {
  HookTable& table = hook_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  bool removed = false;
  if (leaf.defined()) {
    const auto [first, last] = table.entries.equal_range(leaf.impl());
    for (auto it = first; it != last; ++it) {
      if (it->second.id == id && it->second.leaf.lock().get() == leaf.impl()) {
        table.entries.erase(it);
        removed = true;
        break;
      }
    }
  }
  LSF_CHECK(removed) << "remove_grad_ready_hook: the tensor has no hook " << id;
  table.prune();
}

int grad_ready_hook_count(const Tensor& leaf) { return leaf.defined() ? int(hooks_of(leaf.impl()).size()) : 0; }

void Node::retain_output(int nr, const std::shared_ptr<TensorImpl>& output) {
  LSF_CHECK(nr >= 0 && size_t(nr) < outputs.size())
      << "retain_grad: internal error: output " << nr << " of '" << name_ << "', which has " << outputs.size();
  retained_.resize(outputs.size());
  retained_[size_t(nr)] = output;
}

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf)
    : Node("AccumulateGrad"), leaf_(std::move(leaf)) {
  outputs.push_back({leaf_->shape, leaf_->dtype, leaf_->storage->device()});
}

namespace {
// g added into meta.grad, or (when it has none yet) meta.grad becomes g's buffer if `may_take`
// and nothing else can see it, a copy otherwise.
void add_into_grad(AutogradMeta& meta, const Tensor& g, bool may_take) {
  if (!meta.grad) {
    meta.grad = may_take && exclusively_held(g, /*any_dense_layout=*/false) ? g.impl_ptr() : owned_copy(g).impl_ptr();
  } else {
    Tensor existing(meta.grad);
    add_inplace_kernel(existing.device(), existing, g);
  }
}
}  // namespace

TensorList AccumulateGrad::apply(const TensorList& grads) {
  add_into_grad(leaf_->autograd_meta(), grads[0], /*may_take=*/true);
  const std::vector<GradReadyHook> hooks = hooks_of(leaf_.get());
  if (!hooks.empty()) {
    const Tensor leaf(leaf_);
    for (const GradReadyHook& hook : hooks) hook(leaf);
  }
  return {};
}

SavedTensor::SavedTensor(const Tensor& t) {
  if (t.defined()) {
    value_ = t.detach();
    version_ = t.storage()->version();
  }
}

const Tensor& SavedTensor::get() const {
  LSF_CHECK(!value_.defined() || value_.storage()->version() == version_)
      << "backward: a tensor saved for the backward pass was modified by an in-place operation "
         "after it was saved (storage version "
      << value_.storage()->version() << ", saved at " << version_
      << "); clone() it before writing in place";
  return value_;
}

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

bool any_requires_grad(const TensorList& inputs) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.grad_fn()) return {t.grad_fn(), t.output_nr()};
  AutogradMeta& meta = t.impl()->autograd_meta();
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    meta.grad_accumulator = acc;
  }
  return {acc, 0};
}

namespace {

// " (forward call site: encoder.layers.1.attn (LongShortAttention); phase attention)"
std::string where(const std::string& call_site, const char* phase) {
  std::string s = " (forward call site: " + (call_site.empty() ? std::string("outside every module") : call_site);
  if (phase && std::string(phase) != "other") s += std::string("; phase ") + phase;
  return s + ")";
}

// Anomaly mode: the first forward output of op `name` holding a NaN ends the forward pass.
void check_forward_outputs(const std::string& name, const TensorList& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string bad = describe_non_finite(outputs[i], /*nan_only=*/true);
    LSF_CHECK(bad.empty()) << "anomaly: the forward of '" << name << "'" << where(current_call_site(), profiler::current_phase())
                           << " produced " << bad << " in its output " << i << " of shape " << outputs[i].shape();
  }
}

// Anomaly mode: the first non-finite gradient a backward node returns ends the backward pass.
void check_backward_outputs(const Node& node, const char* phase, const TensorList& input_grads) {
  for (size_t i = 0; i < input_grads.size(); ++i) {
    const std::string bad = describe_non_finite(input_grads[i]);
    LSF_CHECK(bad.empty()) << "anomaly: the backward of '" << node.name() << "'" << where(node.call_site(), phase)
                           << " returned a gradient with " << bad << " for its input " << i << " of shape "
                           << input_grads[i].shape();
  }
}

// Tensor::retain_grad(): each retained output of `node` that received a gradient (all its
// consumers' contributions are summed by now) gets it added into its grad(), as a leaf's
// AccumulateGrad would, but never taking the buffer: the node's backward still reads it.
void keep_retained_gradients(const Node& node, const TensorList& grads) {
  const auto& retained = node.retained_outputs();
  for (size_t i = 0; i < retained.size() && i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;  // no consumer gave this output a gradient
    const std::shared_ptr<TensorImpl> output = retained[i].lock();
    if (output) add_into_grad(output->autograd_meta(), grads[i], /*may_take=*/false);
  }
}

}  // namespace

bool record(const std::string& name, const TensorList& inputs, const TensorList& outputs,
            BackwardFn backward) {
  if (!any_requires_grad(inputs)) return false;
  if (anomaly_mode_enabled()) check_forward_outputs(name, outputs);
  auto node = std::make_shared<FunctionNode>(name, std::move(backward));
  if (anomaly_mode_enabled()) node->set_call_site(current_call_site());
  node->next_edges.reserve(inputs.size());
  for (const Tensor& in : inputs) node->next_edges.push_back(gradient_edge(in));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    node->outputs.push_back({out.shape(), out.dtype(), out.device()});
    if (!is_floating(out.dtype())) continue;  // integer outputs (indices) carry no gradient
    AutogradMeta& meta = out.impl()->autograd_meta();
    meta.requires_grad = true;
    meta.grad_fn = node;
    meta.output_nr = int(i);
  }
  return true;
}

void run_backward(const TensorList& roots, const TensorList& grads, bool retain_graph) {
  NoGradGuard no_grad;
  // Summing the gradients of tensors used several times is the engine's own backward work.
  profiler::BackwardScope phase("autograd (gradient sums)");

  // 1. Count, for every node reachable from the roots, how many edges point at it.
  std::vector<Edge> root_edges;
  for (const Tensor& r : roots) root_edges.push_back(gradient_edge(r));
  std::unordered_map<Node*, int> dependencies;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const Edge& e : root_edges)
    if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.valid()) continue;
      ++dependencies[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }

  // 2. Gradient buffers, one slot per node output; a slot is copied before it is first added
  //    to, because the first contribution may be a tensor another node also received, unless
  //    by then the slot holds the only handle to it (exclusively_held), or the second
  //    contribution is held by no one else: then the first is added into the second.
  struct Buffer {
    TensorList grads;
    std::vector<bool> owned;
  };
  std::unordered_map<Node*, Buffer> buffers;
  auto accumulate = [&](Node* node, int slot, const Tensor& g) {
    const OutputMeta& meta = node->outputs[slot];
    LSF_CHECK(g.shape() == meta.shape && g.dtype() == meta.dtype)
        << "backward: internal error: gradient of shape " << g.shape() << " and dtype " << g.dtype()
        << " for an output of '" << node->name() << "' of shape " << meta.shape << " and dtype "
        << meta.dtype;
    Buffer& b = buffers[node];
    if (b.grads.empty()) {
      b.grads.resize(node->outputs.size());
      b.owned.resize(node->outputs.size(), false);
    }
    if (!b.grads[slot].defined()) {
      b.grads[slot] = g;
    } else {
      if (!b.owned[slot]) {
        b.owned[slot] = true;
        if (!exclusively_held(b.grads[slot], /*any_dense_layout=*/true)) {
          if (exclusively_held(g, /*any_dense_layout=*/true)) {
            // The slot's gradient is seen elsewhere (a slice of a larger gradient, say) but the
            // incoming one is not: add the first into the second, instead of copying the first
            // to add the second (the same sum: IEEE addition commutes).
            Tensor first = std::move(b.grads[slot]);
            b.grads[slot] = g;
            add_inplace_kernel(g.device(), b.grads[slot], first);
            return;
          }
          b.grads[slot] = owned_copy(b.grads[slot]);
        }
      }
      add_inplace_kernel(g.device(), b.grads[slot], g);
    }
  };
  for (size_t i = 0; i < roots.size(); ++i) accumulate(root_edges[i].node.get(), root_edges[i].input_nr, grads[i]);

  // 3. Run nodes once all their consumers have contributed (Kahn's algorithm).
  std::vector<std::shared_ptr<Node>> ready;
  for (const Edge& e : root_edges)
    if (dependencies[e.node.get()] == 0) ready.push_back(e.node);
  std::unordered_set<Node*> queued;
  for (auto& n : ready) queued.insert(n.get());
  while (!ready.empty()) {
    std::shared_ptr<Node> node = std::move(ready.back());
    ready.pop_back();
    auto found = buffers.find(node.get());
    if (found == buffers.end()) {
      // Every consumer returned no gradient: nothing flows through this node.
      for (const Edge& e : node->next_edges)
        if (e.valid() && --dependencies[e.node.get()] == 0 && queued.insert(e.node.get()).second)
          ready.push_back(e.node);
      if (!retain_graph) node->release();
      continue;
    }
    Buffer buffer = std::move(found->second);
    buffers.erase(found);
    buffer.grads.resize(node->outputs.size());
    keep_retained_gradients(*node, buffer.grads);
    for (size_t i = 0; i < buffer.grads.size(); ++i) {
      if (!buffer.grads[i].defined()) {  // an output nobody used: its gradient is zero
        const OutputMeta& m = node->outputs[i];
        buffer.grads[i] = empty(m.shape, TensorOptions(m.dtype).device(m.device));
        fill_kernel(m.device, buffer.grads[i], 0.0);
      }
    }
    TensorList input_grads;
    {
      // Leaf accumulators (and any other engine node) stay in the engine's own phase.
      const auto* function = dynamic_cast<const FunctionNode*>(node.get());
      profiler::BackwardScope phase(function ? function->phase() : "autograd (gradient sums)");
      input_grads = node->apply(buffer.grads);
      if (anomaly_mode_enabled() && function) check_backward_outputs(*node, function->phase(), input_grads);
    }
    if (!retain_graph) node->release();
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.valid()) continue;
      if (i < input_grads.size() && input_grads[i].defined())
        accumulate(e.node.get(), e.input_nr, input_grads[i]);
      if (--dependencies[e.node.get()] == 0 && queued.insert(e.node.get()).second)
        ready.push_back(e.node);
    }
  }
}

}  // namespace autograd
}  // namespace lsf
