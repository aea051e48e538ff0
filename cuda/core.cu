// CUDA implementations of the engine's core kernels (engine/core_kernels.h): fill, converting
// strided copy, in-place add (gradient accumulation) and copies between devices through
// pinned host staging buffers.
//
// Layers (style habit 6): __global__ kernels → launchers (grid, stream, launch check) → entries
// that check the contract. Contiguous operands take vectorised paths (16-byte stores for
// fill, packs of 4 for converting copies and adds); anything else walks an OffsetCalc (cuda/offset_calc.h).
#include <cstring>
#include <mutex>

#include "lsformer/cuda/strided.cuh"
#include "lsformer/engine/core_kernels.h"

namespace lsf::cuda {
namespace {

// ---- kernels -----------------------------------------------------------------------------

// 16-byte packs of T (fill) and packs of 4 elements (conversions, adds), aligned to their size.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T x[V];
};

template <typename T>
__global__ void fill_contiguous_kernel(T* p, int64_t n, T v) {
  constexpr int V = 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1;
  using P = Pack<T, V>;
  P pack;
#pragma unroll
  for (int k = 0; k < V; ++k) pack.x[k] = v;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t packs = n / V;
  P* pp = reinterpret_cast<P*>(p);
  for (int64_t i = first; i < packs; i += stride) pp[i] = pack;
  for (int64_t i = packs * V + first; i < n; i += stride) p[i] = v;
}

template <typename T>
__global__ void fill_strided_kernel(T* p, int64_t n, T v, OffsetCalc<1> geo) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    p[geo.get(i).v[0]] = v;
  }
}

// Contiguous conversion, 4 elements per step: both pointers are aligned to their pack.
template <typename To, typename From>
__global__ void convert_contiguous_kernel(To* dst, const From* src, int64_t n) {
  constexpr int V = 4;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t packs = n / V;
  for (int64_t i = first; i < packs; i += stride) {
    const Pack<From, V> in = reinterpret_cast<const Pack<From, V>*>(src)[i];
    Pack<To, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.x[k] = convert<To>(in.x[k]);
    reinterpret_cast<Pack<To, V>*>(dst)[i] = out;
  }
  for (int64_t i = packs * V + first; i < n; i += stride) dst[i] = convert<To>(src[i]);
}

template <typename To, typename From>
__global__ void convert_strided_kernel(To* dst, const From* src, int64_t n, OffsetCalc<2> geo) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const Offsets<2> off = geo.get(i);
    dst[off.v[0]] = convert<To>(src[off.v[1]]);
  }
}

template <typename T>
__device__ inline T add(T a, T b) {
  if constexpr (is_reduced_float_v<T>) {
    return convert<T>(convert<float>(a) + convert<float>(b));  // bf16/f16: add in float
  } else {
    return T(a + b);
  }
}

template <typename T>
__global__ void add_contiguous_kernel(T* dst, const T* src, int64_t n) {
  constexpr int V = 4;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t packs = n / V;
  for (int64_t i = first; i < packs; i += stride) {
    Pack<T, V> a = reinterpret_cast<Pack<T, V>*>(dst)[i];
    const Pack<T, V> b = reinterpret_cast<const Pack<T, V>*>(src)[i];
#pragma unroll
    for (int k = 0; k < V; ++k) a.x[k] = add(a.x[k], b.x[k]);
    reinterpret_cast<Pack<T, V>*>(dst)[i] = a;
  }
  for (int64_t i = packs * V + first; i < n; i += stride) dst[i] = add(dst[i], src[i]);
}

template <typename T>
__global__ void add_strided_kernel(T* dst, const T* src, int64_t n, OffsetCalc<2> geo) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const Offsets<2> off = geo.get(i);
    dst[off.v[0]] = add(dst[off.v[0]], src[off.v[1]]);
  }
}

// ---- launchers and entries ---------------------------------------------------------------

void fill(const Tensor& dst, double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  DeviceGuard guard(dst.device().index);
  dispatch_cuda(dst.dtype(), [&]<typename T>() {
    T* p = static_cast<T*>(dst.raw_data());
    const T v = convert<T>(value);
    if (dst.is_contiguous() && aligned_to(p, 16)) {
      constexpr int V = 16 / sizeof(T);
      fill_contiguous_kernel<T><<<blocks_for((n + V - 1) / V), kThreads, 0, current_stream()>>>(p, n, v);
    } else {
      const auto geo = make_offset_calc<1>(dst.shape(), {&dst.strides()}, "fill_");
      fill_strided_kernel<T><<<blocks_for(n), kThreads, 0, current_stream()>>>(p, n, v, geo);
    }
    LSF_CUDA_CHECK_LAUNCH("fill");
  });
}

