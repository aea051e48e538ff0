// How much memory a run needs, estimated from its config before anything is allocated, and the
// refusal of what cannot fit (issue #15: `model.layers = 1e6` or `data.generate.train = 1e12`
// must be a fast error that names the sizes, never a machine swapping or a process killed).
//
//   MemoryEstimate e = task->estimate_memory(MemoryUse::Train);
//   check_memory_fits(e, config, "");   // lsf::Error "not enough memory: ..." with the breakdown
//
// An estimate is a list of named parts in bytes (parameters, gradients, optimizer state,
// activations of one training batch, dataset, ...), kept in doubles so that absurd configs
// (1e12 examples × 2000 tokens) neither overflow nor wrap. Each family computes its own from
// the config alone (models/train/*_task.cpp); the numbers aim at the right order of magnitude
// (within about 2× of the measured peak; tests/test_memory_estimate.cpp measures the
// quickstart), not at the byte. The limit is train.memory_limit bytes when set, else the
// kernel's MemAvailable (/proc/meminfo); without either (not Linux) nothing is refused.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lsformer/models/train/config.h"

namespace lsf::train {

// What the memory is for: a training run (parameters, gradients, optimizer state, a training
// batch's activations, all splits) or an evaluation (parameters and one split, no graph).
enum class MemoryUse { Train, Eval };

struct MemoryEstimate {
  std::vector<std::pair<std::string, double>> parts;  // (what, bytes), in the order shown
  void add(std::string what, double bytes) { parts.emplace_back(std::move(what), bytes); }
  double total() const;
  bool empty() const { return parts.empty(); }
  // "1.2 GiB: parameters 350 KiB, gradients 350 KiB, ..."
  std::string describe() const;
};

// "12.0 MiB", "3.4 TiB", "1.2e+05 TiB" (bytes may be astronomically large).
std::string format_bytes(double bytes);

// The kernel's MemAvailable in bytes; 0 when it cannot be read (not Linux).
double available_memory_bytes();

// The bytes a run may use: train.memory_limit when > 0, else available_memory_bytes().
double memory_limit_bytes(const RunConfig& config);

// Throws lsf::Error "not enough memory for <what>: ..." (no "for" when `what` is empty) with the estimate's breakdown and the limit (and how to raise it)
// when the estimate exceeds the limit; nothing for an empty estimate or an unknown limit.
void check_memory_fits(const MemoryEstimate& estimate, const RunConfig& config, const std::string& what);

// Shared pieces of the transformer families' estimates.
// Parameters of `layers` pre-LN transformer blocks of width d and FFN width ffn: Q, K, V, O
// (4d² + 4d), the FFN (2·d·ffn + ffn + d), two LayerNorms (4d), plus `extra_per_layer`
// (attention-specific projections).
double transformer_block_parameters(double d, double ffn, double layers, double extra_per_layer);
// Bytes of the tensors autograd keeps for one training batch of `tokens` positions (batch ×
// length) through `layers` such blocks, float32: per position and layer about 12·d (norms,
// Q/K/V, attention output, projections, residuals) + 3·ffn (FFN hidden, activation, its
// derivative's input) + 3·heads·span (scores, probabilities, and the dropout mask / softmax
// backward's copy), where span is how many keys each query sees.
double transformer_activation_bytes(double tokens, double d, double ffn, double heads, double span, double layers);
// Parameters, gradients and the optimizer's state (AdamW / Adam: two moments; SGD: one
// momentum buffer), float32.
void add_parameter_parts(MemoryEstimate& e, double parameters, MemoryUse use, const RunConfig& config);

}  // namespace lsf::train
