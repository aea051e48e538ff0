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
// Blocks at least this large are cached after free: glibc serves them with fresh mmaps (above its
// mmap threshold) or gives their heap pages back (trimming) when they are freed, and every fresh
// page faults on first touch, which costs more than the kernels that fill them (with 1 MiB here
// instead, the quickstart spent 20 of its 50 s in the kernel; with 64 KiB, 0.5 of 34 s).
constexpr size_t kCacheMinBytes = size_t(1) << 16;
// Cached sizes round up to one of kClassesPerOctave size classes per power of two (at most
// 12.5% more than asked for): tensors whose sizes vary from step to step — packed sequences of
// a different number of real tokens in every batch — then reuse each other's blocks instead of
// each new size taking fresh pages (which cost more to fault in than the kernel that fills them).
constexpr size_t kClassesPerOctave = 8;
// A request with no cached block of its class takes one of up to this many classes above it
// (with 2, the quickstart's resident peak was 13% higher than with 4; its time the same).
constexpr size_t kReuseClasses = 4;
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
    if (size >= kCacheMinBytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      // The request's class, else a block of the next kReuseClasses classes (at most ~50% more):
      // sizes that drift from batch to batch then reuse what is cached instead of each class
      // keeping blocks of its own (which the process's resident memory would pay for).
      size_t cls = size;
      for (size_t tries = 0; tries <= kReuseClasses && p == nullptr; ++tries, cls = next_class(cls)) {
        auto it = cache_.find(cls);
        if (it == cache_.end() || it->second.empty()) continue;
        p = it->second.back();
        it->second.pop_back();
        cached_ -= cls;
        capacity_[p] = cls;
      }
      if (p == nullptr) {
        p = std::aligned_alloc(kCpuAlignment, size);
        LSF_CHECK(p != nullptr) << "out of CPU memory allocating " << nbytes << " bytes";
        capacity_[p] = size;
      }
    } else {
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
    if (block_size(nbytes) >= kCacheMinBytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = capacity_.find(p);
      const size_t cls = it != capacity_.end() ? it->second : block_size(nbytes);  // the block's own class
      if (it != capacity_.end()) capacity_.erase(it);
      if (cached_ + cls <= cache_limit_) {
        cache_[cls].push_back(p);
        cached_ += cls;
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
  // The class above cls (cls a class size ≥ kCacheMinBytes).
  static size_t next_class(size_t cls) { return block_size(cls + 1); }

  std::unordered_map<size_t, std::vector<void*>> cache_;  // free blocks by size class
  std::unordered_map<void*, size_t> capacity_;             // the class of every live cacheable block
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
