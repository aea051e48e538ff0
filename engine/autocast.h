// Mixed precision (issue #20): inside an AutocastGuard(kBF16) (or kF16), the product ops —
// matmul, bmm, linear, linears, conv2d and the fused attention cores — compute from their f32
// operands rounded to that dtype, accumulate in f32, and round their result to it, while
// everything else (softmax, layer norm, losses, reductions, the optimizer and its f32 master
// weights) stays f32, as under PyTorch's autocast.
//
//   {
//     lsf::AutocastGuard autocast(lsf::kBF16);
//     Tensor loss = cross_entropy(model.forward(x), y);   // products in bf16, the rest f32
//   }
//   loss.backward();                                      // outside the guard, as in PyTorch
//
// Results keep dtype f32, so no other op has to accept 16-bit inputs. On a GPU the products run
// as 16-bit kernels (f32 accumulation); on the CPU on the rounded values (f32 tensors marked
// exact in the 16-bit format): matmul, bmm, linear, linears and conv2d's GEMMs on the bf16
// dot-product instruction where the CPU has one (cpu_bf16_products below), everything else in
// f32, with the same rounding points: the two agree within the 16-bit format's tolerance. The
// roundings are differentiable casts, whose backward rounds the gradient the same way, so the
// products' backward also sees 16-bit operands. Only f32 operands are affected (f64
// runs as f64). The state is per thread, like grad mode.
#pragma once

#include <initializer_list>
#include <vector>

#include "lsformer/engine/dtype.h"
#include "lsformer/engine/tensor.h"

namespace lsf {

// The dtype the product ops round to on this thread: kBF16 or kF16 inside an AutocastGuard,
// kF32 outside (autocast off).
DType autocast_dtype();
inline bool autocast_enabled() { return autocast_dtype() != DType::F32; }

// On the CPU, products whose operands all came from bf16 (as autocast's roundings make them:
// matmul, bmm, linear, linears and conv2d, forward and backward) run on the bf16 dot-product
// instruction where the CPU has it (AVX512_BF16: Cooper Lake, Sapphire Rapids, Zen 4 and later),
// about twice as fast as f32; the same sums in another order (ops/cpu/gemm_bf16.h). On by
// default; LSF_CPU_BF16_PRODUCTS=0 in the environment, or set_cpu_bf16_products(false), keeps
// every product in f32 (the process-wide setting, e.g. for comparing the two).
bool cpu_bf16_products();
void set_cpu_bf16_products(bool enabled);

class AutocastGuard {
 public:
  // dtype: kBF16 or kF16 (on), or kF32 (off inside this scope); anything else is an error.
  explicit AutocastGuard(DType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DType previous_;
};

namespace autocast {

// What a product op does at its top (ops/matmul.cpp and the others):
//
//   const autocast::Region region({&a, &b});
//   if (region) return region.out(matmul(region.in(a), region.in(b)));
//
// A Region is active when autocast is on and every defined floating operand is f32; while it
// lives, autocast is off on the thread (the op's inner call runs plain).
class Region {
 public:
  // An initializer list for the fixed-arity ops (no allocation on their path when autocast is
  // off), a vector for linears' variable number of operands.
  explicit Region(std::initializer_list<const Tensor*> operands) { enter(operands.begin(), operands.end()); }
  explicit Region(const std::vector<const Tensor*>& operands) { enter(operands.data(), operands.data() + operands.size()); }
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  explicit operator bool() const { return active_; }
  // An operand as the inner call takes it: a floating one rounded to the autocast dtype — a
  // 16-bit tensor on a GPU, its f32 value on the CPU; anything else (undefined, integer) as is.
  Tensor in(const Tensor& t) const;
  // The inner call's floating result rounded to the autocast dtype, as f32.
  Tensor out(const Tensor& t) const;

 private:
  void enter(const Tensor* const* first, const Tensor* const* last);
  bool active_ = false;
  DType low_ = DType::F32;
};

}  // namespace autocast
}  // namespace lsf
