// masked_fill, where, gather, index_select: argument checks, kernel calls, backward closures.
#include "lsformer/ops/index.h"
#include "lsformer/ops/kernels/index.h"

#include <cmath>

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/kernels/binary.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/kernels/reduce.h"

namespace lsf {

LSF_DEFINE_KERNEL(where_kernel, void(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b));
LSF_DEFINE_KERNEL(gather_kernel, void(const Tensor& out, const Tensor& x, const Tensor& index, int64_t dim));
LSF_DEFINE_KERNEL(scatter_add_kernel, void(const Tensor& out, const Tensor& index, const Tensor& src, int64_t dim));
LSF_DEFINE_KERNEL(index_select_kernel, void(const Tensor& out, const Tensor& x, const Tensor& index, int64_t dim));
LSF_DEFINE_KERNEL(index_add_kernel, void(const Tensor& out, const Tensor& index, const Tensor& src, int64_t dim));

namespace {

using autograd::NeedsGrad;
using autograd::SavedTensor;

void check_bool(const char* op, const char* what, const Tensor& t) {
  LSF_CHECK(t.dtype() == kBool) << op << ": " << what << " must be a bool tensor, got " << t.dtype()
                                << " (shape " << t.shape() << ")";
}

}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_same_device("masked_fill", {&x, &mask});
  check_bool("masked_fill", "mask", mask);
  LSF_CHECK(broadcast_shapes(x.shape(), mask.shape(), "masked_fill") == x.shape())
      << "masked_fill: mask of shape " << mask.shape() << " does not broadcast to the input's shape "
      << x.shape();
  LSF_CHECK(is_floating(x.dtype()) || std::nearbyint(value) == value)
      << "masked_fill: value " << value << " is not representable in a " << x.dtype()
      << " tensor (shape " << x.shape() << ")";
  Tensor out = empty(x.shape(), x.options());
  {
    NoGradGuard no_grad;  // the expands are plumbing, not part of the graph
    Tensor fill = scalar_tensor(value, x.options());
    where_kernel(x.device(), out, mask.expand(x.shape()), fill.expand(x.shape()), x);
  }
  if (autograd::any_requires_grad({&x})) {
    SavedTensor saved_mask(mask);
    autograd::record("masked_fill", {x}, {out}, [saved_mask](const TensorList& g, const NeedsGrad&) -> TensorList {
      // dout [x.shape] → dx: nothing flows to the positions the fill overwrote.
      return {masked_fill(g[0], saved_mask.get(), 0.0)};
    });
  }
  return out;
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  check_same_device("where", {&condition, &a, &b});
  check_bool("where", "condition", condition);
  LSF_CHECK(a.dtype() == b.dtype()) << "where: a (shape " << a.shape() << ") has dtype " << a.dtype()
                                    << " but b (shape " << b.shape() << ") has " << b.dtype()
                                    << "; convert with to(dtype) first";
  Shape shape = broadcast_shapes(broadcast_shapes(condition.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = empty(shape, a.options());
  {
    NoGradGuard no_grad;
    where_kernel(a.device(), out, condition.expand(shape), a.expand(shape), b.expand(shape));
  }
  if (autograd::any_requires_grad({&a, &b})) {
    SavedTensor saved_cond(condition);
    Shape sa = a.shape(), sb = b.shape();
    autograd::record("where", {a, b}, {out}, [saved_cond, sa, sb](const TensorList& g, const NeedsGrad& n) -> TensorList {
      // dout [shape] → da = dout where cond, db = dout elsewhere, each summed to its operand.
      const Tensor& cond = saved_cond.get();
      Tensor zero = scalar_tensor(0.0, g[0].options());
      return {n[0] ? sum_to(where(cond, g[0], zero), sa) : Tensor(),
              n[1] ? sum_to(where(cond, zero, g[0]), sb) : Tensor()};
    });
  }
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_same_device("gather", {&x, &index});
  LSF_CHECK(index.dtype() == kI64) << "gather: index must be an i64 tensor, got " << index.dtype()
                                   << " (index shape " << index.shape() << ", input shape "
                                   << x.shape() << ")";
  LSF_CHECK(index.dim() == x.dim())
      << "gather: index of shape " << index.shape() << " must have as many dimensions as the input of shape "
      << x.shape();
  const int64_t d = wrap_dim(dim, x.dim(), "gather");
  if (x.dim() == 0)  // a scalar behaves as a 1-element vector
    return gather(x.reshape({1}), 0, index.reshape({1})).reshape({});
  for (int64_t k = 0; k < x.dim(); ++k)
    LSF_CHECK(k == d || index.shape()[k] <= x.shape()[k])
        << "gather: index of shape " << index.shape() << " is larger than the input of shape "
        << x.shape() << " in dimension " << k << " (only dimension " << d << " may be larger)";
  Tensor out = empty(index.shape(), x.options());
  gather_kernel(x.device(), out, x, index, d);
  if (autograd::any_requires_grad({&x})) {
    SavedTensor saved_index(index);
    Shape x_shape = x.shape();
    autograd::record("gather", {x}, {out}, [saved_index, x_shape, d](const TensorList& g, const NeedsGrad&) -> TensorList {
      // dout [index.shape] → dx [x.shape]: dx[.., index[p], ..] += dout[p] (repeats add up).
      Tensor dx = zeros(x_shape, g[0].options());
      scatter_add_kernel(g[0].device(), dx, saved_index.get(), g[0], d);
      return {dx};
    });
  }
  return out;
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_same_device("index_select", {&x, &index});
  LSF_CHECK(index.dtype() == kI64 || index.dtype() == kI32)
      << "index_select: index must be an i64 or i32 tensor, got " << index.dtype() << " (index shape "
      << index.shape() << ", input shape " << x.shape() << ")";
  LSF_CHECK(index.dim() <= 1) << "index_select: index must be 1-D, got shape " << index.shape()
                              << " (input shape " << x.shape() << ")";
  const int64_t d = wrap_dim(dim, x.dim(), "index_select");
  if (x.dim() == 0) {  // a scalar behaves as a 1-element vector; one index gives a scalar back
    LSF_CHECK(index.numel() == 1) << "index_select: a 0-d input takes exactly one index, got shape "
                                  << index.shape();
    return index_select(x.reshape({1}), 0, index.reshape({1})).reshape({});
  }
  Tensor flat_index = index.reshape({index.numel()});
  Shape out_shape = x.shape();
  out_shape[d] = flat_index.numel();
  Tensor out = empty(out_shape, x.options());
  index_select_kernel(x.device(), out, x, flat_index, d);
  if (autograd::any_requires_grad({&x})) {
    SavedTensor saved_index(flat_index);
    Shape x_shape = x.shape();
    autograd::record("index_select", {x}, {out}, [saved_index, x_shape, d](const TensorList& g, const NeedsGrad&) -> TensorList {
      // dout [.., n, ..] → dx [x.shape]: dx[.., index[j], ..] += dout[.., j, ..].
      Tensor dx = zeros(x_shape, g[0].options());
      index_add_kernel(g[0].device(), dx, saved_index.get(), g[0], d);
      return {dx};
    });
  }
  return out;
}

}  // namespace lsf
