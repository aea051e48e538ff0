// The per-thread autocast state and the product ops' Region (see autocast.h).
#include "lsformer/engine/autocast.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "lsformer/engine/autograd.h"
#include "lsformer/engine/core_kernels.h"
#include "lsformer/engine/error.h"

namespace lsf {

namespace {
thread_local DType g_autocast = DType::F32;

std::atomic<bool>& cpu_bf16_products_flag() {
  static std::atomic<bool> enabled{[] {
    const char* v = std::getenv("LSF_CPU_BF16_PRODUCTS");
    return !(v != nullptr && std::string(v) == "0");
  }()};
  return enabled;
}
}  // namespace

DType autocast_dtype() { return g_autocast; }

bool cpu_bf16_products() { return cpu_bf16_products_flag().load(std::memory_order_relaxed); }
void set_cpu_bf16_products(bool enabled) { cpu_bf16_products_flag().store(enabled, std::memory_order_relaxed); }

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

namespace {
// t (f32, CPU) with every value rounded to `low`, still f32, in one pass (the bits of
// t.to(low).to(kF32), whose backward rounds the gradient the same way); the result's storage
// is marked exact in `low`, which lets the products take the CPU's bf16 kernel.
Tensor rounded_on_cpu(const Tensor& t, DType low) {
  Tensor out = empty(t.shape(), t.options());
  round_to_kernel(t.device(), out, t, low);
  out.storage()->mark_values_exact_in(low);
  autograd::record("autocast_round", {t}, {out}, [low](const TensorList& g, const autograd::NeedsGrad&) -> TensorList {
    return {rounded_on_cpu(g[0], low)};
  });
  return out;
}
}  // namespace

Tensor Region::in(const Tensor& t) const {
  if (!active_ || !t.defined() || t.dtype() != DType::F32) return t;
  return t.device().is_cuda() ? t.to(low_) : rounded_on_cpu(t, low_);
}

Tensor Region::out(const Tensor& t) const {
  if (!active_ || !t.defined() || !is_floating(t.dtype())) return t;
  if (t.dtype() != DType::F32) return t.to(DType::F32);
  return t.device().is_cuda() ? t.to(low_).to(DType::F32) : rounded_on_cpu(t, low_);
}

}  // namespace autocast
}  // namespace lsf
