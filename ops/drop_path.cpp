// drop_path: a per-sample Bernoulli keep mask [B, 1, ..., 1] multiplied into x.
#include "lsformer/ops/drop_path.h"

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"

namespace lsf {

Tensor drop_path(const Tensor& x, double p, bool training, Generator* generator) {
  check_defined("drop_path", {&x});
  LSF_CHECK(p >= 0.0 && p <= 1.0) << "drop_path: probability has to be between 0 and 1, got " << p
                                  << " (input shape " << x.shape() << ")";
  LSF_CHECK(is_floating(x.dtype())) << "drop_path: expected a floating-point tensor, got " << x.dtype() << " (shape "
                                    << x.shape() << ")";
  LSF_CHECK(x.dim() >= 1) << "drop_path: expected an input [B, *] with a batch dim, got a 0-d tensor";
  if (!training || p == 0.0) return x;
  if (p == 1.0) return mul(x, 0.0);
  Shape mask_shape(size_t(x.dim()), 1);
  mask_shape[0] = x.size(0);
  Tensor scale;
  {
    NoGradGuard no_grad;  // the mask is a constant of the graph
    Tensor u = rand({x.size(0)}, TensorOptions(kF32).device(x.device()), generator);
    scale = mul(ge(u, p).to(x.dtype()), 1.0 / (1.0 - p)).view(mask_shape);
  }
  return mul(x, scale);
}

}  // namespace lsf
