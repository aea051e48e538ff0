// matmul, bmm and linear: PyTorch's shape rules, the backward nodes, and the calls into gemm_kernel
// (linear's forward: linear_forward_kernel, the bias in the product's store).
//
// Every case becomes one batched product C [*, M, N] = A [*, M, K] · B [*, K, N]: a 1-D left
// operand is viewed as [1, K] and a 1-D right operand as [K, 1]; both are expanded (zero
// strides, no copy) to the broadcast batch shape *; the result is viewed back without the
// added dims. Backward: dA = dC · Bᵀ and dB = Aᵀ · dC, each written straight into a tensor of
// its operand's shape that is expanded over the batch dims the operand was broadcast along, so
// gemm_kernel sums over them as it goes: no full-batch temporary followed by a sum.
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/kernels/matmul.h"

#include <algorithm>

#include "lsformer/engine/autocast.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/flops.h"
#include "lsformer/ops/reduce.h"

namespace lsf {

LSF_DEFINE_KERNEL(gemm_kernel, void(const Tensor& c, const Tensor& a, const Tensor& b, double alpha, double beta));
LSF_DEFINE_KERNEL(linear_forward_kernel,
                  void(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias));
LSF_DEFINE_KERNEL(linear_weight_grad_kernel,
                  bool(const Tensor& dweight, const Tensor& dbias, const Tensor& x, const Tensor& dy));

LSF_DEFINE_KERNEL(linears_forward_kernel,
                  bool(const TensorList& ys, const Tensor& x, const TensorList& weights, const TensorList& biases));
LSF_DEFINE_KERNEL(linears_input_grad_kernel, bool(const Tensor& dx, const TensorList& dys, const TensorList& weights));
LSF_DEFINE_KERNEL(linears_weight_grad_kernel, bool(const TensorList& dweights, const TensorList& dbiases,
                                                   const Tensor& x, const TensorList& dys));

bool is_gemm_operand(const Tensor& t) {
  if (t.dim() < 2) return false;
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const int64_t rs = t.stride(-2), cs = t.stride(-1);
  // Row-major: unit column stride, and rows far enough apart not to overlap.
  if (cols <= 1 || cs == 1) {
    if (rows <= 1 || rs >= std::max<int64_t>(cols, 1)) return true;
  }
  // Column-major (a transposed view): the same with the roles swapped.
  if (rows <= 1 || rs == 1) {
    if (cols <= 1 || cs >= std::max<int64_t>(rows, 1)) return true;
  }
  return false;
}

Tensor gemm_operand(const Tensor& t) {
  if (is_gemm_operand(t)) return t;
  NoGradGuard no_grad;
  return t.contiguous();
}

namespace {

using autograd::NeedsGrad;
using autograd::SavedTensor;

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

Shape with_matrix(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

// c = a · b + beta · c with a [*a, M, K] and b [*b, K, N] broadcast to `batch`. c has shape
// [*c, M, N] where *c broadcasts to `batch`; c's broadcast dims are summed over (the gradient
// of a broadcast operand). beta 0 overwrites c, 1 adds the product to it.
void gemm_into(const Tensor& c, const Tensor& a, const Tensor& b, const Shape& batch, double beta = 0.0) {
  NoGradGuard no_grad;  // views below are plumbing, not part of the graph
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  if (shape_numel(batch) == 0) {  // an empty batch: the sum over it is zero
    if (beta == 0.0) c.zero_();
    return;
  }
  // gemm_operand before expand, so a copy (if any) is of the operand, never of its broadcast.
  gemm_kernel(c.device(), c.expand(with_matrix(batch, M, N)),
              gemm_operand(a).expand(with_matrix(batch, M, K)),
              gemm_operand(b).expand(with_matrix(batch, K, N)), /*alpha=*/1.0, beta);
}

// The gradients of c [*, M, N] = am [*a, M, K] · bm [*b, K, N] (broadcast to `batch`) from
// dc [*, M, N], each written in its operand's memory layout and summed over the batch dims the
// operand was broadcast along: dA [*a, M, K] = dC · Bᵀ, dB [*b, K, N] = Aᵀ · dC.
Tensor product_grad_a(const Tensor& dc, const Tensor& bm, const Shape& am_shape, const Strides& am_strides,
                      const Shape& batch) {
  Tensor da = empty_in_layout(am_shape, am_strides, dc.options());
  gemm_into(da, dc, bm.transpose(-1, -2), batch);
  return da;
}
Tensor product_grad_b(const Tensor& dc, const Tensor& am, const Shape& bm_shape, const Strides& bm_strides,
                      const Shape& batch) {
  Tensor db = empty_in_layout(bm_shape, bm_strides, dc.options());
  gemm_into(db, am.transpose(-1, -2), dc, batch);
  return db;
}

void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, {&a, &b});
  check_same_device(op, {&a, &b});
  check_same_dtype(op, {&a, &b});
  LSF_CHECK(is_floating(a.dtype()))
      << op << ": integer dtype " << a.dtype() << " is not supported (shapes " << a.shape()
      << " and " << b.shape() << "; BLAS has no integer GEMM): convert with to(kF32) first";
}

// The batched product and its backward node, shared by matmul and bmm.
//   am [*a, M, K], bm [*b, K, N]: a and b viewed as matrices (1-D operands unsqueezed);
//   batch: the broadcast of *a and *b; out_shape: the result's shape as the user sees it.
Tensor product(const char* op, const Tensor& a, const Tensor& b, const Tensor& am, const Tensor& bm,
               const Shape& batch, const Shape& out_shape) {
  const int64_t M = am.size(-2), N = bm.size(-1);
  count_multiply_adds(op, shape_numel(batch) * M * N * am.size(-1));
  Tensor c = empty(with_matrix(batch, M, N), a.options());
  gemm_into(c, am, bm, batch);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = c.view(out_shape);
  }
  if (!autograd::any_requires_grad({&a, &b})) return out;
  // dA needs B and dB needs A: save each only if the other side wants a gradient.
  SavedTensor saved_am = b.requires_grad() ? SavedTensor(am) : SavedTensor();
  SavedTensor saved_bm = a.requires_grad() ? SavedTensor(bm) : SavedTensor();
  const Shape a_shape = a.shape(), b_shape = b.shape(), am_shape = am.shape(), bm_shape = bm.shape();
  const Strides am_strides = am.strides(), bm_strides = bm.strides();
  autograd::record(op, {a, b}, {out},
                   [=](const TensorList& g, const NeedsGrad& needs) -> TensorList {
                     // dc [*, M, N]
                     Tensor dc = g[0].reshape(with_matrix(batch, M, N));
                     TensorList grads(2);
                     if (needs[0]) grads[0] = product_grad_a(dc, saved_bm.get(), am_shape, am_strides, batch).view(a_shape);
                     if (needs[1]) grads[1] = product_grad_b(dc, saved_am.get(), bm_shape, bm_strides, batch).view(b_shape);
                     return grads;
                   });
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (const autocast::Region region({&a, &b}); region) return region.out(matmul(region.in(a), region.in(b)));
  check_operands("matmul", a, b);
  LSF_CHECK(a.dim() >= 1 && b.dim() >= 1)
      << "matmul: both arguments need at least 1 dimension, got shapes " << a.shape() << " and "
      << b.shape();
  const int64_t ka = a.shape().back(), kb = b.dim() == 1 ? b.shape()[0] : b.shape()[b.dim() - 2];
  LSF_CHECK(ka == kb) << "matmul: shapes " << a.shape() << " and " << b.shape()
                      << " cannot be multiplied (" << ka << " != " << kb << ")";
  Tensor am, bm;
  {
    NoGradGuard no_grad;
    am = a.dim() == 1 ? a.unsqueeze(0) : a;   // a row vector [1, K]
    bm = b.dim() == 1 ? b.unsqueeze(1) : b;   // a column vector [K, 1]
  }
  // Broadcast the batch dims, aligned from the right as in NumPy.
  const Shape ba = batch_of(am), bb = batch_of(bm);
  const size_t nb = std::max(ba.size(), bb.size());
  Shape batch(nb);
  for (size_t i = 0; i < nb; ++i) {
    int64_t da = i < nb - ba.size() ? 1 : ba[i - (nb - ba.size())];
    int64_t db = i < nb - bb.size() ? 1 : bb[i - (nb - bb.size())];
    LSF_CHECK(da == db || da == 1 || db == 1)
        << "matmul: shapes " << a.shape() << " and " << b.shape()
        << " cannot be multiplied: batch dimensions do not broadcast (" << da << " vs " << db << ")";
    batch[i] = da == 1 ? db : da;
  }
  Shape out_shape = batch;
  if (a.dim() > 1) out_shape.push_back(am.size(-2));
  if (b.dim() > 1) out_shape.push_back(bm.size(-1));
  return product("matmul", a, b, am, bm, batch, out_shape);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (const autocast::Region region({&a, &b}); region) return region.out(bmm(region.in(a), region.in(b)));
  check_operands("bmm", a, b);
  LSF_CHECK(a.dim() == 3 && b.dim() == 3)
      << "bmm: expected 3-D tensors, got shapes " << a.shape() << " and " << b.shape();
  LSF_CHECK(a.shape()[0] == b.shape()[0])
      << "bmm: batch sizes of shapes " << a.shape() << " and " << b.shape() << " differ ("
      << a.shape()[0] << " != " << b.shape()[0] << ")";
  LSF_CHECK(a.shape()[2] == b.shape()[1])
      << "bmm: shapes " << a.shape() << " and " << b.shape() << " cannot be multiplied ("
      << a.shape()[2] << " != " << b.shape()[1] << ")";
  const Shape batch{a.shape()[0]};
  return product("bmm", a, b, a, b, batch, with_matrix(batch, a.shape()[1], b.shape()[2]));
}