void copy(const Tensor& dst, const Tensor& src) {
  LSF_CHECK(dst.shape() == src.shape()) << "copy_: shapes " << dst.shape() << " and " << src.shape() << " differ";
  LSF_CHECK(dst.device() == src.device())
      << "copy_: destination on " << dst.device() << ", source on " << src.device();
  const int64_t n = dst.numel();
  if (n == 0) return;
  DeviceGuard guard(dst.device().index);
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    LSF_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice,
                                   current_stream()));
    return;
  }
  dispatch_cuda(dst.dtype(), [&]<typename To>() {
    dispatch_cuda(src.dtype(), [&]<typename From>() {
      To* d = static_cast<To*>(dst.raw_data());
      const From* s = static_cast<const From*>(src.raw_data());
      if (dst.is_contiguous() && src.is_contiguous() && aligned_to(d, 4 * sizeof(To)) &&
          aligned_to(s, 4 * sizeof(From))) {
        convert_contiguous_kernel<To, From><<<blocks_for((n + 3) / 4), kThreads, 0, current_stream()>>>(d, s, n);
      } else {
        const auto geo = make_offset_calc<2>(dst.shape(), {&dst.strides(), &src.strides()}, "copy_");
        convert_strided_kernel<To, From><<<blocks_for(n), kThreads, 0, current_stream()>>>(d, s, n, geo);
      }
      LSF_CUDA_CHECK_LAUNCH("copy");
    });
  });
}

void add_inplace(const Tensor& dst, const Tensor& src) {
  LSF_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype())
      << "add_: expected one shape and dtype, got " << dst.shape() << " (" << dst.dtype() << ") += "
      << src.shape() << " (" << src.dtype() << ")";
  LSF_CHECK(dst.is_contiguous()) << "add_: the destination of shape " << dst.shape() << " must be contiguous";
  LSF_CHECK(dst.dtype() != DType::Bool) << "add_: dtype bool is not supported";
  const int64_t n = dst.numel();
  if (n == 0) return;
  DeviceGuard guard(dst.device().index);
  dispatch_cuda(dst.dtype(), [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      T* d = static_cast<T*>(dst.raw_data());
      const T* s = static_cast<const T*>(src.raw_data());
      if (src.is_contiguous() && aligned_to(d, 4 * sizeof(T)) && aligned_to(s, 4 * sizeof(T))) {
        add_contiguous_kernel<T><<<blocks_for((n + 3) / 4), kThreads, 0, current_stream()>>>(d, s, n);
      } else {
        const auto geo = make_offset_calc<2>(dst.shape(), {&dst.strides(), &src.strides()}, "add_");
        add_strided_kernel<T><<<blocks_for(n), kThreads, 0, current_stream()>>>(d, s, n, geo);
      }
      LSF_CUDA_CHECK_LAUNCH("add_inplace");
    }
  });
}

// ---- transfers between devices -----------------------------------------------------------

// Two pinned host buffers per device, used in turn so that filling one overlaps the DMA of the
// other. An event per buffer marks when its last transfer finished; a buffer is reused only
// after waiting on it. Host → device returns once the last chunk is queued (the caller's host
// data has been copied into pinned memory by then); device → host waits for every chunk.
constexpr size_t kStagingChunk = size_t(4) << 20;

struct Staging {
  std::mutex mutex;
  void* buffer[2] = {nullptr, nullptr};
  cudaEvent_t done[2] = {nullptr, nullptr};
};

Staging& staging_for(int device) {
  static std::mutex mutex;
  static Staging* table[64] = {};  // never freed: pinned memory lives as long as the process
  LSF_CHECK(device >= 0 && device < 64) << "to: CUDA device index " << device << " out of range";
  std::lock_guard<std::mutex> lock(mutex);
  if (table[device] == nullptr) {
    auto* s = new Staging();
    for (int k = 0; k < 2; ++k) {
      LSF_CUDA_CHECK(cudaHostAlloc(&s->buffer[k], kStagingChunk, cudaHostAllocPortable));
      LSF_CUDA_CHECK(cudaEventCreateWithFlags(&s->done[k], cudaEventDisableTiming));
    }
    table[device] = s;
  }
  return *table[device];
}

