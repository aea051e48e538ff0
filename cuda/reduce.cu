// CUDA reductions, the contract of ops/reduce.h: reduce_kernel (sum, max, min over any set of
// dims of a tensor with any strides, into a contiguous output of x's shape with reduced dims
// set to 1) and arg_reduce_kernel (index of the first max / min along one dim; NaN counts as
// both the max and the min). mean, var and amax/amin are composed from these by ops/reduce.cpp.
//
// dtypes: f32, f64, bf16, f16, i32, i64, u8 and bool (as u8). The output has x's dtype, except
// integer and bool sums, which count in i64 (as ops/reduce.cpp allocates them). Sums of f32,
// bf16 and f16 accumulate in float (the CPU uses f64: the results differ by the float tree
// sum's rounding, about log2(n)·2^-24 relative to Σ|x|), f64 in double, integers in i64.
//
// Two layouts, chosen by where x's fastest-moving dim goes:
//   rows    — it is reduced: a group of threads (a warp, or a block for long rows) reduces one
//             output, reading consecutive elements together;
//   columns — it is kept: each thread owns one output and walks the reduced elements, threads
//             of a warp reading neighbouring outputs (bias gradients: sum over the batch).
// When the outputs alone cannot fill the GPU, the reduced elements are split over more
// blocks that write partial results, and a second small kernel combines them in a fixed order
// (deterministic, no atomics). OffsetCalcs map output and reduced indices to x's offsets, so
// nothing is copied into a reduction-friendly layout first.
#include <cstdlib>
#include <limits>

#include "lsformer/cuda/reduce_utils.cuh"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/kernels/reduce.h"

namespace lsf::cuda {
namespace {

using namespace ka;

// What a reduction accumulates x's values in.
template <typename X>
using reduce_acc_t = std::conditional_t<std::is_integral_v<X>, int64_t, acc_t<X>>;

template <typename A>
__device__ __forceinline__ A identity(ReduceOp op) {
  if (op == ReduceOp::Sum) return A(0);
  if constexpr (std::is_floating_point_v<A>) {
    return op == ReduceOp::Max ? -dm::inf(A()) : dm::inf(A());
  } else {
    return op == ReduceOp::Max ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
  }
}

template <typename A>
__device__ __forceinline__ A combine(ReduceOp op, A a, A b) {
  if (op == ReduceOp::Sum) return a + b;
  if (op == ReduceOp::Max) return MaxOp{}(a, b);
  return MinOp{}(a, b);
}

template <int G, typename A>
__device__ __forceinline__ A group_combine(ReduceOp op, A v, A* shared) {
  if (op == ReduceOp::Sum) return group_reduce<G>(v, SumOp{}, shared);
  if (op == ReduceOp::Max) return group_reduce<G>(v, MaxOp{}, shared);
  return group_reduce<G>(v, MinOp{}, shared);
}

// Rows: groups of G threads (G = 32: blockDim.x = 256 holds 8 warps; else blockDim.x = G);
// group g reduces split g % splits of output g / splits. With splits == 1 the result goes to
// out, else to partial[row·splits + split].
template <typename X, typename O, int G>
__global__ void __launch_bounds__(kBlockThreads<G>)
    reduce_rows_kernel(ReduceOp op, O* __restrict__ out, reduce_acc_t<X>* __restrict__ partial,
                       const X* __restrict__ x, OffsetCalc<1> kept, OffsetCalc<1> red, int64_t rows,
                       int64_t n, int64_t splits) {
  using A = reduce_acc_t<X>;
  __shared__ A shared[32];
  constexpr int kGroupsPerBlock = G == 32 ? 8 : 1;
  const int lane = threadIdx.x % G;
  const int64_t chunk = (n + splits - 1) / splits;
  const int64_t groups = rows * splits;
  // Every thread of a block runs the same number of iterations (the loop is over the block's
  // first group), so the block-wide syncs inside group_reduce are reached by all.
  const int64_t step = int64_t(gridDim.x) * kGroupsPerBlock;
  for (int64_t g0 = int64_t(blockIdx.x) * kGroupsPerBlock; g0 < groups; g0 += step) {
    const int64_t g = g0 + threadIdx.x / G;
    A acc = identity<A>(op);
    int64_t row = 0, split = 0;
    if (g < groups) {
      row = g / splits;
      split = g % splits;
      const int64_t base = kept.get(row).v[0];
      const int64_t end = (split + 1) * chunk < n ? (split + 1) * chunk : n;
      for (int64_t i = split * chunk + lane; i < end; i += G) acc = combine(op, acc, A(cast<A>(x[base + red.get(i).v[0]])));
    }
    acc = group_combine<G>(op, acc, shared);
    if (g < groups && lane == 0) {
      if (splits == 1) out[row] = cast<O>(acc);
      else partial[g] = acc;
    }
  }
}

// Columns: blockDim (32, 8). Thread (tx, ty) of block (bx, by) owns output r = bx·32 + tx and
// reduced elements i ≡ by·8 + ty (mod gridDim.y·8); the 8 rows of a block are combined in
// shared memory. With gridDim.y == 1 the result goes to out, else to partial[by·rows + r].
template <typename X, typename O>
__global__ void reduce_columns_kernel(ReduceOp op, O* __restrict__ out, reduce_acc_t<X>* __restrict__ partial,
                                      const X* __restrict__ x, OffsetCalc<1> kept, OffsetCalc<1> red, int64_t rows,
                                      int64_t n) {
  using A = reduce_acc_t<X>;
  __shared__ A shared[8][33];
  const int64_t r = int64_t(blockIdx.x) * 32 + threadIdx.x;
  A acc = identity<A>(op);
  if (r < rows) {
    const int64_t base = kept.get(r).v[0];
    for (int64_t i = int64_t(blockIdx.y) * 8 + threadIdx.y; i < n; i += int64_t(gridDim.y) * 8)
      acc = combine(op, acc, A(cast<A>(x[base + red.get(i).v[0]])));
  }
  shared[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && r < rows) {
    for (int k = 1; k < 8; ++k) acc = combine(op, acc, shared[k][threadIdx.x]);
    if (gridDim.y == 1) out[r] = cast<O>(acc);
    else partial[int64_t(blockIdx.y) * rows + r] = acc;
  }
}

// out[r] = the partials of output r combined in order: partial[r·row_stride + s·split_stride].
template <typename A, typename O>
__global__ void reduce_partials_kernel(ReduceOp op, O* __restrict__ out, const A* __restrict__ partial, int64_t rows,
                                       int64_t splits, int64_t row_stride, int64_t split_stride) {
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x) {
    A acc = identity<A>(op);
    for (int64_t s = 0; s < splits; ++s) acc = combine(op, acc, partial[r * row_stride + s * split_stride]);
    out[r] = cast<O>(acc);
  }
}

// The sub-shape and strides of x over the dims where mask[d] == want.
OffsetCalc<1> sub_calc(const Tensor& x, const std::vector<bool>& mask, bool want, const char* what) {
  std::vector<int64_t> shape, strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (mask[d] != want) continue;
    shape.push_back(x.shape()[d]);
    strides.push_back(x.strides()[d]);
  }
  return make_offset_calc<1>(shape, {&strides}, what);
}

