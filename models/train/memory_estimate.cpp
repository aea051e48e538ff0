// The memory estimate's arithmetic, its limits (train.memory_limit, MemAvailable, a GPU's memory)
// and the refusal message (models/train/memory_estimate.h).
#include "lsformer/models/train/memory_estimate.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "lsformer/engine/cuda_api.h"
#include "lsformer/engine/error.h"

namespace lsf::train {

double MemoryEstimate::total() const {
  double sum = 0;
  for (const MemoryPart& part : parts) sum += part.bytes;
  return sum;
}

MemoryEstimate MemoryEstimate::in(MemoryPlace place) const {
  MemoryEstimate e;
  for (const MemoryPart& part : parts)
    if (part.place == place) e.parts.push_back(part);
  return e;
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
  for (size_t i = 0; i < parts.size(); ++i) os << (i ? ", " : "") << parts[i].what << " " << format_bytes(parts[i].bytes);
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

MemoryLimits memory_limits(const RunConfig& config) {
  MemoryLimits limits;
  const MemoryLimit host{available_memory_bytes(), "this machine has available (MemAvailable)"};
  const bool set = config.train.memory_limit > 0;
  const MemoryLimit configured{double(config.train.memory_limit), "of 'train.memory_limit'"};
  const Device device(config.train.device);
  if (device.is_cuda() && device.index < cuda::device_count()) {
    const cuda::DeviceProperties p = cuda::device_properties(device.index);
    limits.separate = true;
    limits.device_name = "cuda:" + std::to_string(device.index);
    limits.device = set ? configured : MemoryLimit{double(p.total_memory), "of " + limits.device_name + " (" + p.name + ")"};
    limits.host = host;
    return limits;
  }
  limits.device = set ? configured : host;
  return limits;
}

namespace {

void check_fits(const MemoryEstimate& estimate, const MemoryLimit& limit, const std::string& where,
                const std::string& what) {
  if (estimate.empty() || limit.bytes <= 0) return;
  LSF_CHECK(estimate.total() <= limit.bytes)
      << "not enough " << where << (what.empty() ? "" : " for " + what) << ": the config needs an estimated "
      << estimate.describe() << ", more than the " << format_bytes(limit.bytes) << " " << limit.source
      << "; reduce the sizes above (or set 'train.memory_limit' in bytes if the estimate is wrong)";
}

}  // namespace

void check_memory_fits(const MemoryEstimate& estimate, const MemoryLimits& limits, const std::string& what) {
  if (!limits.separate) return check_fits(estimate, limits.device, "memory", what);
  check_fits(estimate.in(MemoryPlace::RunDevice), limits.device, "memory on " + limits.device_name, what);
  check_fits(estimate.in(MemoryPlace::Host), limits.host, "host memory", what);
}

void check_memory_fits(const MemoryEstimate& estimate, const RunConfig& config, const std::string& what) {
  if (estimate.empty()) return;
  check_memory_fits(estimate, memory_limits(config), what);
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
