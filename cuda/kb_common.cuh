// Internal to the CUDA kernels of dropout, random fills, embedding, index ops and optimizer
// updates (cuda/{dropout,random,embedding,index,optim_update}.cu): dtype dispatch onto CUDA
// element types, float conversions for bf16/f16, scratch buffers from the caching allocator,
// and the device-side error flag that turns an out-of-range index into an lsf::Error on the
// host. Strided offsets come from cuda/offset_calc.h (included here for the kernels).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "lsformer/cuda/dtype.cuh"
#include "lsformer/cuda/offset_calc.h"
#include "lsformer/cuda/runtime.cuh"
#include "lsformer/engine/storage.h"
#include "lsformer/engine/tensor.h"

namespace lsf::cuda::kb {

// ---- dtype dispatch (cuda/dtype.cuh): fn.template operator()<CudaT>() ----

// f32 / f64 / bf16 / f16; anything else is an error naming the op.
template <typename Fn>
void dispatch_floating(DType t, const char* op, Fn&& fn) {
  if (dispatch_among<DType::F32, DType::F64, DType::BF16, DType::F16>(t, fn)) return;
  LSF_FAIL() << op << ": expected a floating-point tensor on the GPU (f32, f64, bf16, f16), got " << dtype_name(t);
}

// f32 / f64 only (the optimizer state types, as on the CPU).
template <typename Fn>
void dispatch_f32_f64(DType t, const char* op, Fn&& fn) {
  if (dispatch_among<DType::F32, DType::F64>(t, fn)) return;
  LSF_FAIL() << op << ": expected a f32 or f64 tensor, got " << dtype_name(t);
}

// The CPU's numeric types (f32, f64, i32, i64, u8) plus bf16 / f16.
template <typename Fn>
void dispatch_numeric(DType t, const char* op, Fn&& fn) {
  if (dispatch_among<DType::F32, DType::F64, DType::BF16, DType::F16, DType::I32, DType::I64, DType::U8>(t, fn))
    return;
  LSF_FAIL() << op << ": dtype " << dtype_name(t) << " is not supported on the GPU";
}

template <typename Fn>
void dispatch_index(DType t, const char* op, Fn&& fn) {
  if (dispatch_among<DType::I32, DType::I64>(t, fn)) return;
  LSF_FAIL() << op << ": expected an index tensor of dtype i64 or i32, got " << dtype_name(t);
}

// An unsigned integer type of each element size: pure copies move bits, whatever the dtype.
template <typename Fn>
decltype(auto) dispatch_bits(size_t element_size, const char* op, Fn&& fn) {
  switch (element_size) {
    case 1: return fn.template operator()<uint8_t>();
    case 2: return fn.template operator()<uint16_t>();
    case 4: return fn.template operator()<uint32_t>();
    case 8: return fn.template operator()<uint64_t>();
    default: break;
  }
  LSF_FAIL() << op << ": unsupported element size " << element_size;
}

// ---- float conversions (bf16 / f16 compute in float; f64 stays double): convert of
// cuda/dtype.cuh, which rounds to nearest even as the CPU's BFloat16 / Half constructors do ----

template <typename T> struct Compute { using type = compute_t<T>; };

template <typename T>
__device__ __forceinline__ typename Compute<T>::type to_compute(T v) {
  return convert<typename Compute<T>::type>(v);
}

template <typename T, typename C>
__device__ __forceinline__ T from_compute(C v) {
  return convert<T>(v);
}

// The CPU's convert_scalar<T>(double): through float for bf16 / f16.
template <typename T>
__device__ __forceinline__ T from_double(double v) {
  return convert<T>(v);
}

// ---- temporaries ----

// A device buffer for a kernel's scratch, taken from lsformer's caching allocator
// (cuda/allocator.cu via allocator_for(DeviceType::CUDA)) on the current device (callers hold a
// DeviceGuard), so it counts in memory_stats and reuses cached blocks. Freeing it while kernels
// queued before the free still use it is safe: all work of a device runs on its one stream
// (cuda/runtime.cuh), and a block handed back to the allocator is only given to later work on
// that stream, which queues behind those kernels (see the stream-order note in cuda/alloc_bins.h).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes), device_(DeviceType::CUDA, current_device()) {
    if (bytes_ > 0) ptr_ = allocator_for(DeviceType::CUDA).allocate(bytes_, device_);
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) allocator_for(DeviceType::CUDA).deallocate(ptr_, bytes_, device_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename P>
  P* as() const {
    return static_cast<P*>(ptr_);
  }

 private:
  size_t bytes_ = 0;
  Device device_;
  void* ptr_ = nullptr;
};

// ---- the device error flag ----
//
// A kernel that meets a bad index skips the access and records the smallest offending flat
// position with atomicMin; the host reads the flag back after the kernel (a synchronisation on
// the stream) and raises lsf::Error naming the op and the index. Kernels that write before the
// check completes may leave their output partially written when they throw; no memory outside
// the tensors is ever read or written.
constexpr unsigned long long kNoError = ~0ull;

class ErrorFlag {
 public:
  // Locks the device's flag for one checked kernel and resets it on the current stream.
  explicit ErrorFlag(int device);
  ~ErrorFlag();
  ErrorFlag(const ErrorFlag&) = delete;
  ErrorFlag& operator=(const ErrorFlag&) = delete;
  unsigned long long* device_ptr() const { return flag_; }
  // Waits for the stream; the recorded position, or kNoError.
  unsigned long long read() const;

 private:
  std::unique_lock<std::mutex> lock_;
  unsigned long long* flag_ = nullptr;
};

__device__ __forceinline__ void record_error(unsigned long long* flag, int64_t position) {
  atomicMin(flag, static_cast<unsigned long long>(position));
}

// Records the first flat position p of idx [n] (contiguous) with idx[p] outside [0, size).
template <typename I>
__global__ void check_range_kernel(const I* __restrict__ idx, int64_t n, int64_t size, unsigned long long* flag) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    if (idx[i] < 0 || int64_t(idx[i]) >= size) record_error(flag, i);
}

// Launches check_range_kernel on the current stream (nothing for n = 0).
template <typename I>
void launch_check_range(const I* idx, int64_t n, int64_t size, unsigned long long* flag) {
  if (n == 0) return;
  check_range_kernel<I><<<blocks_for(n), kThreads, 0, current_stream()>>>(idx, n, size, flag);
  LSF_CUDA_CHECK_LAUNCH("check_range_kernel");
}

// The value of element `position` of a contiguous index tensor on the device (for messages).
int64_t read_index(const Tensor& index, int64_t position);

}  // namespace lsf::cuda::kb
