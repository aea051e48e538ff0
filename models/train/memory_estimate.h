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
// kernel's MemAvailable (/proc/meminfo), or on a GPU the device's memory for the model's parts
// (memory_limits below); without either (not Linux) nothing is refused.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lsformer/models/train/config.h"

namespace lsf::train {

// What the memory is for: a training run (parameters, gradients, optimizer state, a training
// batch's activations, all splits) or an evaluation (parameters and one split, no graph).
enum class MemoryUse { Train, Eval };

// Where a part lives: on the run's device (the model's parameters, gradients and optimizer
// state, the activations, the char-LM's memory: host memory on a CPU run, the GPU's on a CUDA
// run), or in host memory whatever the device (datasets, corpora, the loader's image batches).
enum class MemoryPlace { RunDevice, Host };

struct MemoryPart {
  std::string what;
  double bytes = 0;
  MemoryPlace place = MemoryPlace::RunDevice;
};

struct MemoryEstimate {
  std::vector<MemoryPart> parts;  // in the order shown
  void add(std::string what, double bytes, MemoryPlace place = MemoryPlace::RunDevice) {
    parts.push_back({std::move(what), bytes, place});
  }
  double total() const;
  bool empty() const { return parts.empty(); }
  // The parts that live in one place, in order.
  MemoryEstimate in(MemoryPlace place) const;
  // "1.2 GiB: parameters 350 KiB, gradients 350 KiB, ..."
  std::string describe() const;
};

// "12.0 MiB", "3.4 TiB", "1.2e+05 TiB" (bytes may be astronomically large).
std::string format_bytes(double bytes);

// The kernel's MemAvailable in bytes; 0 when it cannot be read (not Linux).
double available_memory_bytes();

// A number of bytes a run may use (0: unknown, nothing is refused) and how a refusal names it
// ("the 976.6 KiB of 'train.memory_limit'", "the 79.1 GiB of cuda:0 (NVIDIA H100 80GB HBM3)").
struct MemoryLimit {
  double bytes = 0;
  std::string source;  // completes "more than <bytes> <source>": "of 'train.memory_limit'", ...
};

// The limits of a run. A CPU run has one memory: every part against `device` (train.memory_limit
// when > 0, else MemAvailable), `separate` false. So has a CUDA run that this process cannot
// start (no such device: `lsf info --model` describing a GPU config on a laptop; `lsf train`
// refuses the device itself). A CUDA run on a device this process has keeps the run device's
// parts on the GPU, against train.memory_limit when > 0, else the GPU's memory, and the host's
// parts against MemAvailable.
struct MemoryLimits {
  MemoryLimit device;  // the run device's parts (all parts when !separate)
  MemoryLimit host;    // the host's parts, when separate
  bool separate = false;
  std::string device_name;  // "cuda:0" when separate
};
MemoryLimits memory_limits(const RunConfig& config);

// Throws lsf::Error "not enough memory for <what>: ..." (no "for" when `what` is empty; "not
// enough memory on cuda:0 ..." or "not enough host memory ..." when the limits are separate)
// with the breakdown of the parts that do not fit and the limit (and how to raise it); nothing
// for an empty estimate or an unknown limit.
void check_memory_fits(const MemoryEstimate& estimate, const MemoryLimits& limits, const std::string& what);
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
