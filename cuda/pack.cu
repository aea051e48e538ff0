// CUDA kernel of pack_sequences / unpack_sequences (ops/kernels/pack.h), with the CPU kernel's
// results (ops/cpu/pack.cpp): one thread per output element, each written once. An index
// outside its range is skipped by the copy and reported through the device error flag
// (cuda/kb_common.cuh) with the CPU's message.
#include "lsformer/cuda/kb_common.cuh"
#include "lsformer/ops/kernels/pack.h"

namespace lsf::cuda {
namespace {

// to_padded: padded [B, H, n, e] from packed [T, H·e] through slots [B·n] (−1: fill).
template <typename T>
__global__ void unpack_impl(T* __restrict__ padded, const T* __restrict__ packed, const int64_t* __restrict__ slots,
                            int64_t B, int64_t H, int64_t n, int64_t e, int64_t rows, T fill,
                            unsigned long long* flag) {
  const int64_t total = B * H * n * e;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t f = i % e, t = (i / e) % n, h = (i / (e * n)) % H, b = i / (e * n * H);
    const int64_t src = slots[b * n + t];
    if (src < -1 || src >= rows) {
      kb::record_error(flag, b * n + t);
      continue;
    }
    padded[i] = src < 0 ? fill : packed[(src * H + h) * e + f];
  }
}

// packed [T, H·e] from padded [B, H, n, e] through rows [T] (b·n + t).
template <typename T>
__global__ void pack_impl(T* __restrict__ packed, const T* __restrict__ padded, const int64_t* __restrict__ rows,
                          int64_t T_rows, int64_t H, int64_t n, int64_t e, int64_t slots, unsigned long long* flag) {
  const int64_t total = T_rows * H * e;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / (H * e), h = (i / e) % H, f = i % e;
    const int64_t bt = rows[r];
    if (bt < 0 || bt >= slots) {
      kb::record_error(flag, r);
      continue;
    }
    const int64_t b = bt / n, t = bt % n;
    packed[i] = padded[((b * H + h) * n + t) * e + f];
  }
}

void repack_rows(const Tensor& packed, const Tensor& padded, const Tensor& index, bool to_padded, double fill) {
  const int64_t B = padded.size(0), H = padded.size(1), n = padded.size(2), e = padded.size(3);
  const int64_t rows = packed.size(0), slots = B * n;
  DeviceGuard guard(padded.device().index);
  kb::ErrorFlag flag(padded.device().index);
  const char* op = to_padded ? "unpack_sequences" : "pack_sequences";
  kb::dispatch_f32_f64(packed.dtype(), op, [&]<typename T>() {
    const int64_t total = to_padded ? padded.numel() : packed.numel();
    if (total == 0) return;
    if (to_padded) {
      unpack_impl<T><<<blocks_for(total), kThreads, 0, current_stream()>>>(
          padded.data_ptr<T>(), packed.data_ptr<T>(), index.data_ptr<int64_t>(), B, H, n, e, rows, T(fill),
          flag.device_ptr());
    } else {
      pack_impl<T><<<blocks_for(total), kThreads, 0, current_stream()>>>(
          packed.data_ptr<T>(), padded.data_ptr<T>(), index.data_ptr<int64_t>(), rows, H, n, e, slots,
          flag.device_ptr());
    }
    LSF_CUDA_CHECK_LAUNCH("repack_rows_kernel");
  });
  const unsigned long long bad = flag.read();
  if (bad == kb::kNoError) return;
  const int64_t position = int64_t(bad);
  if (to_padded) {
    LSF_FAIL() << "unpack_sequences: slot " << position << " names packed row " << kb::read_index(index, position)
               << ", outside [-1, " << rows << ")";
  }
  LSF_FAIL() << "pack_sequences: packed row " << position << " names position " << kb::read_index(index, position)
             << ", outside [0, " << slots << ")";
}

}  // namespace

LSF_REGISTER_KERNEL(repack_rows_kernel, DeviceType::CUDA, repack_rows);

}  // namespace lsf::cuda
