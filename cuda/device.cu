// Device properties, synchronisation and the cache switch behind engine/cuda_api.h. The
// backend is installed at load time by storing a pointer: no CUDA call happens then.
#include "lsformer/cuda/allocator.cuh"
#include "lsformer/cuda/runtime.cuh"
#include "lsformer/engine/cuda_api.h"
#include "lsformer/engine/device.h"

namespace lsf::cuda {
namespace {

DeviceProperties properties(int device) {
  cudaDeviceProp p{};
  LSF_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  DeviceProperties out;
  out.index = device;
  out.name = p.name;
  out.sm_count = p.multiProcessorCount;
  out.total_memory = int64_t(p.totalGlobalMem);
  out.major = p.major;
  out.minor = p.minor;
  return out;
}

void synchronize_devices(int device) {
  const int first = device < 0 ? 0 : device, last = device < 0 ? cuda_device_count() : device + 1;
  for (int d = first; d < last; ++d) {
    DeviceGuard guard(d);
    LSF_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

const detail::Backend backend{properties, release_cached_blocks, synchronize_devices};
[[maybe_unused]] const bool installed = (detail::set_backend(&backend), true);

}  // namespace
}  // namespace lsf::cuda