DType dtype_of_acc(DType x) { return is_integral(x) ? kI64 : x == kF64 ? kF64 : kF32; }

template <typename X, typename O>
void launch_reduce(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<bool>& mask) {
  using A = reduce_acc_t<X>;
  int64_t rows = 1, n = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (mask[d] ? n : rows) *= x.shape()[d];
  if (rows == 0) return;
  DeviceGuard guard(x.device().index);
  cudaStream_t stream = current_stream();
  O* po = ptr<O>(out);
  const X* px = ptr<const X>(x);
  if (n == 0) {  // an empty sum is 0 (extrema of nothing are refused by the caller)
    reduce_partials_kernel<A, O><<<blocks_for(rows), kThreads, 0, stream>>>(op, po, nullptr, rows, 0, 0, 0);
    LSF_CUDA_CHECK_LAUNCH("reduce_partials_kernel");
    return;
  }
  const OffsetCalc<1> kept = sub_calc(x, mask, false, "reduce_kernel");
  const OffsetCalc<1> red = sub_calc(x, mask, true, "reduce_kernel");
  // Is x's fastest-moving dim (smallest stride among dims of size > 1) a reduced one?
  int64_t fastest = -1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.shape()[d] == 1) continue;
    if (fastest < 0 || std::abs(x.strides()[d]) < std::abs(x.strides()[fastest])) fastest = d;
  }
  const bool by_rows = fastest < 0 || mask[fastest];
  const DType acc_dtype = dtype_of_acc(x.dtype() == kBool ? kU8 : x.dtype());

  if (by_rows) {
    const int G = row_group_size(n);
    const int64_t splits = reduction_splits(rows, n);
    Tensor partial = splits > 1 ? empty({rows * splits}, TensorOptions(acc_dtype).device(x.device())) : Tensor();
    A* pp = splits > 1 ? ptr<A>(partial) : nullptr;
    const int64_t groups = rows * splits;
    auto go = [&]<int GS>() {
      constexpr int threads = GS == 32 ? 256 : GS;
      constexpr int per_block = GS == 32 ? 8 : 1;
      reduce_rows_kernel<X, O, GS><<<blocks_for(groups, per_block), threads, 0, stream>>>(op, po, pp, px, kept, red,
                                                                                         rows, n, splits);
    };
    if (G == 32) go.template operator()<32>();
    else if (G == 128) go.template operator()<128>();
    else if (G == 256) go.template operator()<256>();
    else go.template operator()<1024>();
    LSF_CUDA_CHECK_LAUNCH("reduce_rows_kernel");
    if (splits > 1) {
      reduce_partials_kernel<A, O><<<blocks_for(rows), kThreads, 0, stream>>>(op, po, pp, rows, splits, splits, 1);
      LSF_CUDA_CHECK_LAUNCH("reduce_partials_kernel");
    }
    return;
  }
  const int64_t col_blocks = (rows + 31) / 32;
  LSF_CHECK(col_blocks < (int64_t(1) << 31)) << "reduce_kernel (CUDA): " << rows << " outputs is too many";
  const int64_t splits = reduction_splits(col_blocks, n, /*fill=*/264, /*min_per_split=*/256);
  Tensor partial = splits > 1 ? empty({rows * splits}, TensorOptions(acc_dtype).device(x.device())) : Tensor();
  A* pp = splits > 1 ? ptr<A>(partial) : nullptr;
  reduce_columns_kernel<X, O><<<dim3(unsigned(col_blocks), unsigned(splits)), dim3(32, 8), 0, stream>>>(
      op, po, pp, px, kept, red, rows, n);
  LSF_CUDA_CHECK_LAUNCH("reduce_columns_kernel");
  if (splits > 1) {
    reduce_partials_kernel<A, O><<<blocks_for(rows), kThreads, 0, stream>>>(op, po, pp, rows, splits, 1, rows);
    LSF_CUDA_CHECK_LAUNCH("reduce_partials_kernel");
  }
}

