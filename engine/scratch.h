// CpuScratch<T>: a kernel's workspace (packed operands, partial sums) for the length of one
// call, taken from the CPU allocator (engine/storage.h) and given back when it goes out of scope.
//
// Why not a thread-local std::vector kept between calls (what the GEMM kernels used before):
// such a buffer stays at its largest size for the life of the thread, one per thread that ever
// ran the kernel, where neither lsf::memory_stats() nor empty_cpu_cache() can see it; a product
// of a 100 MB operand left 100 MB behind, invisibly. From the allocator, the workspace counts in
// the current and peak bytes while the call runs, and blocks of 64 KiB or more go back to the
// allocator's cache afterwards, so the next call reuses the same pages (no zeroing, no page
// faults: what a fresh std::vector per call cost) and empty_cpu_cache() returns them.
// The contents start uninitialised.
//
//   CpuScratch<float> partial(size_t(parts) * n);   // partial.data(): parts · n floats
//
// ScratchVector<T>: a std::vector whose buffer comes from the same allocator, for workspaces
// that want a vector's conveniences (zero-initialised, sized per call, indexed). The kernels'
// per-thread scratch inside OpenMP regions is made of these, so it is counted and cached like
// CpuScratch, and an allocation failure there raises the allocator's lsf::Error, which the
// region carries to the caller (engine/region_errors.h).
#pragma once

#include <cstddef>
#include <vector>

#include "lsformer/engine/storage.h"

namespace lsf {

template <typename T>
class CpuScratch {
 public:
  explicit CpuScratch(size_t count) : bytes_(count * sizeof(T)) {
    if (bytes_ > 0) data_ = static_cast<T*>(allocator_for(DeviceType::CPU).allocate(bytes_, kCPU));
  }
  ~CpuScratch() {
    if (data_ != nullptr) allocator_for(DeviceType::CPU).deallocate(data_, bytes_, kCPU);
  }
  CpuScratch(const CpuScratch&) = delete;
  CpuScratch& operator=(const CpuScratch&) = delete;

  T* data() const { return data_; }

 private:
  size_t bytes_;
  T* data_ = nullptr;
};

// A standard allocator (for std::vector and friends) over the CPU allocator.
template <typename T>
struct CpuScratchAllocator {
  using value_type = T;
  CpuScratchAllocator() = default;
  template <typename U>
  CpuScratchAllocator(const CpuScratchAllocator<U>&) noexcept {}
  T* allocate(size_t count) {
    return static_cast<T*>(allocator_for(DeviceType::CPU).allocate(count * sizeof(T), kCPU));
  }
  void deallocate(T* p, size_t count) noexcept {
    allocator_for(DeviceType::CPU).deallocate(p, count * sizeof(T), kCPU);
  }
  template <typename U>
  bool operator==(const CpuScratchAllocator<U>&) const noexcept {
    return true;
  }
};

template <typename T>
using ScratchVector = std::vector<T, CpuScratchAllocator<T>>;

}  // namespace lsf
