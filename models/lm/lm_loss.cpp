// The §3.6 criterion (see lm_loss.h): one nll_loss with Sum reduction over the flattened
// positions, divided by B·M.
#include "lsformer/models/lm/lm_loss.h"

#include <cmath>

#include "lsformer/engine/error.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/loss.h"

namespace lsf::lm {

Tensor lm_loss(const Tensor& log_probs, const Tensor& targets, int64_t pad_index) {
  LSF_CHECK(log_probs.defined() && targets.defined()) << "lm_loss: log_probs and targets must be defined";
  LSF_CHECK(log_probs.dim() == 3) << "lm_loss: log_probs must be [B, M, V], got shape " << log_probs.shape();
  LSF_CHECK(targets.dim() == 2 && targets.size(0) == log_probs.size(0) && targets.size(1) == log_probs.size(1))
      << "lm_loss: targets must be [B, M] = [" << log_probs.size(0) << ", " << log_probs.size(1) << "], got shape "
      << targets.shape();
  const int64_t positions = targets.size(0) * targets.size(1), V = log_probs.size(2);
  LSF_CHECK(positions >= 1) << "lm_loss: no positions (targets shape " << targets.shape() << ")";
  Tensor total = nll_loss(log_probs.reshape({positions, V}), targets.reshape({positions}),
                          {.ignore_index = pad_index, .reduction = Reduction::Sum});
  return mul(total, 1.0 / double(positions));
}

double bits_per_character(double nats) { return nats / std::log(2.0); }

}  // namespace lsf::lm
