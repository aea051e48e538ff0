// CPU embedding kernels: row gather (forward), deterministic scatter-add (backward), one_hot.
//
// Ids are validated in a serial pass before any parallel loop, so a bad id throws from the
// calling thread (never from inside an OpenMP region) and no memory outside the table is read.
//
// Backward without atomics or races: ids are bucketed by row (a counting sort that keeps the
// order in which ids occur), then each (row, column-chunk) of dweight is owned by one thread,
// which adds its dy rows in occurrence order, in double. The sum for every element is thus
// the same whatever the thread count, and a row hit many times (a frequent token) is split
// over threads by its columns.
#include <algorithm>
#include <cstring>
#include <vector>

#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/embedding.h"
#include "lsformer/ops/kernels/embedding.h"

namespace lsf::cpu {
namespace {

// Columns per backward work item: enough contiguous doubles to stream well, small enough to
// spread a single hot row over the threads.
constexpr int64_t kBackwardChunk = 256;

// Position of the first id outside [0, limit), or −1 when all are in range.
template <typename I>
int64_t first_out_of_range(const I* ids, int64_t n, int64_t limit) {
  for (int64_t i = 0; i < n; ++i)
    if (int64_t(ids[i]) < 0 || int64_t(ids[i]) >= limit) return i;
  return -1;
}

void embedding_forward(const Tensor& y, const Tensor& weight, const Tensor& ids) {
  const int64_t n = ids.numel(), V = weight.shape()[0], D = weight.shape()[1];
  dispatch_index(ids.dtype(), "embedding", [&]<typename I>() {
    const I* id = ids.data_ptr<I>();
    const int64_t bad = first_out_of_range(id, n, V);
    LSF_CHECK(bad < 0) << "embedding: id " << int64_t(id[bad]) << " (at position " << bad
                       << ") is out of range for " << V << " embeddings (weight shape "
                       << weight.shape() << ")";
    dispatch_float(weight.dtype(), "embedding", [&]<typename T>() {
      const T* w = weight.data_ptr<T>();
      T* out = y.data_ptr<T>();
#pragma omp parallel for schedule(static) if (n * D >= kParallelGrain)
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(out + i * D, w + int64_t(id[i]) * D, size_t(D) * sizeof(T));
    });
  });
}

void embedding_backward(const Tensor& dweight, const Tensor& dy, const Tensor& ids, int64_t padding_idx) {
  const int64_t n = ids.numel(), V = dweight.shape()[0], D = dweight.shape()[1];
  if (n == 0 || D == 0) return;
  // Counting sort of positions by id; start[v] .. start[v + 1] are the positions of id v.
  std::vector<int64_t> start(size_t(V) + 1, 0), order;
  dispatch_index(ids.dtype(), "embedding_backward", [&]<typename I>() {
    const I* id = ids.data_ptr<I>();
    const int64_t bad = first_out_of_range(id, n, V);
    LSF_CHECK(bad < 0) << "embedding_backward: id " << int64_t(id[bad]) << " (at position " << bad
                       << ") is out of range for " << V << " embeddings";
    for (int64_t i = 0; i < n; ++i)
      if (int64_t(id[i]) != padding_idx) ++start[size_t(id[i]) + 1];
    for (int64_t v = 0; v < V; ++v) start[v + 1] += start[v];
    order.resize(size_t(start[V]));
    std::vector<int64_t> cursor(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < n; ++i)
      if (int64_t(id[i]) != padding_idx) order[size_t(cursor[size_t(id[i])]++)] = i;
  });
  std::vector<int64_t> rows;  // the rows that receive gradient
  for (int64_t v = 0; v < V; ++v)
    if (start[v + 1] > start[v]) rows.push_back(v);
  const int64_t chunks = (D + kBackwardChunk - 1) / kBackwardChunk;
  const int64_t items = int64_t(rows.size()) * chunks;
  dispatch_float(dweight.dtype(), "embedding_backward", [&]<typename T>() {
    const T* g = dy.data_ptr<T>();
    T* dw = dweight.data_ptr<T>();
#pragma omp parallel if (int64_t(order.size()) * D >= kParallelGrain)
    {
      double acc[kBackwardChunk];  // on the stack: nothing inside the region can fail to allocate
#pragma omp for schedule(dynamic, 4)
      for (int64_t item = 0; item < items; ++item) {
        const int64_t v = rows[size_t(item / chunks)];
        const int64_t c0 = (item % chunks) * kBackwardChunk, c1 = std::min(D, c0 + kBackwardChunk);
        T* dst = dw + v * D;
        for (int64_t c = c0; c < c1; ++c) acc[c - c0] = double(dst[c]);
        for (int64_t p = start[v]; p < start[v + 1]; ++p) {
          const T* src = g + order[size_t(p)] * D;
          for (int64_t c = c0; c < c1; ++c) acc[c - c0] += double(src[c]);
        }
        for (int64_t c = c0; c < c1; ++c) dst[c] = T(acc[c - c0]);
      }
    }
  });
}

void one_hot(const Tensor& out, const Tensor& ids) {
  const int64_t n = ids.numel(), C = out.shape()[1];
  int64_t* o = out.data_ptr<int64_t>();
  dispatch_index(ids.dtype(), "one_hot", [&]<typename I>() {
    const I* id = ids.data_ptr<I>();
    const int64_t bad = first_out_of_range(id, n, C);
    LSF_CHECK(bad < 0 || id[bad] >= 0) << "one_hot: class values must be non-negative, got "
                                       << int64_t(id[bad]) << " (at position " << bad << ")";
    LSF_CHECK(bad < 0) << "one_hot: class value " << int64_t(id[bad]) << " (at position " << bad
                       << ") is out of range for num_classes " << C;
    for (int64_t i = 0; i < n; ++i) o[i * C + int64_t(id[i])] = 1;
  });
}

}  // namespace

LSF_REGISTER_KERNEL(embedding_forward_kernel, DeviceType::CPU, embedding_forward);
LSF_REGISTER_KERNEL(embedding_backward_kernel, DeviceType::CPU, embedding_backward);
LSF_REGISTER_KERNEL(one_hot_kernel, DeviceType::CPU, one_hot);

}  // namespace lsf::cpu
