// Devices: "cpu" and "cuda:N". Tensors on different devices never mix implicitly.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace lsf {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // which GPU; always 0 for the CPU

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}
  // Parses "cpu", "cuda" and "cuda:N"; throws lsf::Error otherwise.
  explicit Device(const std::string& spec);

  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  constexpr bool operator==(const Device&) const = default;
  std::string str() const;
};

constexpr Device kCPU{DeviceType::CPU, 0};
constexpr Device kCUDA{DeviceType::CUDA, 0};

std::ostream& operator<<(std::ostream& os, const Device& d);
const char* device_type_name(DeviceType t);

// Usable CUDA devices: 0 in a CPU-only build, without a driver, or without a GPU. Never throws,
// so tests and tools can ask before touching the GPU.
int cuda_device_count();
inline bool cuda_is_available() { return cuda_device_count() > 0; }

namespace detail {
// The CUDA backend installs its device counter here when it is built (engine/ knows nothing of
// CUDA itself; see cuda/runtime.cu).
void set_cuda_device_count_hook(int (*hook)());
}  // namespace detail

}  // namespace lsf