void host_to_device(char* dst, const char* src, size_t nbytes, int device) {
  Staging& st = staging_for(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  cudaStream_t stream = current_stream();
  for (size_t off = 0, chunk = 0; off < nbytes; off += kStagingChunk, ++chunk) {
    const int k = int(chunk % 2);
    const size_t len = std::min(kStagingChunk, nbytes - off);
    LSF_CUDA_CHECK(cudaEventSynchronize(st.done[k]));  // the buffer's previous transfer is over
    std::memcpy(st.buffer[k], src + off, len);
    LSF_CUDA_CHECK(cudaMemcpyAsync(dst + off, st.buffer[k], len, cudaMemcpyHostToDevice, stream));
    LSF_CUDA_CHECK(cudaEventRecord(st.done[k], stream));
  }
}

void device_to_host(char* dst, const char* src, size_t nbytes, int device) {
  Staging& st = staging_for(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  cudaStream_t stream = current_stream();
  // Chunk i is queued before chunk i−1 is read out, so the DMA of one overlaps the memcpy of
  // the other. The stream orders every copy after the kernels that produced src.
  size_t pending_off = 0, pending_len = 0;
  int pending_k = -1;
  auto drain = [&] {
    LSF_CUDA_CHECK(cudaEventSynchronize(st.done[pending_k]));
    std::memcpy(dst + pending_off, st.buffer[pending_k], pending_len);
  };
  for (size_t off = 0, chunk = 0; off < nbytes; off += kStagingChunk, ++chunk) {
    const int k = int(chunk % 2);
    const size_t len = std::min(kStagingChunk, nbytes - off);
    LSF_CUDA_CHECK(cudaEventSynchronize(st.done[k]));
    LSF_CUDA_CHECK(cudaMemcpyAsync(st.buffer[k], src + off, len, cudaMemcpyDeviceToHost, stream));
    LSF_CUDA_CHECK(cudaEventRecord(st.done[k], stream));
    if (pending_k >= 0) drain();
    pending_off = off;
    pending_len = len;
    pending_k = k;
  }
  if (pending_k >= 0) drain();
}

void cross_device_copy(const Tensor& dst, const Tensor& src) {
  LSF_CHECK(dst.dtype() == src.dtype() && dst.numel() == src.numel())
      << "to: copying " << src.shape() << " (" << src.dtype() << ") on " << src.device() << " into "
      << dst.shape() << " (" << dst.dtype() << ") on " << dst.device() << ": shape or dtype differ";
  LSF_CHECK(dst.is_contiguous() && src.is_contiguous())
      << "to: cross-device copies need contiguous tensors (shapes " << src.shape() << " → " << dst.shape() << ")";
  const size_t nbytes = dst.nbytes();
  if (nbytes == 0) return;
  char* d = static_cast<char*>(dst.raw_data());
  const char* s = static_cast<const char*>(src.raw_data());
  const Device from = src.device(), to = dst.device();
  if (from.is_cpu()) {
    DeviceGuard guard(to.index);
    host_to_device(d, s, nbytes, to.index);
  } else if (to.is_cpu()) {
    DeviceGuard guard(from.index);
    device_to_host(d, s, nbytes, from.index);
  } else {
    // GPU ↔ GPU: the source's stream must have produced src before the destination's stream
    // reads it, and src may be freed (and its block reused on its own stream) as soon as we
    // return, so both sides synchronise. Device-to-device moves are rare (setup, not steps).
    {
      DeviceGuard guard(from.index);
      LSF_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
    }
    DeviceGuard guard(to.index);
    LSF_CUDA_CHECK(cudaMemcpyPeerAsync(d, to.index, s, from.index, nbytes, current_stream()));
    LSF_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
  }
}

}  // namespace

LSF_REGISTER_KERNEL(fill_kernel, DeviceType::CUDA, fill);
LSF_REGISTER_KERNEL(copy_kernel, DeviceType::CUDA, copy);
LSF_REGISTER_KERNEL(add_inplace_kernel, DeviceType::CUDA, add_inplace);
LSF_REGISTER_KERNEL(cross_device_copy_kernel, DeviceType::CUDA, cross_device_copy);

}  // namespace lsf::cuda