namespace {

// x [*, K] as the matrix [rows, K] the fused kernel reads in place (unit column stride, one row
// stride), or undefined when its leading dims do not fold into one row index without a copy.
Tensor rows_view(const Tensor& x) {
  if (x.dim() < 2 || (x.size(-1) > 1 && x.stride(-1) != 1)) return Tensor();
  NoGradGuard no_grad;
  if (x.dim() == 2) return x.size(0) <= 1 || x.stride(0) >= x.size(1) ? x : Tensor();  // not an expanded row
  if (!x.is_contiguous()) return Tensor();
  Shape leading(x.shape().begin(), x.shape().end() - 1);
  return x.view({shape_numel(leading), x.size(-1)});
}

// The weight and bias gradients together (linear_weight_grad_kernel: one pass over dy instead
// of the GEMM and then sum_to) into grads[1], grads[2], for a row-major weight and an x and dy
// whose leading dims fold into rows; false (grads untouched) where the backend does not fuse them.
bool fused_weight_grad(TensorList& grads, const Tensor& x, const Tensor& dy, bool weight_row_major) {
  if (!weight_row_major || !linear_weight_grad_kernel.implemented(x.device().type)) return false;
  const Tensor x2 = rows_view(x), dy2 = rows_view(dy);  // [rows, K], [rows, N]
  if (!x2.defined() || !dy2.defined()) return false;
  Tensor dw = empty({dy2.size(1), x2.size(1)}, dy.options()), db = empty({dy2.size(1)}, dy.options());
  if (!linear_weight_grad_kernel(x.device(), dw, db, x2, dy2)) return false;
  grads[1] = dw;
  grads[2] = db;
  return true;
}

}  // namespace

