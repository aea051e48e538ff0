#include "lsformer/ops/binary.h"
#include "lsformer/ops/kernels/binary.h"

#include <cmath>

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/kernels/reduce.h"
#include "lsformer/ops/unary.h"
#include "lsformer/ops/kernels/unary.h"

namespace lsf {

LSF_DEFINE_KERNEL(binary_kernel, void(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b));

namespace {

using autograd::NeedsGrad;
using autograd::SavedTensor;

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Eq: return "eq";
    case BinaryOp::Ne: return "ne";
    case BinaryOp::Lt: return "lt";
    case BinaryOp::Le: return "le";
    case BinaryOp::Gt: return "gt";
    case BinaryOp::Ge: return "ge";
  }
  return "?";
}

bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq; }

// Runs the kernel on broadcast operands; returns the (not yet recorded) result.
Tensor compute(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  check_same_device(name, {&a, &b});
  check_same_dtype(name, {&a, &b});
  if (op == BinaryOp::Div) {
    LSF_CHECK(is_floating(a.dtype())) << "div: expected floating-point tensors, got " << a.dtype()
                                      << " (convert with to(kF32) first)";
  }
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty(shape, a.options().dtype(is_comparison(op) ? kBool : a.dtype()));
  NoGradGuard no_grad;  // the expands below are plumbing, not part of the graph
  binary_kernel(a.device(), op, out, a.expand(shape), b.expand(shape));
  return out;
}

// A 0-d tensor holding `value` in a's dtype, refusing to truncate fractional scalars.
Tensor scalar_like(const Tensor& a, double value, const char* op) {
  LSF_CHECK(a.defined()) << op << ": the tensor is undefined";
  LSF_CHECK(is_floating(a.dtype()) || std::nearbyint(value) == value)
      << op << ": scalar " << value << " is not representable in a " << a.dtype()
      << " tensor; convert the tensor with to(kF32) first";
  return scalar_tensor(value, a.options());
}

Tensor arithmetic(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = compute(op, a, b);
  if (!autograd::any_requires_grad({&a, &b})) return out;
  Shape sa = a.shape(), sb = b.shape();
  switch (op) {
    case BinaryOp::Add:
      autograd::record("add", {a, b}, {out}, [sa, sb](const TensorList& g, const NeedsGrad& n) -> TensorList {
        return {n[0] ? sum_to(g[0], sa) : Tensor(), n[1] ? sum_to(g[0], sb) : Tensor()};
      });
      break;
    case BinaryOp::Sub:
      autograd::record("sub", {a, b}, {out}, [sa, sb](const TensorList& g, const NeedsGrad& n) -> TensorList {
        return {n[0] ? sum_to(g[0], sa) : Tensor(), n[1] ? sum_to(mul(g[0], -1.0), sb) : Tensor()};
      });
      break;
    case BinaryOp::Mul: {
      // Save only the operand each gradient needs: d(a·b)/da = b, d(a·b)/db = a.
      SavedTensor save_a = b.requires_grad() ? SavedTensor(a) : SavedTensor();
      SavedTensor save_b = a.requires_grad() ? SavedTensor(b) : SavedTensor();
      autograd::record("mul", {a, b}, {out}, [sa, sb, save_a, save_b](const TensorList& g, const NeedsGrad& n) -> TensorList {
        return {n[0] ? sum_to(mul(g[0], save_b.get()), sa) : Tensor(),
                n[1] ? sum_to(mul(g[0], save_a.get()), sb) : Tensor()};
      });
      break;
    }
    case BinaryOp::Div: {
      // d(a/b)/da = 1/b, d(a/b)/db = -a/b² = -out/b.
      SavedTensor save_b(b);
      SavedTensor save_out = b.requires_grad() ? SavedTensor(out) : SavedTensor();
      autograd::record("div", {a, b}, {out}, [sa, sb, save_b, save_out](const TensorList& g, const NeedsGrad& n) -> TensorList {
        Tensor ga = div(g[0], save_b.get());
        return {n[0] ? sum_to(ga, sa) : Tensor(),
                n[1] ? sum_to(mul(mul(ga, save_out.get()), -1.0), sb) : Tensor()};
      });
      break;
    }
    default: break;
  }
  return out;
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    LSF_CHECK(da == db || da == 1 || db == 1)
        << op << ": shapes " << a << " and " << b << " cannot be broadcast (dimension " << i
        << ": " << da << " vs " << db << ")";
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor add(const Tensor& a, const Tensor& b) { return arithmetic(BinaryOp::Add, a, b); }
Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  return alpha == 1.0 ? add(a, b) : add(a, mul(b, alpha));
}
Tensor sub(const Tensor& a, const Tensor& b) { return arithmetic(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return arithmetic(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return arithmetic(BinaryOp::Div, a, b); }
Tensor add(const Tensor& a, double b) { return add(a, scalar_like(a, b, "add")); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(a, b, "sub")); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(a, b, "mul")); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(a, b, "div")); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(b, a, "sub"), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(b, a, "div"), b); }
Tensor operator-(const Tensor& a) { return neg(a); }

#define LSF_COMPARISON(name, OP)                                                   \
  Tensor name(const Tensor& a, const Tensor& b) { return compute(BinaryOp::OP, a, b); } \
  Tensor name(const Tensor& a, double b) { return compute(BinaryOp::OP, a, scalar_tensor(b, a.options())); }
LSF_COMPARISON(eq, Eq)
LSF_COMPARISON(ne, Ne)
LSF_COMPARISON(lt, Lt)
LSF_COMPARISON(le, Le)
LSF_COMPARISON(gt, Gt)
LSF_COMPARISON(ge, Ge)
#undef LSF_COMPARISON

}  // namespace lsf
