// CUDA embedding kernels (forward, backward) and one_hot, with the contracts of ops/embedding.h
// and the results of ops/cpu/embedding.cpp.
//
// Forward: a row copy, 16-byte units when the rows allow it.
//
// Backward, deterministic and bit-identical to the CPU (no float atomics): the positions
// 0 .. n − 1 are sorted by id with CUB's radix sort, which is stable, so each id's positions
// stay in the order they occur — the CPU's counting sort gives the same lists. Then one thread
// block per (first position of an id's run, tile of columns) owns those dweight elements and
// adds the run's dy rows in order, in double, starting from dweight's value, rounding once at
// the end: the CPU's arithmetic exactly. A hot id (a frequent token) is summed serially per
// column, which is what determinism costs; its columns still spread over threads.
// padding_idx rows get nothing; ids outside [0, V) raise the CPU's lsf::Error through the
// device error flag (cuda/kb_common.cuh) after the kernels, which skip them.
#include <cub/cub.cuh>

#include "lsformer/cuda/kb_common.cuh"
#include "lsformer/ops/embedding.h"
#include "lsformer/ops/kernels/embedding.h"

namespace lsf::cuda {
namespace {

using kb::from_double;
using kb::to_compute;

// ---- kernels ----

// y [n, row] = w [V, row] rows picked by ids [n], in units U (row counted in units).
template <typename U, typename I>
__global__ void embedding_forward_impl(U* __restrict__ y, const U* __restrict__ w, const I* __restrict__ ids,
                                       int64_t n, int64_t row, int64_t V) {
  const int64_t total = n * row;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / row, c = e % row;
    const int64_t v = int64_t(ids[i]);
    if (v < 0 || v >= V) continue;  // reported by the range check
    y[e] = w[v * row + c];
  }
}

// positions [n] ← 0 .. n − 1 (the values the radix sort carries along with the ids).
__global__ void iota_kernel(int64_t* __restrict__ positions, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    positions[i] = i;
}

// dweight [V, D] += dy [n, D] rows grouped by sorted ids [n] (positions [n] in occurrence order
// within each id). Block x = a sorted position p; it works only if p starts a run of equal ids.
// Block y = a tile of blockDim.x columns.
template <typename T, typename I>
__global__ void embedding_backward_impl(T* __restrict__ dweight, const T* __restrict__ dy,
                                        const I* __restrict__ sorted_ids, const int64_t* __restrict__ positions,
                                        int64_t n, int64_t D, int64_t V, int64_t padding_idx) {
  const int64_t p = blockIdx.x;
  const int64_t v = int64_t(sorted_ids[p]);
  if (p > 0 && int64_t(sorted_ids[p - 1]) == v) return;  // not the start of a run
  if (v < 0 || v >= V || v == padding_idx) return;
  const int64_t c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= D) return;
  T* dst = dweight + v * D + c;
  double acc = double(to_compute(*dst));
  for (int64_t q = p; q < n && int64_t(sorted_ids[q]) == v; ++q) acc += double(to_compute(dy[positions[q] * D + c]));
  *dst = from_double<T>(acc);
}

// out [n, C] i64 (zeroed): out[i, ids[i]] = 1.
template <typename I>
__global__ void one_hot_impl(int64_t* __restrict__ out, const I* __restrict__ ids, int64_t n, int64_t C,
                             unsigned long long* flag) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = int64_t(ids[i]);
    if (v < 0 || v >= C) {
      kb::record_error(flag, i);
      continue;
    }
    out[i * C + v] = 1;
  }
}

// ---- helpers ----

// The first id outside [0, limit) in the flag → the CPU's message for `op`.
int64_t first_bad(const kb::ErrorFlag& flag) {
  const unsigned long long bad = flag.read();
  return bad == kb::kNoError ? -1 : int64_t(bad);
}

// ---- entries ----

void embedding_forward(const Tensor& y, const Tensor& weight, const Tensor& ids) {
  const int64_t n = ids.numel(), V = weight.shape()[0], D = weight.shape()[1];
  DeviceGuard guard(weight.device().index);
  kb::ErrorFlag flag(weight.device().index);
  kb::dispatch_index(ids.dtype(), "embedding", [&]<typename I>() {
    const I* id = static_cast<const I*>(ids.raw_data());
    kb::launch_check_range<I>(id, n, V, flag.device_ptr());
    const int64_t row_bytes = D * int64_t(weight.element_size());
    if (n == 0 || row_bytes == 0) return;
    // The widest unit that divides the row and the alignment of both tables.
    const uintptr_t align = reinterpret_cast<uintptr_t>(y.raw_data()) | reinterpret_cast<uintptr_t>(weight.raw_data());
    size_t unit = 16;
    while (unit > 1 && (row_bytes % int64_t(unit) != 0 || align % unit != 0)) unit /= 2;
    auto launch = [&]<typename U>() {
      const int64_t row = row_bytes / int64_t(sizeof(U));
      embedding_forward_impl<U, I><<<blocks_for(n * row), kThreads, 0, current_stream()>>>(
          static_cast<U*>(y.raw_data()), static_cast<const U*>(weight.raw_data()), id, n, row, V);
      LSF_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
    };
    if (unit == 16) {
      launch.template operator()<uint4>();
    } else {
      kb::dispatch_bits(unit, "embedding", launch);
    }
  });
  const int64_t bad = first_bad(flag);
  LSF_CHECK(bad < 0) << "embedding: id " << kb::read_index(ids, bad) << " (at position " << bad
                     << ") is out of range for " << V << " embeddings (weight shape " << weight.shape() << ")";
}