namespace {

// linear's arguments: x [*, K], weight [N, K], bias [N] or undefined, on one device, one dtype.
void check_linear_args(const char* name, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_operands(name, x, weight);
  LSF_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1))
      << name << ": weight must be [N, K] with K = x's last dimension; got x of shape " << x.shape()
      << " and weight of shape " << weight.shape();
  if (!bias.defined()) return;
  check_same_device(name, {&x, &bias});
  check_same_dtype(name, {&x, &bias});
  LSF_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0))
      << name << ": bias must be [N] with N = weight's first dimension; got bias of shape " << bias.shape()
      << " and weight of shape " << weight.shape();
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (const autocast::Region region({&x, &weight, &bias}); region)
    return region.out(linear(region.in(x), region.in(weight), region.in(bias)));
  const char* name = "linear";
  check_linear_args(name, x, weight, bias);
  if (!bias.defined()) return matmul(x, weight.t());
  const Tensor x2 = rows_view(x);  // [rows, K]
  if (!x2.defined() || !linear_forward_kernel.implemented(x.device().type)) return add(matmul(x, weight.t()), bias);

  const int64_t rows = x2.size(0), K = x2.size(1), N = weight.size(0);
  count_multiply_adds("matmul", rows * N * K);  // counted as the product it is (ops/flops.h)
  Tensor w, b;
  {
    NoGradGuard no_grad;  // plumbing copies (if any), not graph nodes
    w = gemm_operand(weight);
    b = bias.contiguous();
  }
  Tensor y = empty({rows, N}, x.options());
  if (y.numel() > 0) linear_forward_kernel(x.device(), y, x2, w, b);
  Shape out_shape = x.shape();
  out_shape.back() = N;
  Tensor out;
  {
    NoGradGuard no_grad;
    out = y.view(out_shape);
  }
  if (!autograd::any_requires_grad({&x, &weight, &bias})) return out;
  // The composition's backward: matmul's node for x · weight.t() (the same batch folding, output
  // layouts and so the same GEMMs and bits) and add's for the bias, except that the weight and
  // bias gradients come from one pass over dy where the backend fuses them (fused_weight_grad).
  SavedTensor saved_x = weight.requires_grad() ? SavedTensor(x) : SavedTensor();
  SavedTensor saved_w = x.requires_grad() ? SavedTensor(weight) : SavedTensor();
  const Shape x_shape = x.shape(), bias_shape = bias.shape(), batch(x_shape.begin(), x_shape.end() - 2);
  const Strides x_strides = x.strides(), wt_strides = {weight.stride(1), weight.stride(0)};
  const int64_t M = x.size(-2);
  const bool weight_row_major = weight.is_contiguous();
  autograd::record(name, {x, weight, bias}, {out},
                   [=](const TensorList& g, const NeedsGrad& needs) -> TensorList {
                     Tensor dy = g[0].reshape(with_matrix(batch, M, N));  // [*, M, N]
                     TensorList grads(3);
                     // dx [*, M, K] = dy · W; dWᵀ [K, N] = Σ over the batch of xᵀ · dy, laid out as weight.t()
                     if (needs[0]) grads[0] = product_grad_a(dy, saved_w.get().t(), x_shape, x_strides, batch);
                     if (needs[1] && needs[2] && fused_weight_grad(grads, saved_x.get(), g[0], weight_row_major)) return grads;
                     if (needs[1]) grads[1] = product_grad_b(dy, saved_x.get(), {K, N}, wt_strides, batch).t();
                     if (needs[2]) grads[2] = sum_to(g[0], bias_shape);
                     return grads;
                   });
  return out;
}

