// CPU implementations of the engine's core kernels: fill, converting strided copy, the in-place
// add used for gradient accumulation, and autocast's rounding.
#include <bit>
#include <cstring>

#include "lsformer/engine/core_kernels.h"
#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/cpu/simd.h"

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

// A contiguous run of round_to for bf16: BFloat16::from_float's rounding (add half an ulp of
// the kept part, ties to even; NaN quietened) with the low half cleared, vectorised.
LSF_SIMD_CLONES void round_bf16_run(float* dst, const float* src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(src[i]);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    dst[i] = std::bit_cast<float>(nan ? (u | 0x00400000u) & 0xffff0000u : rounded);
  }
}

void round_to(const Tensor& dst, const Tensor& src, DType low) {
  LSF_CHECK(dst.dtype() == DType::F32 && src.dtype() == DType::F32 && dst.shape() == src.shape())
      << "round_to: expected two f32 tensors of one shape, got " << dst.dtype() << " " << dst.shape() << " and "
      << src.dtype() << " " << src.shape();
  LSF_CHECK(low == DType::BF16 || low == DType::F16) << "round_to: the format must be bf16 or f16, got " << low;
  if (low == DType::F16) {
    map<float, float>(dst, [](float v) { return float(Half(v)); }, src);
    return;
  }
  for_each_run<2>({&dst, &src}, [](std::array<char*, 2> p, std::array<int64_t, 2> stride, int64_t n) {
    if (stride[0] == 4 && stride[1] == 4) return round_bf16_run(reinterpret_cast<float*>(p[0]), reinterpret_cast<const float*>(p[1]), n);
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<float*>(p[0] + i * stride[0]) = float(BFloat16(*reinterpret_cast<const float*>(p[1] + i * stride[1])));
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
LSF_REGISTER_KERNEL(round_to_kernel, DeviceType::CPU, round_to);
// Moving to or from the CPU is done by the other device's backend.
LSF_MARK_UNSUPPORTED(cross_device_copy_kernel, DeviceType::CPU);

}  // namespace lsf::cpu
