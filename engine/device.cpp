// Devices: parsing "cpu" / "cuda" / "cuda:N" and printing them (see device.h).
#include "lsformer/engine/device.h"

#include "lsformer/engine/error.h"

namespace lsf {

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    *this = kCPU;
  } else if (spec == "cuda") {
    *this = kCUDA;
  } else if (spec.rfind("cuda:", 0) == 0 && spec.size() > 5 &&
             spec.find_first_not_of("0123456789", 5) == std::string::npos && spec.size() < 9) {
    *this = Device(DeviceType::CUDA, std::stoi(spec.substr(5)));
  } else {
    LSF_FAIL() << "unknown device '" << spec << "' (expected cpu, cuda or cuda:N)";
  }
}

const char* device_type_name(DeviceType t) { return t == DeviceType::CPU ? "cpu" : "cuda"; }

std::string Device::str() const {
  return is_cpu() ? "cpu" : "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

namespace {
int (*cuda_device_count_hook)() = nullptr;
}

void detail::set_cuda_device_count_hook(int (*hook)()) { cuda_device_count_hook = hook; }

int cuda_device_count() { return cuda_device_count_hook ? cuda_device_count_hook() : 0; }

}  // namespace lsf
