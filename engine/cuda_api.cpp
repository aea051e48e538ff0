// The CUDA-free side of engine/cuda_api.h: forwards to the backend the CUDA build installs,
// or explains that this build has none.
#include "lsformer/engine/cuda_api.h"

#include <atomic>

#include "lsformer/engine/device.h"
#include "lsformer/engine/error.h"

namespace lsf::cuda {
namespace {

const detail::Backend* backend = nullptr;
std::string (*unavailable_reason_hook)() = nullptr;
std::atomic<bool> tf32_allowed{false};

const detail::Backend& require_backend(const char* what) {
  LSF_CHECK(backend != nullptr) << "lsf::cuda::" << what
                                << ": lsformer was built without CUDA (configure with -DLSF_CUDA=ON "
                                   "on a machine with the CUDA toolkit)";
  return *backend;
}

void check_device(const char* what, int device) {
  const int count = device_count();
  LSF_CHECK(device >= 0 && device < count)
      << "lsf::cuda::" << what << ": no CUDA device " << device << " (" << count
      << " usable device" << (count == 1 ? "" : "s") << ")";
}

}  // namespace

void detail::set_backend(const Backend* b) { backend = b; }

bool built() { return backend != nullptr; }

int device_count() { return cuda_device_count(); }

void detail::set_unavailable_reason_hook(std::string (*reason)()) { unavailable_reason_hook = reason; }

std::string unavailable_reason() {
  if (backend == nullptr) return "this build has no CUDA backend";
  if (device_count() > 0) return "";
  return unavailable_reason_hook ? unavailable_reason_hook() : "the CUDA runtime found no device";
}

DeviceProperties device_properties(int device) {
  const detail::Backend& b = require_backend("device_properties");
  check_device("device_properties", device);
  return b.properties(device);
}

MemoryStats memory_stats(int device) {
  require_backend("memory_stats");
  check_device("memory_stats", device);
  return lsf::memory_stats(Device(DeviceType::CUDA, device));
}

void reset_peak_memory_stats(int device) {
  require_backend("reset_peak_memory_stats");
  check_device("reset_peak_memory_stats", device);
  lsf::reset_peak_memory(Device(DeviceType::CUDA, device));
}

void empty_cache() { require_backend("empty_cache").empty_cache(); }

void synchronize(int device) {
  const detail::Backend& b = require_backend("synchronize");
  if (device != -1) check_device("synchronize", device);
  b.synchronize(device);
}

void set_allow_tf32(bool allow) {
  require_backend("set_allow_tf32");
  tf32_allowed.store(allow);
}

bool allow_tf32() { return tf32_allowed.load(); }

}  // namespace lsf::cuda
