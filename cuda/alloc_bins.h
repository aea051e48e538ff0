// The host-side logic of the CUDA caching allocator, free of CUDA so that a CPU test can check
// it (tests/test_cuda_alloc_bins.cpp): size classes, free lists and statistics.
//
// Size classes (round_size):
//   - every block is a multiple of 512 bytes (kMinBlock; also cudaMalloc's alignment), so a
//     request of 1..512 bytes takes 512 and 0 bytes still gets a distinct valid block;
//   - requests above 1 MiB (kSmallLimit) round up to a multiple of 2 MiB (kLargeGranularity),
//     the driver's own page size for large allocations, so nearby large sizes share one class
//     and the waste stays below 2 MiB per block.
// A freed block goes onto its class's free list and serves the next request of the same class
// without cudaFree/cudaMalloc (exact-class reuse, no splitting: training steps repeat the same
// sizes, so exact classes hit; splitting would trade that simplicity for less waste).
//
// Stream order: lsformer runs all work of a device on one stream (cuda/runtime.cuh), so a
// block freed on the host while kernels that use it are still queued can be handed to the
// next tensor at once — its kernels queue behind the old ones on the same stream.
//
// Statistics: current/peak count requested bytes of live blocks (as the CPU allocator does);
// reserved counts the rounded bytes held from the driver, live or cached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "lsformer/engine/storage.h"

namespace lsf::cuda::alloc {

constexpr size_t kMinBlock = 512;
constexpr size_t kSmallLimit = size_t(1) << 20;
constexpr size_t kLargeGranularity = size_t(2) << 20;

// The block size (size class) that serves a request of nbytes.
constexpr size_t round_size(size_t nbytes) {
  if (nbytes <= kSmallLimit) return nbytes <= kMinBlock ? kMinBlock : (nbytes + kMinBlock - 1) / kMinBlock * kMinBlock;
  return (nbytes + kLargeGranularity - 1) / kLargeGranularity * kLargeGranularity;
}

// One device's pool. raw_alloc returns nullptr when the driver is out of memory; the caller
// decides what to do then (the CUDA allocator synchronises, release_cached()s and retries).
class CachingPool {
 public:
  using RawAlloc = std::function<void*(size_t)>;
  using RawFree = std::function<void(void*)>;

  CachingPool(RawAlloc raw_alloc, RawFree raw_free) : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  // A block of round_size(nbytes) bytes: a cached one if its class has any, else a new one
  // from raw_alloc; nullptr when raw_alloc fails (statistics unchanged then).
  void* allocate(size_t nbytes) {
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    void* p = nullptr;
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      cached_ -= int64_t(size);
      ++reuses_;
    } else {
      p = raw_alloc_(size);
      if (p == nullptr) return nullptr;
      stats_.reserved_bytes += int64_t(size);
    }
    stats_.current_bytes += int64_t(nbytes);
    if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
    ++stats_.allocations;
    return p;
  }

  // Returns a block obtained from allocate(nbytes) to its class's free list.
  void deallocate(void* p, size_t nbytes) {
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    free_[size].push_back(p);
    cached_ += int64_t(size);
    stats_.current_bytes -= int64_t(nbytes);
  }

  // Frees every cached block with raw_free; returns the bytes given back. The caller makes
  // sure no queued work still uses them (the CUDA allocator synchronises the device first).
  int64_t release_cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t released = 0;
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) raw_free_(p);
      released += int64_t(size * blocks.size());
    }
    free_.clear();
    cached_ = 0;
    stats_.reserved_bytes -= released;
    return released;
  }

  MemoryStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_bytes = stats_.current_bytes;
  }
  int64_t cached_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }
  int64_t reuses() const {  // allocations served from the cache
    std::lock_guard<std::mutex> lock(mutex_);
    return reuses_;
  }

 private:
  RawAlloc raw_alloc_;
  RawFree raw_free_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;  // cached blocks by size class
  MemoryStats stats_;
  int64_t cached_ = 0;
  int64_t reuses_ = 0;
};

}  // namespace lsf::cuda::alloc
