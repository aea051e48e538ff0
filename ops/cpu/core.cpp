// CPU implementations of the engine's core kernels: fill, converting strided copy, and the
// in-place add used for gradient accumulation.
#include <cstring>

#include "lsformer/engine/core_kernels.h"
#include "lsformer/ops/cpu/loops.h"

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
    // memcpy per run: one run for contiguous tensors, which for_each_run splits over the
    // threads when long (one core's memcpy does not reach the memory bandwidth, and autograd
    // copies whole activations).
    const size_t element = dst.element_size();
    for_each_run<2>({&dst, &src}, [element](std::array<char*, 2> p, std::array<int64_t, 2>, int64_t n) {
      std::memcpy(p[0], p[1], size_t(n) * element);
    });
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
