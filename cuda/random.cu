// CUDA random fills: the CPU's values (ops/cpu/random.cpp) for the same generator state. One
// thread handles one Philox block (four f32-family elements, two f64 elements, or four
// normals) and computes each element with engine/philox.h, the code the CPU kernel runs too.
//
// Uniform values are bit-identical to the CPU's: the uniform is exact and low + span·u is
// rounded twice on both sides (philox::affine). Normal values use log, cos and sin in double;
// CUDA's and glibc's differ by a few ulp of double, so after the same rounding to the element
// type a GPU normal equals the CPU's up to those few double ulps (f64) or one ulp of the
// element type at a rounding boundary (f32 / bf16 / f16); tests/test_cuda_random.cpp derives
// the bound.
#include "lsformer/cuda/kb_common.cuh"
#include "lsformer/engine/philox.h"
#include "lsformer/ops/kernels/random.h"

namespace lsf::cuda {
namespace {

using kb::from_double;

// ---- kernels ----

// out [n] contiguous, 32-bit uniforms (f32 / bf16 / f16): element 4b + j ← word j of block b.
template <typename T>
__global__ void uniform32_kernel(T* __restrict__ out, int64_t n, int64_t blocks, uint64_t seed, uint64_t offset,
                                 double low, double span) {
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += int64_t(gridDim.x) * blockDim.x) {
    const philox::Words w = philox::block_words(seed, offset + uint64_t(b));
    for (int j = 0; j < 4 && 4 * b + j < n; ++j)
      out[4 * b + j] = from_double<T>(philox::affine(low, span, double(philox::uniform_from_bits(w.w[j]))));
  }
}

// out [n] contiguous f64: element 2b + j ← words 2j, 2j + 1 of block b.
__global__ void uniform64_kernel(double* __restrict__ out, int64_t n, int64_t blocks, uint64_t seed,
                                 uint64_t offset, double low, double span) {
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += int64_t(gridDim.x) * blockDim.x) {
    const philox::Words w = philox::block_words(seed, offset + uint64_t(b));
    for (int j = 0; j < 2 && 2 * b + j < n; ++j)
      out[2 * b + j] = philox::affine(low, span, philox::uniform53_from_bits(w.w[2 * j], w.w[2 * j + 1]));
  }
}

// out [n] contiguous: elements 4b .. 4b + 3 from block b (pairs (0,1) and (2,3); cos, sin).
template <typename T>
__global__ void normal_kernel_impl(T* __restrict__ out, int64_t n, int64_t blocks, uint64_t seed, uint64_t offset,
                                   double mean, double std) {
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += int64_t(gridDim.x) * blockDim.x) {
    const philox::Words w = philox::block_words(seed, offset + uint64_t(b));
    for (int j = 0; j < 4 && 4 * b + j < n; ++j) {
      const int pair = j / 2;
      const double z = philox::normal_from_bits(w.w[2 * pair], w.w[2 * pair + 1], j % 2 == 1);
      out[4 * b + j] = from_double<T>(philox::affine(mean, std, z));
    }
  }
}

// ---- entries ----

void uniform(const Tensor& out, GeneratorState state, double low, double high) {
  LSF_CHECK(out.is_contiguous()) << "uniform_: the CUDA kernel expects a contiguous tensor (shape " << out.shape()
                                 << ")";
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  const double span = high - low;
  kb::dispatch_floating(out.dtype(), "uniform_", [&]<typename T>() {
    T* o = static_cast<T*>(out.raw_data());
    if constexpr (std::is_same_v<T, double>) {
      const int64_t blocks = (n + 1) / 2;
      uniform64_kernel<<<blocks_for(blocks), kThreads, 0, current_stream()>>>(o, n, blocks, state.seed, state.offset,
                                                                            low, span);
      LSF_CUDA_CHECK_LAUNCH("uniform64_kernel");
    } else {
      const int64_t blocks = (n + 3) / 4;
      uniform32_kernel<T><<<blocks_for(blocks), kThreads, 0, current_stream()>>>(o, n, blocks, state.seed,
                                                                                state.offset, low, span);
      LSF_CUDA_CHECK_LAUNCH("uniform32_kernel");
    }
  });
}

void normal(const Tensor& out, GeneratorState state, double mean, double std) {
  LSF_CHECK(out.is_contiguous()) << "normal_: the CUDA kernel expects a contiguous tensor (shape " << out.shape()
                                 << ")";
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  const int64_t blocks = (n + 3) / 4;
  kb::dispatch_floating(out.dtype(), "normal_", [&]<typename T>() {
    normal_kernel_impl<T><<<blocks_for(blocks), kThreads, 0, current_stream()>>>(
        static_cast<T*>(out.raw_data()), n, blocks, state.seed, state.offset, mean, std);
    LSF_CUDA_CHECK_LAUNCH("normal_kernel");
  });
}

}  // namespace

LSF_REGISTER_KERNEL(uniform_kernel, DeviceType::CUDA, uniform);
LSF_REGISTER_KERNEL(normal_kernel, DeviceType::CUDA, normal);

}  // namespace lsf::cuda
