// CPU kernels for selection by mask and index: where, gather / scatter_add, index_select /
// index_add.
//
// Indices are range-checked in one pass before any memory is touched (an exception must not
// leave an OpenMP region). The accumulating kernels never race and are deterministic: work is
// split over a dimension whose output elements are disjoint, and each output element is
// summed by one thread in index order — scatter_add over the lines that are not `dim`,
// index_add over outer slices × column blocks.
#include <omp.h>

#include <algorithm>

#include "lsformer/engine/region_errors.h"
#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/index.h"
#include "lsformer/ops/kernels/index.h"

namespace lsf::cpu {
namespace {

// Every index in [0, size), or an lsf::Error naming op, the offending value and position.
// idx: `n` contiguous values; `what` names the indexed tensor of shape `shape` ("input" or
// "output"). A min/max pass first, so valid indices (the usual case) cost one parallel read.
template <typename I>
void check_range(const char* op, const I* idx, int64_t n, int64_t size, int64_t dim, const char* what,
                 const Shape& shape) {
  if (n == 0) return;
  I lo = idx[0], hi = idx[0];
#pragma omp parallel for reduction(min : lo) reduction(max : hi) schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, idx[i]);
    hi = std::max(hi, idx[i]);
  }
  if (lo >= 0 && int64_t(hi) < size) return;
  for (int64_t i = 0; i < n; ++i)
    LSF_CHECK(idx[i] >= 0 && int64_t(idx[i]) < size)
        << op << ": index " << int64_t(idx[i]) << " (at flat position " << i << " of the index)"
        << " is out of range for dimension " << dim << " of size " << size << " (" << what << " shape "
        << shape << ")";
}

// Walks the lines of the iteration space `shape` along `dim`: one call per coordinate of the
// other dims, fn(offsets) with each operand's element offset at the line's start. Each
// thread takes one block of consecutive lines and steps through it like an odometer.
template <size_t N, typename Fn>
void for_each_line(const Shape& shape, int64_t dim, const std::array<Strides, N>& strides, Fn&& fn) {
  Shape outer;
  std::array<Strides, N> st;
  for (int64_t k = 0; k < int64_t(shape.size()); ++k) {
    if (k == dim) continue;
    outer.push_back(shape[k]);
    for (size_t t = 0; t < N; ++t) st[t].push_back(strides[t][k]);
  }
  const int64_t lines = shape_numel(outer);
  if (lines == 0 || shape[dim] == 0) return;
  RegionErrors errors;  // pos is allocated inside the region
#pragma omp parallel if (lines * shape[dim] >= kParallelGrain && lines > 1)
  errors.run([&] {
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t begin = lines * me / threads, end = lines * (me + 1) / threads;
    if (begin < end) {
      std::vector<int64_t> pos(outer.size());
      std::array<int64_t, N> off{};
      int64_t rem = begin;
      for (size_t k = outer.size(); k-- > 0;) {
        pos[k] = rem % outer[k];
        rem /= outer[k];
        for (size_t t = 0; t < N; ++t) off[t] += pos[k] * st[t][k];
      }
      for (int64_t line = begin; line < end; ++line) {
        fn(off);
        for (size_t k = outer.size(); k-- > 0;) {
          for (size_t t = 0; t < N; ++t) off[t] += st[t][k];
          if (++pos[k] < outer[k]) break;
          for (size_t t = 0; t < N; ++t) off[t] -= st[t][k] * outer[k];
          pos[k] = 0;
        }
      }
    }
  });
  errors.rethrow();
}

// where is a bitwise select, so it works on unsigned integers of the element's size whatever
// the dtype: out = (a & m) | (b & ~m) with m all ones where cond holds. Unlike `c ? a : b` on
// floats, GCC vectorises this. Bools are stored as 0 or 1.
template <typename U>
U select_bits(uint8_t c, U a, U b) {
  const U m = U(0) - U(c);
  return U((a & m) | (b & U(~m)));
}

template <typename U>
void where_bits(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  constexpr int64_t one = int64_t(sizeof(U));
  for_each_run<4>({&out, &cond, &a, &b}, [&](std::array<char*, 4> p, std::array<int64_t, 4> s, int64_t n) {
    const uint8_t* c = reinterpret_cast<const uint8_t*>(p[1]);
    U* o = reinterpret_cast<U*>(p[0]);
    const U* pa = reinterpret_cast<const U*>(p[2]);
    const U* pb = reinterpret_cast<const U*>(p[3]);
    if (s[0] == one && s[1] == 1 && s[2] == one && s[3] == one) {
      for (int64_t i = 0; i < n; ++i) o[i] = select_bits<U>(c[i], pa[i], pb[i]);
    } else if (s[0] == one && s[1] == 1 && s[2] == 0 && s[3] == one) {  // masked_fill
      const U av = *pa;
      for (int64_t i = 0; i < n; ++i) o[i] = select_bits<U>(c[i], av, pb[i]);
    } else if (s[0] == one && s[1] == 1 && s[2] == one && s[3] == 0) {
      const U bv = *pb;
      for (int64_t i = 0; i < n; ++i) o[i] = select_bits<U>(c[i], pa[i], bv);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<U*>(p[0] + i * s[0]) =
            select_bits<U>(*reinterpret_cast<const uint8_t*>(p[1] + i * s[1]),
                           *reinterpret_cast<const U*>(p[2] + i * s[2]), *reinterpret_cast<const U*>(p[3] + i * s[3]));
    }
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  switch (out.element_size()) {
    case 1: where_bits<uint8_t>(out, cond, a, b); break;
    case 2: where_bits<uint16_t>(out, cond, a, b); break;
    case 4: where_bits<uint32_t>(out, cond, a, b); break;
    case 8: where_bits<uint64_t>(out, cond, a, b); break;
    default: LSF_FAIL() << "where: unsupported element size " << out.element_size();
  }
}

// out [index.shape] = x [.., size, ..] gathered along dim.
void gather(const Tensor& out, const Tensor& x, const Tensor& index, int64_t dim) {
  Tensor idx = contiguous_detached(index);
  const int64_t size = x.shape()[dim], n = idx.shape()[dim];
  const int64_t x_step = x.strides()[dim], i_step = idx.strides()[dim], o_step = out.strides()[dim];
  dispatch_index(idx.dtype(), "gather", [&]<typename I>() {
    const I* pi = idx.data_ptr<I>();
    check_range("gather", pi, idx.numel(), size, dim, "input", x.shape());
    dispatch_all(x.dtype(), [&]<typename T>() {
      const T* px = static_cast<const T*>(x.raw_data());
      T* po = static_cast<T*>(out.raw_data());
      for_each_line<3>(idx.shape(), dim, {out.strides(), x.strides(), idx.strides()},
                       [&](const std::array<int64_t, 3>& off) {
                         T* o = po + off[0];
                         const T* xl = px + off[1];
                         const I* il = pi + off[2];
                         for (int64_t k = 0; k < n; ++k) o[k * o_step] = xl[int64_t(il[k * i_step]) * x_step];
                       });
    });
  });
}

// out [.., size, ..] += src [index.shape] scattered along dim. Lines that differ outside dim
// write disjoint lines of out, so they run in parallel; within a line the order is k = 0, 1, ...
void scatter_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t dim) {
  Tensor idx = contiguous_detached(index);
  const int64_t size = out.shape()[dim], n = idx.shape()[dim];
  const int64_t o_step = out.strides()[dim], i_step = idx.strides()[dim], s_step = src.strides()[dim];
  dispatch_index(idx.dtype(), "scatter_add", [&]<typename I>() {
    const I* pi = idx.data_ptr<I>();
    check_range("scatter_add", pi, idx.numel(), size, dim, "output", out.shape());
    dispatch_numeric(out.dtype(), "scatter_add", [&]<typename T>() {
      const T* ps = static_cast<const T*>(src.raw_data());
      T* po = static_cast<T*>(out.raw_data());
      for_each_line<3>(idx.shape(), dim, {out.strides(), src.strides(), idx.strides()},
                       [&](const std::array<int64_t, 3>& off) {
                         T* o = po + off[0];
                         const T* sl = ps + off[1];
                         const I* il = pi + off[2];
                         for (int64_t k = 0; k < n; ++k) o[int64_t(il[k * i_step]) * o_step] += sl[k * s_step];
                       });
    });
  });
}

// [outer, size, inner] split of a shape around dim.
struct Split3 {
  int64_t outer = 1, size = 1, inner = 1;
  Split3(const Shape& shape, int64_t dim) {
    for (int64_t k = 0; k < int64_t(shape.size()); ++k)
      (k < dim ? outer : k == dim ? size : inner) *= shape[k];
  }
};

// out [outer, n, inner] = x [outer, size, inner] rows picked by index [n].
void index_select(const Tensor& out, const Tensor& x, const Tensor& index, int64_t dim) {
  Tensor xc = x.detach().contiguous();
  Tensor idx = contiguous_detached(index);
  const Split3 s(xc.shape(), dim);
  const int64_t n = idx.numel();
  dispatch_index(idx.dtype(), "index_select", [&]<typename I>() {
    const I* pi = idx.data_ptr<I>();
    check_range("index_select", pi, n, s.size, dim, "input", x.shape());
    if (out.numel() == 0) return;
    LSF_CHECK(out.is_contiguous()) << "index_select: internal error: the output must be contiguous";
    dispatch_all(x.dtype(), [&]<typename T>() {
      const T* px = static_cast<const T*>(xc.raw_data());
      T* po = static_cast<T*>(out.raw_data());
      const int64_t rows = s.outer * n;
#pragma omp parallel for schedule(static) if (rows * s.inner >= kParallelGrain && rows > 1)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t o = r / n, j = r % n;
        std::copy_n(px + (o * s.size + int64_t(pi[j])) * s.inner, s.inner, po + r * s.inner);
      }
    });
  });
}

// out [outer, size, inner] += src [outer, n, inner] rows added at index [n]. A task owns one
// block of columns of one outer slice and adds every row into it in index order, so tasks
// never share an output element and the summation order does not depend on the thread count.
void index_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t dim) {
  Tensor sc = src.detach().contiguous();
  Tensor idx = contiguous_detached(index);
  const Split3 s(out.shape(), dim);
  const int64_t n = idx.numel();
  dispatch_index(idx.dtype(), "index_add", [&]<typename I>() {
    const I* pi = idx.data_ptr<I>();
    check_range("index_add", pi, n, s.size, dim, "output", out.shape());
    if (out.numel() == 0 || sc.numel() == 0) return;
    LSF_CHECK(out.is_contiguous()) << "index_add: internal error: the output must be contiguous";
    dispatch_numeric(out.dtype(), "index_add", [&]<typename T>() {
      const T* ps = static_cast<const T*>(sc.raw_data());
      T* po = static_cast<T*>(out.raw_data());
      // Column blocks: about one per thread, whole 64-byte lines to avoid false sharing.
      const int64_t per_line = std::max<int64_t>(1, 64 / int64_t(sizeof(T)));
      int64_t block = (s.inner + omp_get_max_threads() - 1) / omp_get_max_threads();
      block = std::max<int64_t>(per_line, (block + per_line - 1) / per_line * per_line);
      const int64_t blocks = (s.inner + block - 1) / block;
      const int64_t tasks = s.outer * blocks;
#pragma omp parallel for schedule(static) if (s.outer * n * s.inner >= kParallelGrain && tasks > 1)
      for (int64_t t = 0; t < tasks; ++t) {
        const int64_t o = t / blocks, c0 = (t % blocks) * block, c1 = std::min(s.inner, c0 + block);
        T* out_slice = po + o * s.size * s.inner;
        const T* src_slice = ps + o * n * s.inner;
        for (int64_t j = 0; j < n; ++j) {
          T* orow = out_slice + int64_t(pi[j]) * s.inner;
          const T* srow = src_slice + j * s.inner;
          for (int64_t c = c0; c < c1; ++c) orow[c] += srow[c];
        }
      }
    });
  });
}

}  // namespace

LSF_REGISTER_KERNEL(where_kernel, DeviceType::CPU, where);
LSF_REGISTER_KERNEL(gather_kernel, DeviceType::CPU, gather);
LSF_REGISTER_KERNEL(scatter_add_kernel, DeviceType::CPU, scatter_add);
LSF_REGISTER_KERNEL(index_select_kernel, DeviceType::CPU, index_select);
LSF_REGISTER_KERNEL(index_add_kernel, DeviceType::CPU, index_add);

}  // namespace lsf::cpu
