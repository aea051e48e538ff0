#include "lsformer/ops/reduce.h"
#include "lsformer/ops/kernels/reduce.h"

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/kernels/binary.h"
#include "lsformer/ops/factory.h"

namespace lsf {

LSF_DEFINE_KERNEL(reduce_kernel, void(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<bool>& reduce_mask));
LSF_DEFINE_KERNEL(arg_reduce_kernel, void(bool is_max, const Tensor& indices, const Tensor& x, int64_t dim));

namespace {

using autograd::NeedsGrad;
using autograd::SavedTensor;

struct Plan {
  std::vector<bool> mask;  // which dims are reduced
  Shape kept_shape;        // x's shape with reduced dims set to 1
  Shape out_shape;         // the result's shape (kept_shape without them unless keepdim)
  int64_t count = 1;       // elements per reduction
};

Plan plan(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
  Plan p;
  const int64_t n = x.dim();
  p.mask.assign(n, dims.empty());
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, n, op);
    LSF_CHECK(!p.mask[w] || dims.empty()) << op << ": dimension " << d << " appears twice in " << dims;
    p.mask[w] = true;
  }
  for (int64_t i = 0; i < n; ++i) {
    p.kept_shape.push_back(p.mask[i] ? 1 : x.shape()[i]);
    if (p.mask[i]) p.count *= x.shape()[i];
    if (!p.mask[i] || keepdim) p.out_shape.push_back(p.kept_shape.back());
  }
  return p;
}

Tensor run_reduce(ReduceOp op, const Tensor& x, const Plan& p) {
  // Integer and bool sums count in i64, as in PyTorch.
  DType dtype = (op == ReduceOp::Sum && is_integral(x.dtype())) ? kI64 : x.dtype();
  Tensor out = empty(p.kept_shape, x.options().dtype(dtype));
  reduce_kernel(x.device(), op, out, x, p.mask);
  return out;
}

// amax/amin: gradient shared equally among the elements equal to the extremum.
Tensor extremum(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const char* name = op == ReduceOp::Max ? "amax" : "amin";
  check_defined(name, {&x});
  Plan p = plan(x, dims, keepdim, name);
  LSF_CHECK(p.count > 0) << name << ": cannot reduce over an empty dimension (shape " << x.shape() << ")";
  Tensor kept = run_reduce(op, x, p);
  Tensor out = kept.view(p.out_shape);
  if (autograd::any_requires_grad({&x})) {
    Tensor kept_values = kept.detach();
    SavedTensor sx(x), sk(kept_values);
    Shape kept_shape = p.kept_shape;
    autograd::record(name, {x}, {out}, [sx, sk, kept_shape](const TensorList& g, const NeedsGrad&) -> TensorList {
      const Tensor& xv = sx.get();
      Tensor is_extremum = eq(xv, sk.get()).to(xv.dtype());
      Tensor ties = sum_to(is_extremum, kept_shape);
      return {mul(div(g[0].reshape(kept_shape), ties), is_extremum)};
    });
  }
  return out;
}

ValuesIndices extremum_at(bool is_max, const Tensor& x, int64_t dim, bool keepdim) {
  const char* name = is_max ? "max" : "min";
  check_defined(name, {&x});
  Plan p = plan(x, {dim}, keepdim, name);
  LSF_CHECK(p.count > 0) << name << ": cannot reduce over an empty dimension (shape " << x.shape() << ")";
  int64_t d = wrap_dim(dim, x.dim(), name);
  Tensor kept_values = run_reduce(is_max ? ReduceOp::Max : ReduceOp::Min, x, p);
  Tensor kept_indices = empty(p.kept_shape, x.options().dtype(kI64));
  arg_reduce_kernel(x.device(), is_max, kept_indices, x, d);
  ValuesIndices r{kept_values.view(p.out_shape), kept_indices.view(p.out_shape)};
  if (autograd::any_requires_grad({&x})) {
    SavedTensor si(kept_indices);
    Shape in_shape = x.shape(), kept_shape = p.kept_shape;
    autograd::record(name, {x}, {r.values}, [si, in_shape, kept_shape, d](const TensorList& g, const NeedsGrad&) -> TensorList {
      // Route each gradient to its index: compare positions along `dim` with the indices.
      Shape pos_shape(in_shape.size(), 1);
      pos_shape[d] = in_shape[d];
      Tensor positions = arange(in_shape[d], TensorOptions(kI64).device(g[0].device())).view(pos_shape);
      Tensor hit = eq(positions, si.get()).to(g[0].dtype());
      return {mul(g[0].reshape(kept_shape), hit)};
    });
  }
  return r;
}