namespace {

// The grouped forward of linears (linears_forward_kernel): every output as linear's, each layer's
// products counted; empty where the backend does not group these products.
TensorList grouped_forward(const Tensor& x, const TensorList& weights, const TensorList& biases) {
  if (!linears_forward_kernel.implemented(x.device().type)) return {};
  const Tensor x2 = rows_view(x);  // [rows, K]
  if (!x2.defined()) return {};
  NoGradGuard no_grad;  // plumbing; the caller records the node
  const int64_t rows = x2.size(0), K = x2.size(1);
  TensorList ys, ws, bs;
  for (size_t i = 0; i < weights.size(); ++i) {
    ys.push_back(empty({rows, weights[i].size(0)}, x.options()));
    ws.push_back(gemm_operand(weights[i]));
    bs.push_back(biases[i].defined() ? biases[i].contiguous() : Tensor());
  }
  if (rows == 0 || !linears_forward_kernel(x.device(), ys, x2, ws, bs)) return {};
  TensorList outs;
  for (size_t i = 0; i < weights.size(); ++i) {
    count_multiply_adds("matmul", rows * weights[i].size(0) * K);
    Shape out_shape = x.shape();
    out_shape.back() = weights[i].size(0);
    outs.push_back(ys[i].view(out_shape));
  }
  return outs;
}

}  // namespace

