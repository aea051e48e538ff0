// CUDA kernels for selection by mask and index: where, gather / scatter_add, index_select /
// index_add, with the contracts of ops/index.h and the results of ops/cpu/index.cpp.
//
// Range checks: a check kernel records the first out-of-range flat position of the index in the
// device error flag (cuda/kb_common.cuh); the main kernel skips bad indices (no access outside
// a tensor ever happens); the host then reads the flag (one stream synchronisation per call)
// and raises the CPU's lsf::Error, naming the op, the index value and its position. On error
// the output may be partly written, which the CPU avoids by checking first.
//
// Determinism without atomics: the accumulating kernels give each output element to one
// thread, which adds its contributions in index order, rounding to the element type after each
// addition exactly as the CPU does, so results are bit-identical to the CPU's:
//   scatter_add: one thread per line (the coordinates off `dim`); lines write disjoint outputs.
//   index_add:   one thread per (outer slice, inner column); it walks j = 0 .. n − 1.
// The price is serial work along `dim` per thread, fine for gradient shapes (many lines or
// columns), slow for a single very long line.
#include "lsformer/cuda/kb_common.cuh"
#include "lsformer/ops/index.h"
#include "lsformer/ops/kernels/index.h"

namespace lsf::cuda {
namespace {

using kb::from_compute;
using kb::to_compute;

// acc + v rounded to T (bf16 / f16 through float, integers with C++'s wrap-around as the CPU).
template <typename T>
__device__ __forceinline__ T add_rounded(T acc, T v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>) {
    return from_compute<T>(to_compute(acc) + to_compute(v));
  } else {
    return T(acc + v);
  }
}

// ---- kernels ----

// out = cond ? a : b over the space of out (operands: out, cond, a, b), as bits of size U.
template <typename U>
__global__ void where_kernel_impl(char* out, const uint8_t* cond, const char* a, const char* b,
                                  OffsetCalc<4> space, int64_t n) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const Offsets<4> off = space.get(e);
    const U* src = reinterpret_cast<const U*>(cond[off.v[1]] ? a : b) + (cond[off.v[1]] ? off.v[2] : off.v[3]);
    reinterpret_cast<U*>(out)[off.v[0]] = *src;
  }
}

// out[p] = x[p with p[dim] ← index[p]] over index's space (operands: out, x with dim's stride
// zeroed, index); x_step is x's stride along dim.
template <typename U, typename I>
__global__ void gather_kernel_impl(U* __restrict__ out, const U* __restrict__ x, const I* __restrict__ idx,
                                   OffsetCalc<3> space, int64_t n, int64_t size, int64_t x_step) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const Offsets<3> off = space.get(e);
    const int64_t k = int64_t(idx[off.v[2]]);
    if (k < 0 || k >= size) continue;  // reported by the range check
    out[off.v[0]] = x[off.v[1] + k * x_step];
  }
}

// One thread per line of index's space (the space has size 1 at dim; operands: out with dim's
// stride zeroed, src, index): out[line, index[line, k]] += src[line, k] for k = 0 .. len − 1.
template <typename T, typename I>
__global__ void scatter_add_kernel_impl(T* __restrict__ out, const T* __restrict__ src, const I* __restrict__ idx,
                                        OffsetCalc<3> lines, int64_t num_lines, int64_t len, int64_t size,
                                        int64_t o_step, int64_t s_step, int64_t i_step) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < num_lines;
       e += int64_t(gridDim.x) * blockDim.x) {
    const Offsets<3> off = lines.get(e);
    for (int64_t k = 0; k < len; ++k) {
      const int64_t j = int64_t(idx[off.v[2] + k * i_step]);
      if (j < 0 || j >= size) continue;
      T& o = out[off.v[0] + j * o_step];
      o = add_rounded(o, src[off.v[1] + k * s_step]);
    }
  }
}

// out [outer, n, inner] (contiguous) = x [outer, size, inner] rows picked by idx [n].
template <typename U, typename I>
__global__ void index_select_kernel_impl(U* __restrict__ out, const U* __restrict__ x, const I* __restrict__ idx,
                                         int64_t total, int64_t n, int64_t size, int64_t inner) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = e % inner, r = e / inner;
    const int64_t j = r % n, o = r / n;
    const int64_t k = int64_t(idx[j]);
    if (k < 0 || k >= size) continue;
    out[e] = x[(o * size + k) * inner + c];
  }
}

