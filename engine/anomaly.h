// Anomaly detection: which op, recorded where, first produced a NaN or an infinity.
//
//   { lsf::autograd::AnomalyMode anomaly; loss = model.forward(x); loss.backward(); }
//   // lsf::Error: anomaly: the backward of 'sqrt' (forward call site: encoder.layers.1.attn
//   // (LongShortAttention); phase attention) returned a gradient with Inf for its input 0 ...
//
// While an AnomalyMode is alive on a thread (like PyTorch's detect_anomaly, it nests and is
// per thread, as grad mode is):
// - every op that records a graph node checks its forward outputs for NaN and throws naming
//   the op and its call site (NaN only: an infinity is a legitimate forward value, e.g. the
//   -inf of an attention mask or log(0) on a masked path);
// - the backward pass checks each node's input gradients for NaN and ±Inf as the node returns
//   them, and throws at the first non-finite one, naming the op, which input, its shape, and
//   the forward call site recorded with the node.
// The call site is the innermost CallSiteScope alive when the op ran: nn::ModuleScope opens one
// per module forward with the module's dotted path ("encoder.layers.1.attn", the state_dict
// prefix). Call sites are computed and stored only while anomaly mode is on; otherwise a scope
// costs one thread-local load and the checks are skipped entirely. The checks copy every
// checked tensor to host doubles: anomaly mode is a debugging tool, several times slower.
#pragma once

#include <string>
#include <utility>

#include "lsformer/engine/tensor.h"

namespace lsf::autograd {

namespace detail {
extern thread_local int anomaly_depth;
void push_call_site(std::string site);
void pop_call_site();
}  // namespace detail

inline bool anomaly_mode_enabled() { return detail::anomaly_depth > 0; }

// Turns anomaly detection on in its scope (nestable).
class AnomalyMode {
 public:
  AnomalyMode() { ++detail::anomaly_depth; }
  ~AnomalyMode() { --detail::anomaly_depth; }
  AnomalyMode(const AnomalyMode&) = delete;
  AnomalyMode& operator=(const AnomalyMode&) = delete;
};

// Names the forward call site of the ops run in its scope (innermost wins). `describe` is a
// callable returning the site's text; it is called only when anomaly mode is on.
class CallSiteScope {
 public:
  template <typename Describe>
  explicit CallSiteScope(Describe&& describe) : pushed_(anomaly_mode_enabled()) {
    if (pushed_) detail::push_call_site(std::forward<Describe>(describe)());
  }
  ~CallSiteScope() {
    if (pushed_) detail::pop_call_site();
  }
  CallSiteScope(const CallSiteScope&) = delete;
  CallSiteScope& operator=(const CallSiteScope&) = delete;

 private:
  bool pushed_;
};

// The innermost call site ("" outside every CallSiteScope or with anomaly mode off).
const std::string& current_call_site();

// What a tensor holds that is not finite: "" when every value is finite (or the tensor is not
// floating point); otherwise e.g. "NaN (3 of 12 values, first at flat index 5)". With
// nan_only, infinities count as finite.
std::string describe_non_finite(const Tensor& t, bool nan_only = false);

}  // namespace lsf::autograd
