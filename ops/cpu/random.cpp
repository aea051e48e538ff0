// CPU random fills. Each element's value depends only on its index and the generator state,
// so the loops parallelise freely and match the CUDA kernels: the per-element value comes from
// engine/philox.h, which cuda/random.cu compiles for the device (the same arithmetic as
// uniform_f64_at / uniform_f32_at / normal_at of ops/kernels/random.h, checked by
// tests/test_philox.cpp).
#include <cmath>

#include "lsformer/ops/kernels/random.h"

namespace lsf::cpu {
namespace {

void uniform(const Tensor& out, GeneratorState state, double low, double high) {
  dispatch_all(out.dtype(), [&]<typename T>() {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
      T* o = static_cast<T*>(out.raw_data());
      const int64_t n = out.numel();
      const double span = high - low;
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t e = uint64_t(i);
        const double u = std::is_same_v<T, double> ? philox::uniform_f64_element(state.seed, state.offset, e)
                                                   : double(philox::uniform_f32_element(state.seed, state.offset, e));
        o[i] = convert_scalar<T>(philox::affine(low, span, u));
      }
    } else {
      LSF_FAIL() << "uniform_: expected a floating-point tensor, got " << out.dtype();
    }
  });
}

void normal(const Tensor& out, GeneratorState state, double mean, double std) {
  dispatch_all(out.dtype(), [&]<typename T>() {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
      T* o = static_cast<T*>(out.raw_data());
      const int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n > 16384)
      for (int64_t i = 0; i < n; ++i) {
        const double z = philox::normal_element(state.seed, state.offset, uint64_t(i));
        o[i] = convert_scalar<T>(philox::affine(mean, std, z));
      }
    } else {
      LSF_FAIL() << "normal_: expected a floating-point tensor, got " << out.dtype();
    }
  });
}

}  // namespace

LSF_REGISTER_KERNEL(uniform_kernel, DeviceType::CPU, uniform);
LSF_REGISTER_KERNEL(normal_kernel, DeviceType::CPU, normal);

}  // namespace lsf::cpu
