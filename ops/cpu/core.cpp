// CPU implementations of the engine's core kernels: fill, converting strided copy, and the
// in-place add used for gradient accumulation.
#include <cstring>

#include "engine/core_kernels.h"
#include "ops/cpu/loops.h"

namespace lsf::cpu {
namespace {

void fill(const Tensor& dst, double value) {
  dispatch_all(dst.dtype(), [&]<typename T>() {
    const T v = convert_scalar<T>(value);
    map<T>(dst, [v]() { return v; });
  });
}

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    std::memcpy(dst.raw_data(), src.raw_data(), dst.nbytes());
    return;
  }
  dispatch_all(dst.dtype(), [&]<typename To>() {
    dispatch_all(src.dtype(), [&]<typename From>() {
      map<To, From>(dst, [](From v) { return convert_scalar<To>(v); }, src);
    });
  });
}

void add_inplace(const Tensor& dst, const Tensor& src) {
  dispatch_numeric(dst.dtype(), "add_", [&]<typename T>() {
    map<T, T, T>(dst, [](T a, T b) { return T(a + b); }, dst, src);
  });
}

}  // namespace

LSF_REGISTER_KERNEL(fill_kernel, DeviceType::CPU, fill);
LSF_REGISTER_KERNEL(copy_kernel, DeviceType::CPU, copy);
LSF_REGISTER_KERNEL(add_inplace_kernel, DeviceType::CPU, add_inplace);
// Moving to or from the CPU is done by the other device's backend.
LSF_MARK_UNSUPPORTED(cross_device_copy_kernel, DeviceType::CPU);

}  // namespace lsf::cpu