Tensor arg_extremum(bool is_max, const Tensor& x, int64_t dim, bool keepdim) {
  const char* name = is_max ? "argmax" : "argmin";
  check_defined(name, {&x});
  Plan p = plan(x, {dim}, keepdim, name);
  LSF_CHECK(p.count > 0) << name << ": cannot reduce over an empty dimension (shape " << x.shape() << ")";
  Tensor kept = empty(p.kept_shape, x.options().dtype(kI64));
  arg_reduce_kernel(x.device(), is_max, kept, x, wrap_dim(dim, x.dim(), name));
  return kept.view(p.out_shape);
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_defined("sum", {&x});
  Plan p = plan(x, dims, keepdim, "sum");
  Tensor out = run_reduce(ReduceOp::Sum, x, p).view(p.out_shape);
  Shape in_shape = x.shape(), kept_shape = p.kept_shape;
  autograd::record("sum", {x}, {out}, [in_shape, kept_shape](const TensorList& g, const NeedsGrad&) -> TensorList {
    return {g[0].reshape(kept_shape).expand(in_shape).contiguous()};
  });
  return out;
}
Tensor sum(const Tensor& x) { return sum(x, {}, false); }

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_defined("mean", {&x});
  LSF_CHECK(is_floating(x.dtype())) << "mean: expected a floating-point tensor, got " << x.dtype();
  Plan p = plan(x, dims, keepdim, "mean");
  return div(sum(x, dims, keepdim), double(p.count));
}
Tensor mean(const Tensor& x) { return mean(x, {}, false); }

Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extremum(ReduceOp::Max, x, dims, keepdim);
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extremum(ReduceOp::Min, x, dims, keepdim);
}
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) { return extremum_at(true, x, dim, keepdim); }
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) { return extremum_at(false, x, dim, keepdim); }
Tensor max(const Tensor& x) { return amax(x); }
Tensor min(const Tensor& x) { return amin(x); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return arg_extremum(true, x, dim, keepdim); }
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) { return arg_extremum(false, x, dim, keepdim); }

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  check_defined("var", {&x});
  LSF_CHECK(is_floating(x.dtype())) << "var: expected a floating-point tensor, got " << x.dtype();
  Plan p = plan(x, dims, keepdim, "var");
  LSF_CHECK(correction >= 0) << "var: correction must be non-negative, got " << correction;
  // Two passes (mean, then squared deviations) — composed, so autograd derives the backward:
  // d var / dx = 2 (x - mean) / (N - correction).
  Tensor centered = sub(x, mean(x, dims, /*keepdim=*/true));
  double denom = double(std::max<int64_t>(p.count - correction, 0));
  return div(sum(mul(centered, centered), dims, keepdim), denom);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - int64_t(shape.size());
  LSF_CHECK(lead >= 0) << "sum_to: cannot reduce shape " << x.shape() << " to " << shape;
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < lead) {
      dims.push_back(i);
    } else {
      int64_t want = shape[i - lead];
      LSF_CHECK(want == x.shape()[i] || want == 1)
          << "sum_to: cannot reduce shape " << x.shape() << " to " << shape;
      if (want == 1 && x.shape()[i] != 1) dims.push_back(i);
    }
  }
  if (dims.empty()) return x.reshape(shape);
  return sum(x, dims, /*keepdim=*/true).reshape(shape);
}

}  // namespace lsf
