// Internal to cuda/*.cu: error checking, the stream every kernel launches on, launch sizing and
// the element-type mapping between lsformer dtypes and CUDA types. Never included by a public
// header (a CPU-only build and the installed headers carry no CUDA types).
//
//   my_kernel<<<lsf::cuda::blocks_for(n), lsf::cuda::kThreads, 0, lsf::cuda::current_stream()>>>(...);
//   LSF_CUDA_CHECK_LAUNCH("my_kernel");
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "lsformer/engine/dtype.h"
#include "lsformer/engine/error.h"

// Any CUDA runtime call that fails becomes an lsf::Error naming the call and CUDA's reason.
#define LSF_CUDA_CHECK(expr)                                                                 \
  do {                                                                                       \
    cudaError_t lsf_cuda_err_ = (expr);                                                      \
    LSF_CHECK(lsf_cuda_err_ == cudaSuccess) << #expr << " failed: " << cudaGetErrorString(lsf_cuda_err_); \
  } while (0)

// After a <<<...>>> launch: a bad configuration is reported at once, named by kernel.
#define LSF_CUDA_CHECK_LAUNCH(kernel_name)                                                   \
  do {                                                                                       \
    cudaError_t lsf_cuda_err_ = cudaGetLastError();                                          \
    LSF_CHECK(lsf_cuda_err_ == cudaSuccess) << "CUDA kernel " << (kernel_name)               \
                                            << " failed to launch: " << cudaGetErrorString(lsf_cuda_err_); \
  } while (0)

namespace lsf::cuda {

// The stream lsformer's kernels, copies and cuBLAS calls run on for the current device: one
// non-blocking stream per device, created on first use. Work is ordered on it, so host code
// needs no synchronisation between kernels; reading results on the host does (see to(kCPU)).
cudaStream_t current_stream();
// The device the calling thread works on (cudaGetDevice), and a guard that switches to a
// tensor's device for the duration of a kernel call.
int current_device();
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

constexpr int kThreads = 256;  // default block size of elementwise kernels
// Blocks for n elements at `threads` per block, capped so a grid-stride loop covers the rest.
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  constexpr int64_t kMaxBlocks = int64_t(1) << 20;
  return unsigned(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// The CUDA storage type of an lsformer dtype (bf16 and f16 compute in float inside kernels).
template <DType D> struct CudaType;
template <> struct CudaType<DType::F32> { using type = float; };
template <> struct CudaType<DType::F64> { using type = double; };
template <> struct CudaType<DType::BF16> { using type = __nv_bfloat16; };
template <> struct CudaType<DType::F16> { using type = __half; };
template <> struct CudaType<DType::I32> { using type = int32_t; };
template <> struct CudaType<DType::I64> { using type = int64_t; };
template <> struct CudaType<DType::U8> { using type = uint8_t; };
template <> struct CudaType<DType::Bool> { using type = bool; };

}  // namespace lsf::cuda
