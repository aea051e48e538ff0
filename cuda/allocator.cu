// The CUDA caching allocator: one CachingPool (cuda/alloc_bins.h: size classes, free lists,
// statistics) per device over cudaMalloc/cudaFree, registered as the allocator of
// DeviceType::CUDA. Registration stores a pointer and nothing else: a machine without a GPU
// loads this library without a CUDA call.
//
// Out of memory: the pool's cached blocks go back to the driver (after a device synchronise,
// since queued kernels may still use them) and the allocation is retried once; a second
// failure throws lsf::Error with the request, the block size and the statistics.
#include <array>
#include <cstdio>
#include <memory>
#include <mutex>

#include "lsformer/cuda/alloc_bins.h"
#include "lsformer/cuda/allocator.cuh"
#include "lsformer/cuda/runtime.cuh"
#include "lsformer/engine/storage.h"

namespace lsf::cuda {
namespace {

constexpr int kMaxDevices = 64;

void* raw_malloc(size_t size) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, size);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky, but clear it so the next check starts clean
    return nullptr;
  }
  LSF_CUDA_CHECK(err);
  return p;
}

void raw_free(void* p) { LSF_CUDA_CHECK(cudaFree(p)); }

class CudaAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    alloc::CachingPool& pool = pool_for(device);
    DeviceGuard guard(device.index);
    if (void* p = pool.allocate(nbytes)) return p;
    LSF_CUDA_CHECK(cudaDeviceSynchronize());
    const int64_t released = pool.release_cached();
    void* p = pool.allocate(nbytes);
    if (p != nullptr) return p;
    const MemoryStats s = pool.stats();
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();
    char b[7][32];
    LSF_CHECK(p != nullptr) << "CUDA out of memory on " << device << " allocating " << nbytes << " bytes ("
               << format_bytes(double(nbytes), b[0]) << ", block of "
               << format_bytes(double(alloc::round_size(nbytes)), b[1]) << "); lsformer holds "
               << format_bytes(double(s.current_bytes), b[2]) << " in tensors (peak "
               << format_bytes(double(s.peak_bytes), b[3]) << "), reserved "
               << format_bytes(double(s.reserved_bytes), b[4]) << " after freeing "
               << format_bytes(double(released), b[5]) << " of cached blocks; the device has "
               << format_bytes(double(free_bytes), b[6]) << " free of " << total_bytes << " bytes";
    return p;
  }

  void deallocate(void* p, size_t nbytes, Device device) override {
    // No CUDA call: the block waits in the cache (safe in static destruction, too).
    pool_for(device).deallocate(p, nbytes);
  }

  MemoryStats stats(Device device) const override {
    const alloc::CachingPool* pool = existing_pool(device);
    return pool ? pool->stats() : MemoryStats{};
  }

  void reset_peak(Device device) override {
    if (alloc::CachingPool* pool = existing_pool(device)) pool->reset_peak();
  }

  void release_all() {
    for (int d = 0; d < kMaxDevices; ++d) {
      alloc::CachingPool* pool = existing_pool(Device(DeviceType::CUDA, d));
      if (pool == nullptr) continue;
      DeviceGuard guard(d);
      LSF_CUDA_CHECK(cudaDeviceSynchronize());
      pool->release_cached();
    }
  }

 private:
  alloc::CachingPool& pool_for(Device device) {
    LSF_CHECK(device.is_cuda() && device.index >= 0 && device.index < cuda_device_count())
        << "CUDA allocator: no device " << device << " (" << cuda_device_count()
        << " usable CUDA devices)";
    std::lock_guard<std::mutex> lock(mutex_);
    auto& pool = pools_[device.index];
    if (!pool) pool = std::make_unique<alloc::CachingPool>(raw_malloc, raw_free);
    return *pool;
  }
  alloc::CachingPool* existing_pool(Device device) const {
    if (device.index < 0 || device.index >= kMaxDevices) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    return pools_[device.index].get();
  }

  mutable std::mutex mutex_;
  std::array<std::unique_ptr<alloc::CachingPool>, kMaxDevices> pools_;
};

// Never destroyed: tensors held by other statics may be freed after this file's statics.
CudaAllocator& cuda_allocator() {
  static CudaAllocator* a = new CudaAllocator();
  return *a;
}

[[maybe_unused]] const bool registered = (register_allocator(DeviceType::CUDA, &cuda_allocator()), true);

}  // namespace

void release_cached_blocks() { cuda_allocator().release_all(); }

const char* format_bytes(double bytes, char (&buffer)[32]) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  std::snprintf(buffer, sizeof buffer, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buffer;
}

}  // namespace lsf::cuda
