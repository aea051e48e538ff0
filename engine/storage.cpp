#include "engine/storage.h"

#include <cstdlib>
#include <mutex>

#include "engine/error.h"

namespace lsf {
namespace {

constexpr size_t kCpuAlignment = 64;

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device) override {
    // aligned_alloc needs a size that is a multiple of the alignment; zero-byte tensors still
    // get a distinct, valid pointer.
    size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    if (rounded == 0) rounded = kCpuAlignment;
    void* p = std::aligned_alloc(kCpuAlignment, rounded);
    LSF_CHECK(p != nullptr) << "out of CPU memory allocating " << nbytes << " bytes";
    int64_t now = current_.fetch_add(int64_t(nbytes)) + int64_t(nbytes);
    allocations_.fetch_add(1);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return p;
  }
  void deallocate(void* p, size_t nbytes, Device) override {
    std::free(p);
    current_.fetch_sub(int64_t(nbytes));
  }
  MemoryStats stats(Device) const override {
    MemoryStats s;
    s.current_bytes = current_.load();
    s.peak_bytes = peak_.load();
    s.reserved_bytes = s.current_bytes;  // no caching on the CPU
    s.allocations = allocations_.load();
    return s;
  }
  void reset_peak(Device) override { peak_.store(current_.load()); }

 private:
  std::atomic<int64_t> current_{0}, peak_{0}, allocations_{0};
};

struct AllocatorTable {
  Allocator* table[kNumDeviceTypes] = {};
};
AllocatorTable& allocators() {
  static CpuAllocator cpu;  // never destroyed before tensors that outlive main's statics
  static AllocatorTable t = [] {
    AllocatorTable a;
    a.table[int(DeviceType::CPU)] = &cpu;
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

StorageImpl::StorageImpl(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = allocator_for(device.type).allocate(nbytes, device);
}

StorageImpl::~StorageImpl() { allocator_for(device_.type).deallocate(data_, nbytes_, device_); }

}  // namespace lsf
