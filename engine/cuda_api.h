// The public CUDA API: devices, memory statistics, synchronisation and the TF32 switch.
//
// CUDA-free on purpose: it compiles and links in a CPU-only build, where device_count() is 0
// and every other call throws lsf::Error saying the build has no CUDA backend. In a CUDA build
// the backend (cuda/device.cu) installs its implementation at load time without calling CUDA.
//
//   if (lsf::cuda::device_count() > 0) {
//     auto s = lsf::cuda::memory_stats(0);  // bytes: current, peak, reserved
//     lsf::cuda::empty_cache();             // give cached blocks back to the driver
//   }
#pragma once

#include <cstdint>
#include <string>

#include "lsformer/engine/storage.h"

namespace lsf::cuda {

struct DeviceProperties {
  int index = 0;
  std::string name;
  int sm_count = 0;           // streaming multiprocessors
  int64_t total_memory = 0;   // bytes of device memory
  int major = 0, minor = 0;   // compute capability
};

// Whether this build has the CUDA backend (true even on a machine without a GPU).
bool built();
// Usable devices; 0 in a CPU-only build, without a driver or without a GPU. Never throws.
int device_count();
// Why device_count() is 0, in words ("" when a device is usable): "this build has no CUDA
// backend", or the CUDA runtime's own error ("CUDA driver version is insufficient for CUDA
// runtime version", "no CUDA-capable device is detected", ...), so that a broken driver is told
// apart from a machine without a GPU. Never throws.
std::string unavailable_reason();
// Throws lsf::Error for a device index out of range (or a CPU-only build).
DeviceProperties device_properties(int device = 0);
// The caching allocator's statistics for one device (MemoryStats in engine/storage.h):
// current = bytes of live tensors, peak = high-water mark of current, reserved = bytes held
// from the driver (live + cached blocks, rounded to the allocator's size classes). The first
// GEMM on a device takes a 32 MiB cuBLAS workspace from the allocator; it stays live and counts
// in current.
MemoryStats memory_stats(int device = 0);
void reset_peak_memory_stats(int device = 0);
// Returns every cached, unused block on every device to the driver (cudaFree).
void empty_cache();
// Waits for all work lsformer queued on the device (-1: on every device it has used).
void synchronize(int device = -1);
// Lets f32 GEMMs use TF32 tensor cores (10-bit mantissa inputs, f32 accumulation): faster,
// relative error ~1e-3 instead of ~1e-7. Off by default, as in PyTorch ≥ 1.12.
void set_allow_tf32(bool allow);
bool allow_tf32();  // never throws; false in a CPU-only build

namespace detail {
// What the CUDA backend provides; installed once at load time (cuda/device.cu).
struct Backend {
  DeviceProperties (*properties)(int device);
  void (*empty_cache)();
  void (*synchronize)(int device);
};
void set_backend(const Backend* backend);
// The backend's account of a failed device count (cuda/runtime.cu), read by unavailable_reason().
void set_unavailable_reason_hook(std::string (*reason)());
}  // namespace detail

}  // namespace lsf::cuda
