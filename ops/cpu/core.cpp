// CPU implementations of the engine's core kernels: fill, converting strided copy, and the
// in-place add used for gradient accumulation.
#include <omp.h>

#include <algorithm>
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

// Contiguous copies at least this large are split over the threads: one core's memcpy does not
// reach the memory bandwidth, and autograd's gradient copies of whole activations are this big.
constexpr size_t kParallelCopyBytes = size_t(1) << 20;
constexpr size_t kCopyChunkBytes = size_t(1) << 18;

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    char* out = static_cast<char*>(dst.raw_data());
    const char* in = static_cast<const char*>(src.raw_data());
    const size_t bytes = dst.nbytes();
    if (bytes < kParallelCopyBytes || omp_in_parallel()) {
      std::memcpy(out, in, bytes);
      return;
    }
    const int64_t chunks = int64_t((bytes + kCopyChunkBytes - 1) / kCopyChunkBytes);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const size_t begin = size_t(c) * kCopyChunkBytes;
      std::memcpy(out + begin, in + begin, std::min(kCopyChunkBytes, bytes - begin));
    }
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
