// The per-thread autocast state and the product ops' Region (see autocast.h).
#include "lsformer/engine/autocast.h"

#include "lsformer/engine/error.h"

namespace lsf {

namespace {
thread_local DType g_autocast = DType::F32;
}

DType autocast_dtype() { return g_autocast; }

AutocastGuard::AutocastGuard(DType dtype) : previous_(g_autocast) {
  LSF_CHECK(dtype == DType::BF16 || dtype == DType::F16 || dtype == DType::F32)
      << "AutocastGuard: the dtype must be bf16 or f16 (on) or f32 (off), got " << dtype;
  g_autocast = dtype;
}

AutocastGuard::~AutocastGuard() { g_autocast = previous_; }

namespace autocast {

void Region::enter(const Tensor* const* first, const Tensor* const* last) {
  if (g_autocast == DType::F32) return;
  for (const Tensor* const* it = first; it != last; ++it) {
    const Tensor& t = **it;
    if (t.defined() && is_floating(t.dtype()) && t.dtype() != DType::F32) return;  // f64 (or 16-bit) runs as it is
  }
  active_ = true;
  low_ = g_autocast;
  g_autocast = DType::F32;  // the op's inner call runs plain
}

Region::~Region() {
  if (active_) g_autocast = low_;
}

Tensor Region::in(const Tensor& t) const {
  if (!active_ || !t.defined() || t.dtype() != DType::F32) return t;
  return t.device().is_cuda() ? t.to(low_) : t.to(low_).to(DType::F32);
}

Tensor Region::out(const Tensor& t) const {
  if (!active_ || !t.defined() || !is_floating(t.dtype())) return t;
  return t.dtype() == DType::F32 ? t.to(low_).to(DType::F32) : t.to(DType::F32);
}

}  // namespace autocast
}  // namespace lsf
