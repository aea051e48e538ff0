// Memory scalars (see memory_usage.h).
#include "lsformer/models/train/memory_usage.h"

#include <fstream>
#include <sstream>

#include "lsformer/engine/cuda_api.h"
#include "lsformer/engine/storage.h"

namespace lsf::train {

bool process_rss(int64_t* current_bytes, int64_t* peak_bytes) {
  std::ifstream in("/proc/self/status");
  if (!in) return false;
  bool have_current = false, have_peak = false;
  for (std::string line; std::getline(in, line);) {
    // "VmRSS:\t   12345 kB"
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "VmRSS:") *current_bytes = kib * 1024, have_current = true;
    if (key == "VmHWM:") *peak_bytes = kib * 1024, have_peak = true;
  }
  return have_current && have_peak;
}

std::vector<std::pair<std::string, double>> memory_scalars() {
  std::vector<std::pair<std::string, double>> out;
  const MemoryStats cpu = memory_stats(kCPU);
  out.emplace_back("memory/cpu_current_bytes", double(cpu.current_bytes));
  out.emplace_back("memory/cpu_peak_bytes", double(cpu.peak_bytes));
  for (int i = 0; i < cuda::device_count(); ++i) {
    const MemoryStats s = cuda::memory_stats(i);
    out.emplace_back("memory/cuda" + std::to_string(i) + "_current_bytes", double(s.current_bytes));
    out.emplace_back("memory/cuda" + std::to_string(i) + "_peak_bytes", double(s.peak_bytes));
  }
  int64_t rss = 0, rss_peak = 0;
  if (process_rss(&rss, &rss_peak)) {
    out.emplace_back("memory/rss_bytes", double(rss));
    out.emplace_back("memory/rss_peak_bytes", double(rss_peak));
  }
  return out;
}

}  // namespace lsf::train
