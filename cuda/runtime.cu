// The per-device stream and the device guard declared in runtime.cuh.
#include <mutex>
#include <string>
#include <vector>

#include "lsformer/cuda/runtime.cuh"
#include "lsformer/engine/cuda_api.h"
#include "lsformer/engine/device.h"

namespace lsf::cuda {

namespace {
// cudaGetDeviceCount fails without a driver or a GPU: then there is no usable device, not an
// error, but its text is kept (lsf::cuda::unavailable_reason) so that a broken or too old driver
// does not pass for a machine without a GPU.
struct DeviceCount {
  int count = 0;
  std::string failure;
};

const DeviceCount& device_count_once() {
  static const DeviceCount result = [] {
    DeviceCount r;
    const cudaError_t status = cudaGetDeviceCount(&r.count);
    if (status != cudaSuccess) {
      cudaGetLastError();  // clear the sticky error so later calls start clean
      r.count = 0;
      r.failure = std::string(cudaGetErrorString(status)) + " (" + cudaGetErrorName(status) + ")";
    } else if (r.count == 0) {
      r.failure = "the CUDA runtime found no device";
    }
    return r;
  }();
  return result;
}

int count_devices() { return device_count_once().count; }
std::string count_failure() { return device_count_once().failure; }

// Only stores function pointers: no CUDA call happens during static initialisation.
[[maybe_unused]] const bool hook_installed =
    (::lsf::detail::set_cuda_device_count_hook(count_devices),
     ::lsf::cuda::detail::set_unavailable_reason_hook(count_failure), true);
}  // namespace

int current_device() {
  int device = 0;
  LSF_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

cudaStream_t current_stream() {
  // Created lazily and never destroyed: streams live as long as the process, like the CUDA
  // context itself, so no kernel can outlive its stream during static destruction.
  static std::mutex mutex;
  static std::vector<cudaStream_t> streams;
  int device = current_device();
  std::lock_guard<std::mutex> lock(mutex);
  if (int(streams.size()) <= device) streams.resize(device + 1, nullptr);
  if (streams[device] == nullptr) LSF_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[device], cudaStreamNonBlocking));
  return streams[device];
}

DeviceGuard::DeviceGuard(int device) : previous_(current_device()) {
  if (device != previous_) LSF_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  // A destructor must not throw; restoring the previous device cannot fail for a device that
  // was current a moment ago.
  int now = previous_;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

}  // namespace lsf::cuda
