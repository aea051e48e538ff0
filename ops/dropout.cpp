// dropout: argument checks, counter reservation, the backward node and the kernel calls.
//
// The mask is drawn once in forward and saved (u8, one byte per element); backward multiplies
// by it and the scale. Nothing else is saved: not x, not the generator state.
#include "lsformer/ops/dropout.h"
#include "lsformer/ops/kernels/dropout.h"

#include <cmath>

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/kernels/binary.h"
#include "lsformer/ops/factory.h"

namespace lsf {

LSF_DEFINE_KERNEL(dropout_forward_kernel, void(const Tensor& y, const Tensor& mask, const Tensor& x, double p, GeneratorState state));
LSF_DEFINE_KERNEL(dropout_backward_kernel, void(const Tensor& dx, const Tensor& dy, const Tensor& mask, double scale));

uint32_t dropout_keep_threshold(double p) {
  // p · 2²⁴ is exact in double (a power-of-two scaling), so the ceiling is too.
  return uint32_t(std::ceil(p * 16777216.0));
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  check_defined("dropout", {&x});
  LSF_CHECK(p >= 0.0 && p <= 1.0) << "dropout: probability has to be between 0 and 1, got " << p
                                  << " (input shape " << x.shape() << ")";
  LSF_CHECK(is_floating(x.dtype())) << "dropout: expected a floating-point tensor, got "
                                    << x.dtype() << " (shape " << x.shape() << ")";
  if (!training || p == 0.0) return x;
  if (p == 1.0) return mul(x, 0.0);  // everything dropped: zeros, and a zero gradient
  Generator& gen = generator != nullptr ? *generator : default_generator();
  const GeneratorState state = gen.reserve(dropout_blocks(x));
  Tensor y = empty(x.shape(), x.options());
  Tensor mask = empty(x.shape(), x.options().dtype(kU8));
  {
    NoGradGuard no_grad;  // a contiguous copy of x is plumbing, not part of the graph
    dropout_forward_kernel(x.device(), y, mask, x.contiguous(), p, state);
  }
  if (autograd::any_requires_grad({&x})) {
    autograd::SavedTensor saved_mask(mask);
    const double scale = 1.0 / (1.0 - p);
    autograd::record("dropout", {x}, {y},
                     [saved_mask, scale](const TensorList& g, const autograd::NeedsGrad&) -> TensorList {
                       Tensor dy = g[0].contiguous();  // dy [*x]
                       Tensor dx = empty(dy.shape(), dy.options());
                       dropout_backward_kernel(dy.device(), dx, dy, saved_mask.get(), scale);
                       return {dx};
                     });
  }
  return y;
}

}  // namespace lsf
