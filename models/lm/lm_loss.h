// The char-LM training criterion (transformer-ls.md §3.6): the negative log-likelihood summed
// over the targets that are not padding, divided by ALL B·M positions (padded ones included),
// in nats; bits per character = that / ln 2.
//
//   Tensor lp = model.forward(tokens, memory);          // [B, M, V]
//   Tensor loss = lm::lm_loss(lp, targets, pad_index);  // 0-d, nats per position
//   double bpc = lm::bits_per_character(loss.item<double>());
//
// (The official task gives each block's last position a pad target; the divisor stays B·M.)
#pragma once

#include <cstdint>

#include "lsformer/engine/tensor.h"

namespace lsf::lm {

// log_probs [B, M, V] (float), targets [B, M] (i64/i32, in [0, V) or pad_index) → 0-d loss.
Tensor lm_loss(const Tensor& log_probs, const Tensor& targets, int64_t pad_index);

// nats → bits.
double bits_per_character(double nats);

}  // namespace lsf::lm
