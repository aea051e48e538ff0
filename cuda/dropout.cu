// CUDA dropout kernels: exactly the CPU's mask (ops/cpu/dropout.cpp) for the same generator
// state. One thread handles one Philox block, i.e. four consecutive elements, and draws the
// words and applies the keep rule with engine/philox.h, the code the CPU kernel runs too.
//
// y = x · (keep ? scale : 0) in x's dtype, as on the CPU (f32 and f64 bit-identical; bf16 and
// f16, which the CPU does not take, compute in float with scale rounded to float and round
// once to the storage type). Contiguous f32 runs use 16-byte loads and stores.
#include "lsformer/cuda/kb_common.cuh"
#include "lsformer/engine/philox.h"
#include "lsformer/ops/dropout.h"
#include "lsformer/ops/kernels/dropout.h"

namespace lsf::cuda {
namespace {

using kb::Compute;
using kb::from_compute;
using kb::to_compute;

// ---- kernels ----

// y, mask, x [n] contiguous; block b covers elements 4b .. 4b + 3.
template <typename T>
__global__ void dropout_forward_cuda_kernel(T* __restrict__ y, uint8_t* __restrict__ mask, const T* __restrict__ x,
                                       int64_t n, int64_t blocks, uint64_t seed, uint64_t offset,
                                       uint32_t threshold, typename Compute<T>::type scale, bool vectorized) {
  using C = typename Compute<T>::type;
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += int64_t(gridDim.x) * blockDim.x) {
    const philox::Words w = philox::block_words(seed, offset + uint64_t(b));
    const int64_t i0 = 4 * b;
    if constexpr (std::is_same_v<T, float>) {
      // A full block with 16-byte aligned y and x (4-byte aligned mask).
      if (vectorized && i0 + 4 <= n) {
        const float4 v = *reinterpret_cast<const float4*>(x + i0);
        const bool k0 = philox::dropout_keep(w.w[0], threshold), k1 = philox::dropout_keep(w.w[1], threshold);
        const bool k2 = philox::dropout_keep(w.w[2], threshold), k3 = philox::dropout_keep(w.w[3], threshold);
        const float4 out = {v.x * (k0 ? scale : 0.0f), v.y * (k1 ? scale : 0.0f), v.z * (k2 ? scale : 0.0f),
                            v.w * (k3 ? scale : 0.0f)};
        *reinterpret_cast<float4*>(y + i0) = out;
        *reinterpret_cast<uchar4*>(mask + i0) = make_uchar4(k0, k1, k2, k3);
        continue;
      }
    }
    for (int j = 0; j < 4 && i0 + j < n; ++j) {
      const bool keep = philox::dropout_keep(w.w[j], threshold);
      mask[i0 + j] = keep;
      y[i0 + j] = from_compute<T>(C(to_compute(x[i0 + j]) * (keep ? scale : C(0))));
    }
  }
}

// dx, dy, mask [n] contiguous.
template <typename T>
__global__ void dropout_backward_kernel_impl(T* __restrict__ dx, const T* __restrict__ dy,
                                             const uint8_t* __restrict__ mask, int64_t n,
                                             typename Compute<T>::type scale) {
  using C = typename Compute<T>::type;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = from_compute<T>(C(to_compute(dy[i]) * (mask[i] ? scale : C(0))));
}

// ---- launchers ----

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// ---- entries ----

void dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, double p, GeneratorState state) {
  LSF_CHECK(x.is_contiguous() && y.is_contiguous() && mask.is_contiguous())
      << "dropout: the CUDA kernel expects contiguous tensors (x shape " << x.shape() << ")";
  const int64_t n = x.numel();
  if (n == 0) return;
  const int64_t blocks = int64_t(dropout_blocks(x));
  const uint32_t threshold = dropout_keep_threshold(p);
  DeviceGuard guard(x.device().index);
  kb::dispatch_floating(x.dtype(), "dropout", [&]<typename T>() {
    using C = typename Compute<T>::type;
    // The CPU rounds 1/(1 − p) to the element type; bf16/f16 compute in float.
    const C scale = C(1.0 / (1.0 - p));
    T* py = static_cast<T*>(y.raw_data());
    const T* px = static_cast<const T*>(x.raw_data());
    uint8_t* pm = static_cast<uint8_t*>(mask.raw_data());
    const bool vectorized = aligned16(py) && aligned16(px) && reinterpret_cast<uintptr_t>(pm) % 4 == 0;
    dropout_forward_cuda_kernel<T><<<blocks_for(blocks), kThreads, 0, current_stream()>>>(
        py, pm, px, n, blocks, state.seed, state.offset, threshold, scale, vectorized);
    LSF_CUDA_CHECK_LAUNCH("dropout_forward_cuda_kernel");
  });
}

void dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, double scale) {
  LSF_CHECK(dx.is_contiguous() && dy.is_contiguous() && mask.is_contiguous())
      << "dropout_backward: the CUDA kernel expects contiguous tensors (shape " << dy.shape() << ")";
  const int64_t n = dy.numel();
  if (n == 0) return;
  DeviceGuard guard(dy.device().index);
  kb::dispatch_floating(dy.dtype(), "dropout_backward", [&]<typename T>() {
    using C = typename Compute<T>::type;
    dropout_backward_kernel_impl<T><<<blocks_for(n), kThreads, 0, current_stream()>>>(
        static_cast<T*>(dx.raw_data()), static_cast<const T*>(dy.raw_data()),
        static_cast<const uint8_t*>(mask.raw_data()), n, C(scale));
    LSF_CUDA_CHECK_LAUNCH("dropout_backward_kernel");
  });
}

}  // namespace

LSF_REGISTER_KERNEL(dropout_forward_kernel, DeviceType::CUDA, dropout_forward);
LSF_REGISTER_KERNEL(dropout_backward_kernel, DeviceType::CUDA, dropout_backward);

}  // namespace lsf::cuda
