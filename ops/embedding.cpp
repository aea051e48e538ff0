// embedding and one_hot: argument checks, the backward node, and the kernel calls.
//
// Every ids tensor is flattened to [n] (n = ids.numel()): the kernels see y / dy as [n, D].
// Backward saves only the flattened ids (not the weight): dweight[ids[i]] += dy[i].
#include "lsformer/ops/embedding.h"
#include "lsformer/ops/kernels/embedding.h"

#include <algorithm>

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/kernels/reduce.h"

namespace lsf {

LSF_DEFINE_KERNEL(embedding_forward_kernel, void(const Tensor& y, const Tensor& weight, const Tensor& ids));
LSF_DEFINE_KERNEL(embedding_backward_kernel, void(const Tensor& dweight, const Tensor& dy, const Tensor& ids, int64_t padding_idx));
LSF_DEFINE_KERNEL(one_hot_kernel, void(const Tensor& out, const Tensor& ids));

namespace {

using autograd::NeedsGrad;
using autograd::SavedTensor;

void check_ids(const char* op, const Tensor& ids) {
  LSF_CHECK(ids.dtype() == kI64 || ids.dtype() == kI32)
      << op << ": ids must be an i64 or i32 tensor, got " << ids.dtype() << " (shape "
      << ids.shape() << ")";
}

// ids as a contiguous [n] tensor (a view when it already is one).
Tensor flat(const Tensor& ids) {
  NoGradGuard no_grad;
  return ids.reshape({ids.numel()}).contiguous();
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids, std::optional<int64_t> padding_idx) {
  check_defined("embedding", {&weight, &ids});
  check_same_device("embedding", {&weight, &ids});
  LSF_CHECK(weight.dim() == 2) << "embedding: weight must be 2-D [num_embeddings, dim], got shape "
                               << weight.shape();
  LSF_CHECK(is_floating(weight.dtype()))
      << "embedding: weight must be floating-point, got " << weight.dtype() << " (shape "
      << weight.shape() << ")";
  check_ids("embedding", ids);
  const int64_t V = weight.shape()[0], D = weight.shape()[1];
  int64_t pad = -1;
  if (padding_idx) {
    LSF_CHECK(*padding_idx >= -V && *padding_idx < V)
        << "embedding: padding_idx " << *padding_idx << " is out of range for " << V
        << " embeddings (weight shape " << weight.shape() << ")";
    pad = *padding_idx < 0 ? *padding_idx + V : *padding_idx;
  }
  const Tensor flat_ids = flat(ids);
  const int64_t n = flat_ids.numel();
  Tensor y = empty({n, D}, weight.options());
  {
    NoGradGuard no_grad;  // the contiguous copy (if any) is plumbing; the node below is the op
    embedding_forward_kernel(weight.device(), y, weight.contiguous(), flat_ids);
  }
  Shape out_shape = ids.shape();
  out_shape.push_back(D);
  Tensor out = y.view(out_shape);
  if (autograd::any_requires_grad({&weight})) {
    SavedTensor saved_ids(flat_ids);
    // ids never need a gradient, so the node has one input: the weight.
    autograd::record("embedding", {weight}, {out},
                     [saved_ids, V, D, n, pad](const TensorList& g, const NeedsGrad&) -> TensorList {
                       Tensor dy = g[0].reshape({n, D}).contiguous();  // dy [n, D]
                       Tensor dweight = zeros({V, D}, dy.options());     // dweight [V, D]
                       embedding_backward_kernel(dy.device(), dweight, dy, saved_ids.get(), pad);
                       return {dweight};
                     });
  }
  return out;
}

Tensor one_hot(const Tensor& ids, int64_t num_classes) {
  check_defined("one_hot", {&ids});
  check_ids("one_hot", ids);
  LSF_CHECK(num_classes >= -1) << "one_hot: num_classes must be -1 (infer) or non-negative, got "
                               << num_classes;
  if (num_classes == -1) {
    LSF_CHECK(ids.numel() > 0) << "one_hot: cannot infer num_classes from an empty tensor (shape "
                               << ids.shape() << "); pass num_classes";
    num_classes = std::max<int64_t>(amax(ids).to(kI64).item<int64_t>() + 1, 0);
  }
  const Tensor flat_ids = flat(ids);
  Shape out_shape = ids.shape();
  out_shape.push_back(num_classes);
  Tensor out = zeros({flat_ids.numel(), num_classes}, ids.options().dtype(kI64));
  one_hot_kernel(ids.device(), out, flat_ids);
  return out.view(out_shape);
}

}  // namespace lsf