// out [outer, size, inner] += src [outer, n, inner] at rows idx [n]; one thread per
// (outer, column), adding j = 0 .. n − 1 in order.
template <typename T, typename I>
__global__ void index_add_kernel_impl(T* __restrict__ out, const T* __restrict__ src, const I* __restrict__ idx,
                                      int64_t outer, int64_t n, int64_t size, int64_t inner) {
  const int64_t columns = outer * inner;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < columns;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = e % inner, o = e / inner;
    T* out_slice = out + o * size * inner + c;
    const T* src_slice = src + o * n * inner + c;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t k = int64_t(idx[j]);
      if (k < 0 || k >= size) continue;
      out_slice[k * inner] = add_rounded(out_slice[k * inner], src_slice[j * inner]);
    }
  }
}

// ---- range checks ----

// Runs the check kernel on idx (contiguous) into `flag`; the caller launches the main kernel
// and then calls raise_if_bad.
template <typename I>
void start_check(const kb::ErrorFlag& flag, const Tensor& idx, int64_t size) {
  kb::launch_check_range<I>(static_cast<const I*>(idx.raw_data()), idx.numel(), size, flag.device_ptr());
}

// The CPU's message (ops/cpu/index.cpp check_range).
void raise_if_bad(const kb::ErrorFlag& flag, const char* op, const Tensor& idx, int64_t size, int64_t dim,
                  const char* what, const Shape& shape) {
  const unsigned long long bad = flag.read();
  if (bad == kb::kNoError) return;
  const int64_t position = int64_t(bad);
  LSF_FAIL() << op << ": index " << kb::read_index(idx, position) << " (at flat position " << position
             << " of the index)" << " is out of range for dimension " << dim << " of size " << size << " ("
             << what << " shape " << shape << ")";
}

// ---- entries ----

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  const auto space =
      make_offset_calc<4>(out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()}, "where");
  kb::dispatch_bits(out.element_size(), "where", [&]<typename U>() {
    where_kernel_impl<U><<<blocks_for(n), kThreads, 0, current_stream()>>>(
        static_cast<char*>(out.raw_data()), static_cast<const uint8_t*>(cond.raw_data()),
        static_cast<const char*>(a.raw_data()), static_cast<const char*>(b.raw_data()), space, n);
    LSF_CUDA_CHECK_LAUNCH("where_kernel");
  });
}

void gather(const Tensor& out, const Tensor& x, const Tensor& index, int64_t dim) {
  Tensor idx = index.detach().contiguous();
  const int64_t size = x.shape()[size_t(dim)], n = idx.numel();
  DeviceGuard guard(x.device().index);
  kb::ErrorFlag flag(x.device().index);
  Strides x_strides = x.strides();
  const int64_t x_step = x_strides[size_t(dim)];
  x_strides[size_t(dim)] = 0;
  const auto space = make_offset_calc<3>(idx.shape(), {&out.strides(), &x_strides, &idx.strides()}, "gather");
  kb::dispatch_index(idx.dtype(), "gather", [&]<typename I>() {
    start_check<I>(flag, idx, size);
    if (n > 0) {
      kb::dispatch_bits(x.element_size(), "gather", [&]<typename U>() {
        gather_kernel_impl<U, I><<<blocks_for(n), kThreads, 0, current_stream()>>>(
            static_cast<U*>(out.raw_data()), static_cast<const U*>(x.raw_data()),
            static_cast<const I*>(idx.raw_data()), space, n, size, x_step);
        LSF_CUDA_CHECK_LAUNCH("gather_kernel");
      });
    }
  });
  raise_if_bad(flag, "gather", idx, size, dim, "input", x.shape());
}

