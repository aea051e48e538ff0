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

}  // namespace lsf