void reduce(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<bool>& mask) {
  check_cuda_tensors("reduce_kernel", {&out, &x});
  LSF_CHECK(int64_t(mask.size()) == x.dim() && out.is_contiguous())
      << "internal: reduce_kernel (CUDA) got x " << x.shape() << " with a mask of " << mask.size() << " dims";
  const DType xt = x.dtype() == kBool ? kU8 : x.dtype();
  const DType ot = out.dtype() == kBool ? kU8 : out.dtype();
  const bool widening = op == ReduceOp::Sum && is_integral(x.dtype()) && ot == kI64;
  LSF_CHECK(ot == xt || widening) << "reduce_kernel (CUDA): a reduction of " << x.dtype() << " into " << out.dtype()
                                  << " is not supported (the output takes x's dtype; integer sums i64)";
  int64_t n = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[d]) n *= x.shape()[d];
  LSF_CHECK(n > 0 || op == ReduceOp::Sum || x.numel() == 0)
      << "reduce_kernel (CUDA): cannot take an extremum over an empty dimension (shape " << x.shape() << ")";
  dispatch_cuda_numeric(xt, "reduce_kernel", [&]<typename X>() {
    if constexpr (std::is_integral_v<X>) {
      if (widening && ot != xt) {
        launch_reduce<X, int64_t>(op, out, x, mask);
        return;
      }
    }
    launch_reduce<X, X>(op, out, x, mask);
  });
}

// ---- arg_reduce ----

// a beats b: a NaN beats any number (the first NaN wins), then the strictly larger (smaller)
// value, then the smaller index among equals.
template <typename A>
__device__ __forceinline__ bool beats(bool is_max, A av, int64_t ai, A bv, int64_t bi) {
  if constexpr (std::is_floating_point_v<A>) {
    const bool an = av != av, bn = bv != bv;
    if (an || bn) return an && bn ? ai < bi : an;
  }
  if (av == bv) return ai < bi;
  return is_max ? av > bv : av < bv;
}