TensorList linears(const Tensor& x, const TensorList& weights, const TensorList& biases) {
  if (autocast_enabled()) {
    std::vector<const Tensor*> operands{&x};
    for (const Tensor& w : weights) operands.push_back(&w);
    for (const Tensor& b : biases) operands.push_back(&b);
    if (const autocast::Region region(operands); region) {
      TensorList ws, bs;
      for (const Tensor& w : weights) ws.push_back(region.in(w));
      for (const Tensor& b : biases) bs.push_back(region.in(b));
      TensorList outs = linears(region.in(x), ws, bs);
      for (Tensor& o : outs) o = region.out(o);
      return outs;
    }
  }
  const char* name = "linears";
  LSF_CHECK(!weights.empty() && biases.size() == weights.size())
      << name << ": expected one bias (or an undefined tensor) per weight and at least one weight, got "
      << weights.size() << " weights and " << biases.size() << " biases";
  LSF_CHECK(x.defined() && x.dim() >= 2) << name << ": x must be [*, rows, K] (at least 2-D), got "
                                         << (x.defined() ? "shape " : "an undefined tensor")
                                         << (x.defined() ? x.shape() : Shape{}) << " (use linear for a 1-D x)";
  for (size_t i = 0; i < weights.size(); ++i) check_linear_args("linear", x, weights[i], biases[i]);
  TensorList outs = grouped_forward(x, weights, biases);
  TensorList inputs{x};  // x, then each weight and its bias (when defined): the node's inputs
  std::vector<int64_t> bias_input(weights.size(), -1);
  {
    NoGradGuard no_grad;  // each output is linear's; one node below records them all
    for (size_t i = 0; i < weights.size(); ++i) {
      if (outs.size() < weights.size()) outs.push_back(linear(x, weights[i], biases[i]));
      inputs.push_back(weights[i]);
      if (biases[i].defined()) {
        bias_input[i] = int64_t(inputs.size());
        inputs.push_back(biases[i]);
      }
    }
  }
  if (!autograd::any_requires_grad(inputs)) return outs;
  // As linear's backward, per layer; x's gradient accumulates all the layers' products. Where
  // the backend groups the layers' products (linears_input_grad_kernel,
  // linears_weight_grad_kernel), the same results from one pass over x and its gradient.
  const bool weights_need_x = std::any_of(weights.begin(), weights.end(), [](const Tensor& w) { return w.requires_grad(); });
  SavedTensor saved_x = weights_need_x ? SavedTensor(x) : SavedTensor();
  std::vector<SavedTensor> saved_w;
  std::vector<bool> row_major;
  std::vector<Strides> wt_strides;  // the layout of each weight.t(), which its gradient takes
  for (const Tensor& w : weights) {
    saved_w.push_back(x.requires_grad() ? SavedTensor(w) : SavedTensor());
    row_major.push_back(w.is_contiguous());
    wt_strides.push_back({w.stride(1), w.stride(0)});
  }
  const Shape x_shape = x.shape(), batch(x_shape.begin(), x_shape.end() - 2);
  const Strides x_strides = x.strides();
  const int64_t M = x.size(-2), K = x.size(-1);
  autograd::record(name, inputs, outs, [=](const TensorList& g, const NeedsGrad& needs) -> TensorList {
    TensorList grads(needs.size());
    const size_t layers = g.size();
    if (needs[0]) {
      grads[0] = empty_in_layout(x_shape, x_strides, g[0].options());
      // dx [*, M, K] = Σᵢ dyᵢ · Wᵢ: the first layer's product overwrites, the others add onto it.
      bool grouped = false;
      if (linears_input_grad_kernel.implemented(grads[0].device().type)) {
        TensorList dys, ws;
        for (size_t i = 0; i < layers; ++i) {
          dys.push_back(rows_view(g[i]));
          ws.push_back(gemm_operand(saved_w[i].get()));
        }
        const Tensor dx2 = rows_view(grads[0]);
        grouped = dx2.defined() && dx2.size(0) > 0 &&
                  std::all_of(dys.begin(), dys.end(), [](const Tensor& t) { return t.defined(); }) &&
                  linears_input_grad_kernel(grads[0].device(), dx2, dys, ws);
      }
      for (size_t i = 0; i < layers && !grouped; ++i)
        gemm_into(grads[0], g[i].reshape(with_matrix(batch, M, g[i].size(-1))), saved_w[i].get(), batch,
                  i == 0 ? 0.0 : 1.0);
    }
    // Each layer's input indices: weight at wi[i], bias at bi[i] (−1: none).
    std::vector<int64_t> wi(layers);
    for (size_t i = 0, at = 1; i < layers; ++i) {
      wi[i] = int64_t(at);
      at += bias_input[i] >= 0 ? 2 : 1;
    }
    // The weight and bias gradients of all layers in one pass over x where every layer wants
    // its weight's and its bias's (if any), every weight is row-major and the backend groups them.
    bool grouped = linears_weight_grad_kernel.implemented(g[0].device().type);
    for (size_t i = 0; i < layers && grouped; ++i)
      grouped = needs[size_t(wi[i])] && (bias_input[i] < 0 || needs[size_t(bias_input[i])]) && row_major[i];
    if (grouped) {
      const Tensor x2 = rows_view(saved_x.get());
      TensorList dws, dbs, dys;
      for (size_t i = 0; i < layers; ++i) {
        dys.push_back(rows_view(g[i]));
        dws.push_back(empty({g[i].size(-1), K}, g[i].options()));
        dbs.push_back(bias_input[i] >= 0 ? empty({g[i].size(-1)}, g[i].options()) : Tensor());
        grouped = grouped && dys.back().defined();
      }
      grouped = grouped && x2.defined() && linears_weight_grad_kernel(x2.device(), dws, dbs, x2, dys);
      if (grouped) {
        for (size_t i = 0; i < layers; ++i) {
          grads[size_t(wi[i])] = dws[i];
          if (bias_input[i] >= 0) grads[size_t(bias_input[i])] = dbs[i];
        }
        return grads;
      }
    }
    for (size_t i = 0; i < layers; ++i) {
      const int64_t N = g[i].size(-1), bi = bias_input[i];
      Tensor dy = g[i].reshape(with_matrix(batch, M, N));  // [*, M, N]
      const bool need_w = needs[size_t(wi[i])], need_b = bi >= 0 && needs[size_t(bi)];
      TensorList wb(3);
      if (need_w && need_b && fused_weight_grad(wb, saved_x.get(), g[i], row_major[i])) {
        grads[size_t(wi[i])] = wb[1];
        grads[size_t(bi)] = wb[2];
        continue;
      }
      if (need_w) grads[size_t(wi[i])] = product_grad_b(dy, saved_x.get(), {K, N}, wt_strides[i], batch).t();
      if (need_b) grads[size_t(bi)] = sum_to(g[i], {N});
    }
    return grads;
  });
  return outs;
}

}  // namespace lsf
