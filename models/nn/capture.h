// nn::CaptureScope: capture intermediate tensors of a forward pass by module path.
//
//   nn::CaptureScope capture(model);               // everything under `model`
//   model.forward(tokens, mask);
//   Tensor a = capture.get("model.transformer_0.mha.attention");   // [B, h, n, R + s]
//   Tensor p = capture.get("model.transformer_0.mha.proj");        // [B, h, r, n]
//
// A module records a tensor with nn::capture(this, "name", t) during its forward; the scope
// stores it under "<the module's path>.<name>", where the path is the module's dotted name
// below the scope's root exactly as state_dict keys spell it ("blocks.0.attn"; the root itself
// has the empty path, so its tensors are stored as "name"). What each module records is listed
// in its header (the attention modules: their attention probabilities and the inputs of the
// joint softmax; docs/embedding.md "Looking inside a forward").
//
// Cost: with no scope active, nn::capturing(this) and nn::capture(this, "name", t) are a call
// that reads one thread-local pointer, and a null test (the name is a string_view: nothing is built),
// and modules compute what they would record (e.g. the attention probabilities, which the fused
// kernels never materialise) only when it answers true, so nothing is allocated or computed.
//
// Scopes are per thread and nest: the innermost one records, and restores the outer one when
// it ends. `paths` restricts recording to modules whose path equals or lies below one of the
// given prefixes (an empty list: every module), so that capturing one layer of a deep model
// does not compute every layer's attention. A module outside the root's tree (not one of its
// descendants) records nothing. CapturePause suspends recording (e.g. while a task runs the
// previous block to fill a language model's memory).
//
// The stored tensors are the forward's own handles (still in the autograd graph when it
// records): keep them only as long as needed, or detach() them. Recording the same name twice
// (a module called twice in one forward, e.g. a shared encoder of two inputs) keeps both, the
// second as "<name>#1", the third "<name>#2", ...
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lsformer/engine/tensor.h"
#include "lsformer/models/nn/module.h"

namespace lsf::nn {

class CaptureScope {
 public:
  // root: the module whose descendants record (paths are relative to it). paths: prefixes of
  // the module paths to record, empty for all.
  explicit CaptureScope(const Module& root, std::vector<std::string> paths = {});
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

  // Every recorded tensor by full name ("<path>.<name>"), sorted by name.
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // The tensor recorded as `name`; throws naming it and listing what was recorded when absent.
  const Tensor& get(const std::string& name) const;
  // The names recorded under `module_path` (its own tensors, "<module_path>.<name>"), in name order.
  std::vector<std::string> names_under(const std::string& module_path) const;
  // The path of `module` below the root ("" for the root); false when it is not in the tree.
  bool path_of(const Module* module, std::string* path) const;

  // For modules (through capturing() / capture() below).
  bool wants(const Module* module) const;
  void record(const Module* module, std::string_view name, const Tensor& tensor);

 private:
  friend class CapturePause;
  std::unordered_map<const Module*, std::string> paths_;  // every module of the tree → its path
  std::vector<std::string> prefixes_;
  std::map<std::string, Tensor> tensors_;
  CaptureScope* previous_ = nullptr;
};

// Suspends the active scope (if any) for its lifetime.
class CapturePause {
 public:
  CapturePause();
  ~CapturePause();
  CapturePause(const CapturePause&) = delete;
  CapturePause& operator=(const CapturePause&) = delete;

 private:
  CaptureScope* paused_;
};

namespace detail {
CaptureScope*& active_capture_scope();  // this thread's innermost scope, null when none
}

// Whether `module` should record now (a scope is active, the module is in its tree and selected).
inline bool capturing(const Module* module) {
  CaptureScope* s = detail::active_capture_scope();
  return s != nullptr && s->wants(module);
}

// Records `tensor` as "<path of module>.<name>" in the active scope; nothing when none is active
// or the module is not selected.
inline void capture(const Module* module, std::string_view name, const Tensor& tensor) {
  CaptureScope* s = detail::active_capture_scope();
  if (s != nullptr && s->wants(module)) s->record(module, name, tensor);
}

}  // namespace lsf::nn