void scatter_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t dim) {
  Tensor idx = index.detach().contiguous();
  const int64_t size = out.shape()[size_t(dim)], len = idx.shape()[size_t(dim)];
  DeviceGuard guard(out.device().index);
  kb::ErrorFlag flag(out.device().index);
  Shape line_shape = idx.shape();
  line_shape[size_t(dim)] = 1;
  const int64_t num_lines = shape_numel(line_shape);
  const auto lines =
      make_offset_calc<3>(line_shape, {&out.strides(), &src.strides(), &idx.strides()}, "scatter_add");
  const int64_t o_step = out.strides()[size_t(dim)], s_step = src.strides()[size_t(dim)],
                i_step = idx.strides()[size_t(dim)];
  kb::dispatch_index(idx.dtype(), "scatter_add", [&]<typename I>() {
    start_check<I>(flag, idx, size);
    if (num_lines > 0 && len > 0) {
      kb::dispatch_numeric(out.dtype(), "scatter_add", [&]<typename T>() {
        scatter_add_kernel_impl<T, I><<<blocks_for(num_lines), kThreads, 0, current_stream()>>>(
            static_cast<T*>(out.raw_data()), static_cast<const T*>(src.raw_data()),
            static_cast<const I*>(idx.raw_data()), lines, num_lines, len, size, o_step, s_step, i_step);
        LSF_CUDA_CHECK_LAUNCH("scatter_add_kernel");
      });
    }
  });
  raise_if_bad(flag, "scatter_add", idx, size, dim, "output", out.shape());
}

// [outer, size, inner] split of a shape around dim.
struct Split3 {
  int64_t outer = 1, size = 1, inner = 1;
  Split3(const Shape& shape, int64_t dim) {
    for (int64_t k = 0; k < int64_t(shape.size()); ++k)
      (k < dim ? outer : k == dim ? size : inner) *= shape[size_t(k)];
  }
};

void index_select(const Tensor& out, const Tensor& x, const Tensor& index, int64_t dim) {
  Tensor xc = x.detach().contiguous();
  Tensor idx = index.detach().contiguous();
  const Split3 s(xc.shape(), dim);
  const int64_t n = idx.numel(), total = out.numel();
  LSF_CHECK(total == 0 || out.is_contiguous()) << "index_select: internal error: the output must be contiguous";
  DeviceGuard guard(x.device().index);
  kb::ErrorFlag flag(x.device().index);
  kb::dispatch_index(idx.dtype(), "index_select", [&]<typename I>() {
    start_check<I>(flag, idx, s.size);
    if (total > 0) {
      kb::dispatch_bits(x.element_size(), "index_select", [&]<typename U>() {
        index_select_kernel_impl<U, I><<<blocks_for(total), kThreads, 0, current_stream()>>>(
            static_cast<U*>(out.raw_data()), static_cast<const U*>(xc.raw_data()),
            static_cast<const I*>(idx.raw_data()), total, n, s.size, s.inner);
        LSF_CUDA_CHECK_LAUNCH("index_select_kernel");
      });
    }
  });
  raise_if_bad(flag, "index_select", idx, s.size, dim, "input", x.shape());
}

void index_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t dim) {
  Tensor sc = src.detach().contiguous();
  Tensor idx = index.detach().contiguous();
  const Split3 s(out.shape(), dim);
  const int64_t n = idx.numel();
  const bool work = out.numel() > 0 && sc.numel() > 0;
  LSF_CHECK(!work || out.is_contiguous()) << "index_add: internal error: the output must be contiguous";
  DeviceGuard guard(out.device().index);
  kb::ErrorFlag flag(out.device().index);
  kb::dispatch_index(idx.dtype(), "index_add", [&]<typename I>() {
    start_check<I>(flag, idx, s.size);
    if (work) {
      kb::dispatch_numeric(out.dtype(), "index_add", [&]<typename T>() {
        const int64_t columns = s.outer * s.inner;
        index_add_kernel_impl<T, I><<<blocks_for(columns), kThreads, 0, current_stream()>>>(
            static_cast<T*>(out.raw_data()), static_cast<const T*>(sc.raw_data()),
            static_cast<const I*>(idx.raw_data()), s.outer, n, s.size, s.inner);
        LSF_CUDA_CHECK_LAUNCH("index_add_kernel");
      });
    }
  });
  raise_if_bad(flag, "index_add", idx, s.size, dim, "output", out.shape());
}

}  // namespace

LSF_REGISTER_KERNEL(where_kernel, DeviceType::CUDA, where);
LSF_REGISTER_KERNEL(gather_kernel, DeviceType::CUDA, gather);
LSF_REGISTER_KERNEL(scatter_add_kernel, DeviceType::CUDA, scatter_add);
LSF_REGISTER_KERNEL(index_select_kernel, DeviceType::CUDA, index_select);
LSF_REGISTER_KERNEL(index_add_kernel, DeviceType::CUDA, index_add);

}  // namespace lsf::cuda
