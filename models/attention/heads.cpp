// The head layout and the global-token update shared by the attention modules (see heads.h).
#include "lsformer/models/attention/heads.h"

#include <limits>

#include "lsformer/engine/error.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/index.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/shape.h"
#include "lsformer/ops/softmax.h"

namespace lsf::nn {

Tensor split_heads(const Tensor& x, int64_t heads) {
  LSF_CHECK(x.dim() == 3 && heads >= 1 && x.size(2) % heads == 0)
      << "split_heads: expected [B, n, h·e] with h = " << heads << " dividing the last dim, got shape " << x.shape();
  return x.reshape({x.size(0), x.size(1), heads, x.size(2) / heads}).permute({0, 2, 1, 3});
}

Tensor merge_heads(const Tensor& x) {
  LSF_CHECK(x.dim() == 4) << "merge_heads: expected [B, h, n, e], got shape " << x.shape();
  return x.permute({0, 2, 1, 3}).reshape({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

Tensor global_token_update(const Tensor& qg, const Tensor& kg, const Tensor& vg, const Tensor& context,
                           const Tensor& key_mask) {
  const int64_t B = context.size(0), n = context.size(2);
  Tensor self_logit = sum(mul(qg, kg), {3}, /*keepdim=*/true);  // [B, h, 1, 1]
  Tensor ctx_logits = matmul(qg, context.transpose(2, 3));       // [B, h, 1, n]
  if (key_mask.defined())
    ctx_logits = masked_fill(ctx_logits, eq(key_mask.to(context.dtype()), 0.0).view({B, 1, 1, n}),
                             -std::numeric_limits<double>::infinity());
  Tensor p = softmax(cat({self_logit, ctx_logits}, 3), 3);      // [B, h, 1, 1 + n]
  return add(mul(p.narrow(3, 0, 1), vg), matmul(p.narrow(3, 1, n), context));
}

}  // namespace lsf::nn
