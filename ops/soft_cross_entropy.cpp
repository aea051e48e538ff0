// soft_cross_entropy composed of differentiable ops (ops/soft_cross_entropy.h).
#include "lsformer/ops/soft_cross_entropy.h"

#include "lsformer/engine/error.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/softmax.h"
#include "lsformer/ops/unary.h"

namespace lsf {

Tensor soft_cross_entropy(const Tensor& logits, const Tensor& target) {
  LSF_CHECK(logits.defined() && target.defined()) << "soft_cross_entropy: undefined input";
  LSF_CHECK(logits.dim() == 2 && target.shape() == logits.shape())
      << "soft_cross_entropy: logits and target must both be [B, K], got " << logits.shape() << " and "
      << target.shape();
  LSF_CHECK(logits.dtype() == target.dtype())
      << "soft_cross_entropy: logits and target dtypes differ (" << logits.dtype() << " and " << target.dtype() << ")";
  LSF_CHECK(logits.device() == target.device()) << "soft_cross_entropy: logits and target are on different devices";
  const Tensor per_sample = neg(sum(mul(target, log_softmax(logits, /*dim=*/-1)), {-1}));  // [B]
  return mean(per_sample);
}

}  // namespace lsf