// indices [rows] (row-major over x's dims other than `dim`); a group of G threads per row, as
// reduce_rows_kernel. kept maps a row to its first element, `step` is x's stride along dim.
template <typename X, int G>
__global__ void __launch_bounds__(kBlockThreads<G>)
    arg_reduce_kernel_impl(bool is_max, int64_t* __restrict__ indices, const X* __restrict__ x,
                           OffsetCalc<1> kept, int64_t step, int64_t rows, int64_t n) {
  using A = reduce_acc_t<X>;
  __shared__ A shared_v[32];
  __shared__ int64_t shared_i[32];
  constexpr int kGroupsPerBlock = G == 32 ? 8 : 1;
  const int lane = threadIdx.x % G;
  const int64_t sub = threadIdx.x / G;
  for (int64_t g0 = int64_t(blockIdx.x) * kGroupsPerBlock; g0 < rows; g0 += int64_t(gridDim.x) * kGroupsPerBlock) {
    const int64_t row = g0 + sub;
    A best = A(0);
    int64_t bi = std::numeric_limits<int64_t>::max();  // "no element yet": loses to everything
    if (row < rows) {
      const X* base = x + kept.get(row).v[0];
      for (int64_t i = lane; i < n; i += G) {
        const A v = cast<A>(base[i * step]);
        if (bi == std::numeric_limits<int64_t>::max() || beats(is_max, v, i, best, bi)) {
          best = v;
          bi = i;
        }
      }
    }
    // Combine within the warp, then (G > 32) across the block's warps.
    for (int offset = 16; offset > 0; offset >>= 1) {
      const A ov = __shfl_xor_sync(0xffffffffu, best, offset);
      const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, offset);
      if (oi != std::numeric_limits<int64_t>::max() &&
          (bi == std::numeric_limits<int64_t>::max() || beats(is_max, ov, oi, best, bi))) {
        best = ov;
        bi = oi;
      }
    }
    if constexpr (G > 32) {
      __syncthreads();
      if ((threadIdx.x & 31) == 0) {
        shared_v[threadIdx.x >> 5] = best;
        shared_i[threadIdx.x >> 5] = bi;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        for (int w = 1; w < G / 32; ++w) {
          if (shared_i[w] != std::numeric_limits<int64_t>::max() &&
              (bi == std::numeric_limits<int64_t>::max() || beats(is_max, shared_v[w], shared_i[w], best, bi))) {
            best = shared_v[w];
            bi = shared_i[w];
          }
        }
      }
    }
    if (row < rows && lane == 0) indices[row] = bi;
  }
}

template <typename X>
void launch_arg_reduce(bool is_max, const Tensor& indices, const Tensor& x, int64_t dim) {
  const int64_t n = x.shape()[dim];
  const int64_t rows = n > 0 ? x.numel() / n : 0;
  if (rows == 0) return;
  DeviceGuard guard(x.device().index);
  std::vector<bool> mask(size_t(x.dim()), false);
  mask[size_t(dim)] = true;
  const OffsetCalc<1> kept = sub_calc(x, mask, false, "arg_reduce_kernel");
  const int G = row_group_size(n);
  auto go = [&]<int GS>() {
    constexpr int threads = GS == 32 ? 256 : GS;
    constexpr int per_block = GS == 32 ? 8 : 1;
    arg_reduce_kernel_impl<X, GS><<<blocks_for(rows, per_block), threads, 0, current_stream()>>>(
        is_max, ptr<int64_t>(indices), ptr<const X>(x), kept, x.strides()[dim], rows, n);
  };
  if (G == 32) go.template operator()<32>();
  else if (G == 128) go.template operator()<128>();
  else if (G == 256) go.template operator()<256>();
  else go.template operator()<1024>();
  LSF_CUDA_CHECK_LAUNCH("arg_reduce_kernel");
}

void arg_reduce(bool is_max, const Tensor& indices, const Tensor& x, int64_t dim) {
  const char* name = is_max ? "argmax" : "argmin";
  check_cuda_tensors("arg_reduce_kernel", {&indices, &x});
  LSF_CHECK(indices.dtype() == kI64 && indices.is_contiguous() && dim >= 0 && dim < x.dim() &&
            indices.numel() * (x.shape()[dim]) == x.numel())
      << "internal: arg_reduce_kernel (CUDA) got indices " << indices.shape() << " " << indices.dtype() << " for x "
      << x.shape() << " along dim " << dim;
  LSF_CHECK(x.shape()[dim] > 0 || x.numel() == 0)
      << name << " (CUDA): cannot reduce over an empty dimension (shape " << x.shape() << ")";
  dispatch_cuda_numeric(x.dtype(), name, [&]<typename X>() { launch_arg_reduce<X>(is_max, indices, x, dim); });
}

}  // namespace

LSF_REGISTER_KERNEL(reduce_kernel, DeviceType::CUDA, reduce);
LSF_REGISTER_KERNEL(arg_reduce_kernel, DeviceType::CUDA, arg_reduce);

}  // namespace lsf::cuda
