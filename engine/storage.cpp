// Storage: reference-counted buffers on a device with a version counter (bumped by in-place
// writes, checked by autograd), and the CPU allocator with its cache of large blocks.
#include "lsformer/engine/storage.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "lsformer/engine/error.h"
#include "lsformer/engine/profiler.h"

namespace lsf {
namespace {

constexpr size_t kCpuAlignment = 64;
// Blocks at least this large are cached after free: glibc serves them with fresh mmaps whose
// first touch page-faults every page, which costs more than the kernels that fill them.
constexpr size_t kCacheMinBytes = size_t(1) << 20;
// Cached sizes round up to one of kClassesPerOctave size classes per power of two (at most
// 12.5% more than asked for): tensors whose sizes vary from step to step — packed sequences of
// a different number of real tokens in every batch — then reuse each other's blocks instead of
// each new size taking fresh pages (which cost more to fault in than the kernel that fills them).
constexpr size_t kClassesPerOctave = 8;
constexpr size_t kDefaultCacheLimit = size_t(4) << 30;  // LSF_CPU_CACHE_BYTES overrides

class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() {
    if (const char* env = std::getenv("LSF_CPU_CACHE_BYTES")) cache_limit_ = std::strtoull(env, nullptr, 10);
  }
  void* allocate(size_t nbytes, Device) override {
    profiler::OpScope timed("cpu_allocate");
    const size_t size = block_size(nbytes);
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = cache_.find(size);
      if (it != cache_.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        cached_ -= size;
      }
    }
    if (p == nullptr) {
      p = std::aligned_alloc(kCpuAlignment, size);
      LSF_CHECK(p != nullptr) << "out of CPU memory allocating " << nbytes << " bytes";
    }
    int64_t now = current_.fetch_add(int64_t(nbytes)) + int64_t(nbytes);
    allocations_.fetch_add(1);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return p;
  }
  void deallocate(void* p, size_t nbytes, Device) override {
    current_.fetch_sub(int64_t(nbytes));
    const size_t size = block_size(nbytes);
    if (size >= kCacheMinBytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + size <= cache_limit_) {
        cache_[size].push_back(p);
        cached_ += size;
        return;
      }
    }
    std::free(p);
  }
  MemoryStats stats(Device) const override {
    MemoryStats s;
    s.current_bytes = current_.load();
    s.peak_bytes = peak_.load();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      s.reserved_bytes = s.current_bytes + int64_t(cached_);
    }
    s.allocations = allocations_.load();
    return s;
  }
  void reset_peak(Device) override { peak_.store(current_.load()); }
  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : cache_)
      for (void* p : blocks) std::free(p);
    cache_.clear();
    cached_ = 0;
  }

 private:
  // aligned_alloc needs a multiple of the alignment; zero-byte tensors still get a distinct,
  // valid pointer; cacheable blocks round up to their size class, so that nearby sizes share a bin.
 public:
  static size_t block_size(size_t nbytes) {
    size_t size = std::max<size_t>((nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment, kCpuAlignment);
    if (size >= kCacheMinBytes) {
      const size_t octave = std::bit_floor(size);  // 2^p ≤ size < 2^(p+1)
      const size_t step = octave / kClassesPerOctave;
      size = (size + step - 1) / step * step;
    }
    return size;
  }

 private:

  std::atomic<int64_t> current_{0}, peak_{0}, allocations_{0};
  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> cache_;  // free blocks by size
  size_t cached_ = 0;
  size_t cache_limit_ = kDefaultCacheLimit;
};

CpuAllocator& cpu_allocator() {
  static CpuAllocator* cpu = new CpuAllocator();  // never destroyed: tensors may outlive statics
  return *cpu;
}

struct AllocatorTable {
  Allocator* table[kNumDeviceTypes] = {};
};
AllocatorTable& allocators() {
  static AllocatorTable t = [] {
    AllocatorTable a;
    a.table[int(DeviceType::CPU)] = &cpu_allocator();
    return a;
  }();
  return t;
}

}  // namespace

Allocator& allocator_for(DeviceType type) {
  Allocator* a = allocators().table[int(type)];
  LSF_CHECK(a != nullptr) << "no allocator for device type '" << device_type_name(type)
                          << "': this build of lsformer has no " << device_type_name(type)
                          << " backend";
  return *a;
}

void register_allocator(DeviceType type, Allocator* allocator) {
  allocators().table[int(type)] = allocator;
}

MemoryStats memory_stats(Device device) { return allocator_for(device.type).stats(device); }
void reset_peak_memory(Device device) { allocator_for(device.type).reset_peak(device); }
void empty_cpu_cache() { cpu_allocator().empty_cache(); }
size_t cpu_block_size(size_t nbytes) { return CpuAllocator::block_size(nbytes); }

StorageImpl::StorageImpl(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = allocator_for(device.type).allocate(nbytes, device);
}

StorageImpl::~StorageImpl() { allocator_for(device_.type).deallocate(data_, nbytes_, device_); }

}  // namespace lsf