void embedding_backward(const Tensor& dweight, const Tensor& dy, const Tensor& ids, int64_t padding_idx) {
  const int64_t n = ids.numel(), V = dweight.shape()[0], D = dweight.shape()[1];
  if (n == 0 || D == 0) return;
  LSF_CHECK(n < (int64_t(1) << 31)) << "embedding_backward: " << n << " ids exceed the GPU kernel's limit of 2^31";
  LSF_CHECK((D + kThreads - 1) / kThreads < 65536)
      << "embedding_backward: embedding dim " << D << " exceeds the GPU kernel's limit";
  DeviceGuard guard(dweight.device().index);
  kb::ErrorFlag flag(dweight.device().index);
  cudaStream_t stream = current_stream();
  kb::dispatch_index(ids.dtype(), "embedding_backward", [&]<typename I>() {
    const I* id = static_cast<const I*>(ids.raw_data());
    kb::launch_check_range<I>(id, n, V, flag.device_ptr());
    // Stable sort of (id, position) pairs by id.
    kb::DeviceBuffer keys_out(size_t(n) * sizeof(I)), positions_in(size_t(n) * sizeof(int64_t)),
        positions_out(size_t(n) * sizeof(int64_t));
    iota_kernel<<<blocks_for(n), kThreads, 0, stream>>>(positions_in.as<int64_t>(), n);
    LSF_CUDA_CHECK_LAUNCH("iota_kernel");
    size_t temp_bytes = 0;
    LSF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, id, keys_out.as<I>(),
                                                   positions_in.as<int64_t>(), positions_out.as<int64_t>(),
                                                   int(n), 0, int(sizeof(I) * 8), stream));
    kb::DeviceBuffer temp(temp_bytes);
    LSF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.as<void>(), temp_bytes, id, keys_out.as<I>(),
                                                   positions_in.as<int64_t>(), positions_out.as<int64_t>(),
                                                   int(n), 0, int(sizeof(I) * 8), stream));
    kb::dispatch_floating(dweight.dtype(), "embedding_backward", [&]<typename T>() {
      const dim3 grid(unsigned(n), unsigned((D + kThreads - 1) / kThreads));
      embedding_backward_impl<T, I><<<grid, kThreads, 0, stream>>>(
          static_cast<T*>(dweight.raw_data()), static_cast<const T*>(dy.raw_data()), keys_out.as<I>(),
          positions_out.as<int64_t>(), n, D, V, padding_idx);
      LSF_CUDA_CHECK_LAUNCH("embedding_backward_kernel");
    });
  });
  const int64_t bad = first_bad(flag);
  LSF_CHECK(bad < 0) << "embedding_backward: id " << kb::read_index(ids, bad) << " (at position " << bad
                     << ") is out of range for " << V << " embeddings";
}

void one_hot(const Tensor& out, const Tensor& ids) {
  const int64_t n = ids.numel(), C = out.shape()[1];
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  kb::ErrorFlag flag(out.device().index);
  kb::dispatch_index(ids.dtype(), "one_hot", [&]<typename I>() {
    one_hot_impl<I><<<blocks_for(n), kThreads, 0, current_stream()>>>(
        static_cast<int64_t*>(out.raw_data()), static_cast<const I*>(ids.raw_data()), n, C, flag.device_ptr());
    LSF_CUDA_CHECK_LAUNCH("one_hot_kernel");
  });
  const int64_t bad = first_bad(flag);
  if (bad < 0) return;
  const int64_t value = kb::read_index(ids, bad);
  LSF_CHECK(value >= 0) << "one_hot: class values must be non-negative, got " << value << " (at position " << bad
                        << ")";
  LSF_FAIL() << "one_hot: class value " << value << " (at position " << bad << ") is out of range for num_classes "
             << C;
}

}  // namespace

LSF_REGISTER_KERNEL(embedding_forward_kernel, DeviceType::CUDA, embedding_forward);
LSF_REGISTER_KERNEL(embedding_backward_kernel, DeviceType::CUDA, embedding_backward);
LSF_REGISTER_KERNEL(one_hot_kernel, DeviceType::CUDA, one_hot);

}  // namespace lsf::cuda
