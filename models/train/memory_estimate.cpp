// The memory estimate's arithmetic, its limit (train.memory_limit or MemAvailable) and the
// refusal message (models/train/memory_estimate.h).
#include "lsformer/models/train/memory_estimate.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "lsformer/engine/error.h"

namespace lsf::train {

double MemoryEstimate::total() const {
  double sum = 0;
  for (const auto& [what, bytes] : parts) sum += bytes;
  return sum;
}

std::string format_bytes(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024.0) {
    bytes /= 1024.0;
    ++u;
  }
  char text[64];
  if (bytes >= 1e4) std::snprintf(text, sizeof text, "%.1e %s", bytes, units[u]);  // far beyond TiB
  else std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

std::string MemoryEstimate::describe() const {
  std::ostringstream os;
  os << format_bytes(total()) << " (";
  for (size_t i = 0; i < parts.size(); ++i) os << (i ? ", " : "") << parts[i].first << " " << format_bytes(parts[i].second);
  os << ")";
  return os.str();
}

double available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    double kib = 0;
    std::string unit;
    in >> kib >> unit;
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return 0;
}

double memory_limit_bytes(const RunConfig& config) {
  return config.train.memory_limit > 0 ? config.train.memory_limit : available_memory_bytes();
}

void check_memory_fits(const MemoryEstimate& estimate, const RunConfig& config, const std::string& what) {
  if (estimate.empty()) return;
  const double limit = memory_limit_bytes(config);
  if (limit <= 0) return;
  const double total = estimate.total();
  LSF_CHECK(total <= limit) << "not enough memory" << (what.empty() ? "" : " for " + what) << ": the config needs an estimated " << estimate.describe() << ", more than the "
                            << format_bytes(limit)
                            << (config.train.memory_limit > 0 ? " of 'train.memory_limit'"
                                                              : " this machine has available (MemAvailable)")
                            << "; reduce the sizes above (or set 'train.memory_limit' in bytes if the estimate is wrong)";
}

double transformer_block_parameters(double d, double ffn, double layers, double extra_per_layer) {
  return layers * (4 * d * d + 4 * d + 2 * d * ffn + ffn + d + 4 * d + extra_per_layer);
}

double transformer_activation_bytes(double tokens, double d, double ffn, double heads, double span, double layers) {
  return 4.0 * tokens * layers * (12 * d + 3 * ffn + 3 * heads * span);
}

void add_parameter_parts(MemoryEstimate& e, double parameters, MemoryUse use, const RunConfig& config) {
  e.add("parameters", 4 * parameters);
  if (use == MemoryUse::Eval) return;
  e.add("gradients", 4 * parameters);
  (void)config;  // AdamW and Adam (the only optimizers) keep two moments
  e.add("optimizer state", 8 * parameters);
}

}  // namespace lsf::train
