// Memory in use, as TensorBoard scalars (`lsf train` logs them with every training log line):
// the allocators' live and peak bytes per device, and the process's resident set (RSS) and its
// peak, which also count what the allocators do not see (BLAS buffers, the caching allocator's
// reserve, code, the data in memory).
//
//   for (const auto& [tag, value] : memory_scalars()) tb.add_scalar(tag, value, step);
//
// Tags: memory/cpu_current_bytes, memory/cpu_peak_bytes (engine/storage.h's MemoryStats of the
// CPU allocator: bytes of live tensors and their high-water mark), memory/cuda<i>_current_bytes,
// memory/cuda<i>_peak_bytes for each usable CUDA device (engine/cuda_api.h), memory/rss_bytes and
// memory/rss_peak_bytes (VmRSS and VmHWM of /proc/self/status; left out where that file is
// unreadable, i.e. outside Linux).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lsf::train {

std::vector<std::pair<std::string, double>> memory_scalars();

// The resident set and its peak in bytes from /proc/self/status; false when unavailable.
bool process_rss(int64_t* current_bytes, int64_t* peak_bytes);

}  // namespace lsf::train
