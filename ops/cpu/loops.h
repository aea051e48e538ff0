// Loop machinery for CPU kernels: walking N same-shaped strided tensors together.
//
// Callers first broadcast inputs to the output shape (expand gives zero strides). The walk
// visits the dims in the memory order of the first operand (the output; outermost = largest
// stride first), merges dimensions that are contiguous with each other for every operand, then
// hands the kernel one innermost run at a time: a base pointer and a byte stride per operand
// and a run length. Runs are split over OpenMP threads when the tensor is large enough to pay
// for it. Walking in the output's memory order makes a permuted output (a head-split view, a
// transpose) one long run like a contiguous one instead of many short strided ones; every
// element is still visited once, so results do not depend on the order.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <omp.h>
#include <utility>
#include <vector>

#include "lsformer/engine/tensor.h"

namespace lsf::cpu {

// Element counts below this run on one thread: a parallel region costs a few microseconds.
constexpr int64_t kParallelGrain = 32768;

template <size_t N>
struct Runs {
  Shape shape;                               // merged shape; the last dim is the run
  std::array<Strides, N> strides;            // bytes
  std::array<char*, N> data;
  int64_t rows() const {
    int64_t r = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d) r *= shape[d];
    return r;
  }
  int64_t run_length() const { return shape.empty() ? 1 : shape.back(); }
};

template <size_t N>
Runs<N> make_runs(const std::array<const Tensor*, N>& ts) {
  const Shape& full = ts[0]->shape();
  Runs<N> r;
  for (size_t k = 0; k < N; ++k) r.data[k] = static_cast<char*>(ts[k]->raw_data());
  // The output's memory order (stable: equal strides keep their logical order).
  std::vector<size_t> order(full.size());
  std::iota(order.begin(), order.end(), size_t(0));
  const Strides& out_strides = ts[0]->strides();
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return out_strides[a] > out_strides[b]; });
  // Drop size-1 dims, then merge neighbours that are contiguous for every operand.
  for (size_t d : order) {
    if (full[d] == 1) continue;
    bool merge = !r.shape.empty();
    for (size_t k = 0; k < N && merge; ++k) {
      int64_t inner = ts[k]->strides()[d] * int64_t(ts[k]->element_size());
      merge = r.strides[k].back() == inner * full[d];
    }
    if (merge) {
      r.shape.back() *= full[d];
      for (size_t k = 0; k < N; ++k) r.strides[k].back() = ts[k]->strides()[d] * int64_t(ts[k]->element_size());
    } else {
      r.shape.push_back(full[d]);
      for (size_t k = 0; k < N; ++k) r.strides[k].push_back(ts[k]->strides()[d] * int64_t(ts[k]->element_size()));
    }
  }
  if (r.shape.empty()) {  // a single element
    r.shape.push_back(1);
    for (size_t k = 0; k < N; ++k) r.strides[k].push_back(0);
  }
  return r;
}

