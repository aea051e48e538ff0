// Storage: one reference-counted buffer that any number of tensor views share.
//
// CPU buffers are 64-byte aligned (one cache line, the widest SIMD load). Blocks of 64 KiB or
// more are kept for reuse after they are freed (up to 4 GiB, or LSF_CPU_CACHE_BYTES), because
// glibc serves such sizes from mmap or trims its heap after them, and fresh pages fault on
// first touch; empty_cpu_cache() returns them to the system. Such blocks are sized in 8 classes
// per power of two (cpu_block_size); a request takes a cached block of its class or of one of
// the four classes above it, so a tensor of a somewhat different size reuses a cached block. Each device type has
// one Allocator; the CUDA backend registers its own when built. Allocators report current and
// peak bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "lsformer/engine/device.h"
#include "lsformer/engine/dtype.h"

namespace lsf {

struct MemoryStats {
  int64_t current_bytes = 0;  // live buffers
  int64_t peak_bytes = 0;     // high-water mark since start or the last reset_peak()
  int64_t reserved_bytes = 0; // held from the system (≥ current for caching allocators)
  int64_t allocations = 0;    // number of allocate() calls
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes, Device device) = 0;
  virtual void deallocate(void* ptr, size_t nbytes, Device device) = 0;
  virtual MemoryStats stats(Device device) const = 0;
  virtual void reset_peak(Device device) = 0;
};

// The allocator for a device type; throws lsf::Error if that backend is not built.
Allocator& allocator_for(DeviceType type);
void register_allocator(DeviceType type, Allocator* allocator);
MemoryStats memory_stats(Device device = kCPU);
void reset_peak_memory(Device device = kCPU);
void empty_cpu_cache();
// The bytes the CPU allocator reserves for a request of nbytes (its size class).
size_t cpu_block_size(size_t nbytes);

class StorageImpl {
 public:
  StorageImpl(size_t nbytes, Device device);
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Bumped by every in-place write through any view. Autograd records it when it saves a
  // tensor and refuses to use the saved value if it changed (see engine/autograd.h).
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  // Whether every value in this buffer came from a 16-bit format (`low`: bf16 or f16), so that
  // it is exact there: recorded by the conversion that filled it (Tensor::to(kF32) of a bf16 or
  // f16 tensor, which autocast's roundings are) and forgotten by the next in-place write through
  // the Tensor API (the version moves). A hint for kernels with a faster 16-bit path (the CPU's
  // bf16 products, ops/cpu/gemm_bf16.h); they check the values themselves, since a write through
  // a raw pointer or a kernel's in-place accumulation does not move the version.
  void mark_values_exact_in(DType low) {
    exact_in_ = low;
    exact_version_ = version();
  }
  bool values_exact_in(DType low) const { return exact_in_ == low && exact_version_ == version(); }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::atomic<uint64_t> version_{0};
  DType exact_in_ = DType::F32;  // F32: no 16-bit format recorded
  uint64_t exact_version_ = 0;
};

using Storage = std::shared_ptr<StorageImpl>;

}  // namespace lsf
