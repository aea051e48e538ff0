// weight_standardize: per-filter mean and biased variance over all but the first dim.
#include "lsformer/ops/weight_standardization.h"

#include <vector>

#include "lsformer/ops/binary.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/unary.h"

namespace lsf {

Tensor weight_standardize(const Tensor& weight, double eps) {
  check_defined("weight_standardize", {&weight});
  LSF_CHECK(weight.dtype() == kF32 || weight.dtype() == kF64)
      << "weight_standardize: expected an f32 or f64 kernel, got " << weight.dtype() << " of shape " << weight.shape();
  LSF_CHECK(weight.dim() >= 2 && weight.numel() >= 2 * weight.size(0))
      << "weight_standardize: expected a kernel [O, *] with at least 2 taps per filter, got shape " << weight.shape();
  LSF_CHECK(eps >= 0.0) << "weight_standardize: eps must be non-negative, got " << eps;
  std::vector<int64_t> taps;
  for (int64_t d = 1; d < weight.dim(); ++d) taps.push_back(d);
  Tensor centred = sub(weight, mean(weight, taps, /*keepdim=*/true));
  Tensor variance = mean(mul(centred, centred), taps, /*keepdim=*/true);  // biased
  return mul(centred, rsqrt(add(variance, eps)));
}

}  // namespace lsf