// fn(std::array<char*, N> ptrs, std::array<int64_t, N> byte_strides, int64_t n) for every run.
template <size_t N, typename RunFn>
void for_each_run(const std::array<const Tensor*, N>& ts, RunFn&& fn) {
  for (size_t k = 1; k < N; ++k)
    LSF_CHECK(ts[k]->shape() == ts[0]->shape()) << "internal: loop operands differ in shape";
  if (ts[0]->numel() == 0) return;
  Runs<N> r = make_runs<N>(ts);
  const int64_t rows = r.rows(), n = r.run_length();
  const size_t nd = r.shape.size();
  std::array<int64_t, N> inner;
  for (size_t k = 0; k < N; ++k) inner[k] = r.strides[k][nd - 1];
  if (rows == 1 && n >= 2 * kParallelGrain) {
    // One long run: split it into chunks across threads.
    const int64_t chunk = kParallelGrain;
    const int64_t chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      std::array<char*, N> p = r.data;
      for (size_t k = 0; k < N; ++k) p[k] += c * chunk * inner[k];
      fn(p, inner, std::min(chunk, n - c * chunk));
    }
    return;
  }
  // Rows [begin, end): the first row's pointers from its multi-index (divisions), then an
  // odometer over the outer dims. Why: runs can be short (32 floats of one head of a [B, n, h, e]
  // tensor), and a division per dim per run cost more than the run's arithmetic.
  auto do_rows = [&](int64_t begin, int64_t end) {
    if (begin >= end) return;
    const size_t outer = nd - 1;
    std::array<char*, N> p = r.data;
    Shape index(outer, 0);
    int64_t rem = begin;
    for (size_t d = outer; d-- > 0;) {
      index[d] = rem % r.shape[d];
      rem /= r.shape[d];
      for (size_t k = 0; k < N; ++k) p[k] += index[d] * r.strides[k][d];
    }
    for (int64_t row = begin;;) {
      fn(p, inner, n);
      if (++row == end) return;
      for (size_t d = outer; d-- > 0;) {  // the next row: carry through the outer dims
        if (++index[d] < r.shape[d]) {
          for (size_t k = 0; k < N; ++k) p[k] += r.strides[k][d];
          break;
        }
        index[d] = 0;
        for (size_t k = 0; k < N; ++k) p[k] -= (r.shape[d] - 1) * r.strides[k][d];
      }
    }
  };
  if (rows * n < kParallelGrain || rows == 1) {
    do_rows(0, rows);
    return;
  }
#pragma omp parallel
  {
    // The static schedule's split: thread t takes one contiguous block of rows.
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t base = rows / threads, extra = rows % threads;
    const int64_t begin = t * base + std::min(t, extra);
    do_rows(begin, begin + base + (t < extra ? 1 : 0));
  }
}

namespace detail {
// Calls fn.template operator()<M>() for the runtime value m < Max.
template <unsigned M, unsigned Max, typename Fn>
void with_mask(unsigned m, Fn&& fn) {
  if constexpr (M < Max) {
    if (m == M) {
      fn.template operator()<M>();
    } else {
      with_mask<M + 1, Max>(m, fn);
    }
  }
}

template <bool Broadcast, typename T>
inline T load(const char* p, int64_t i) {
  if constexpr (Broadcast) {
    return *reinterpret_cast<const T*>(p);
  } else {
    return reinterpret_cast<const T*>(p)[i];
  }
}

template <typename Out, typename... In, typename F, size_t... I>
void map_run(std::array<char*, sizeof...(In) + 1> p, std::array<int64_t, sizeof...(In) + 1> s,
             int64_t n, F& f, std::index_sequence<I...>) {
  // The common cases, which the compiler vectorises: every input either contiguous or a
  // broadcast scalar (stride 0, e.g. the 2 in x * 2). One instantiation per pattern.
  bool dense = s[0] == int64_t(sizeof(Out)) && ((s[I + 1] == int64_t(sizeof(In)) || s[I + 1] == 0) && ...);
  if (dense) {
    unsigned mask = ((s[I + 1] == 0 ? 1u << I : 0u) | ... | 0u);
    with_mask<0, (1u << sizeof...(In))>(mask, [&]<unsigned M>() {
      Out* o = reinterpret_cast<Out*>(p[0]);
      for (int64_t i = 0; i < n; ++i) o[i] = f(load<((M >> I) & 1u) != 0, In>(p[I + 1], i)...);
    });
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<Out*>(p[0] + i * s[0]) = f(*reinterpret_cast<const In*>(p[I + 1] + i * s[I + 1])...);
  }
}
}  // namespace detail

// out[i] = f(in0[i], in1[i], ...) over same-shaped tensors of element types Out, In...
template <typename Out, typename... In, typename F, typename... Ts>
void map(const Tensor& out, F f, const Ts&... inputs) {
  static_assert(sizeof...(In) == sizeof...(Ts));
  constexpr size_t N = sizeof...(In) + 1;
  for_each_run<N>(std::array<const Tensor*, N>{&out, &inputs...},
                  [&](std::array<char*, N> p, std::array<int64_t, N> s, int64_t n) {
                    detail::map_run<Out, In...>(p, s, n, f, std::index_sequence_for<In...>{});
                  });
}

}  // namespace lsf::cpu
