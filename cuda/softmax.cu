// CUDA softmax and log_softmax, forward and backward, the contract of ops/softmax.h: along one
// dim of a tensor viewed as [outer, n, inner]; y and dx contiguous; inputs are made contiguous
// first (as the CPU kernel does).
//
//   forward   m = max x, s = Σ exp(x − m);  softmax y = exp(x − m)/s,  log_softmax y = x − m − log s
//   backward  softmax dx = y·(dy − Σ dy·y);  log_softmax dx = dy − exp(y)·Σ dy
//
// inner == 1 (the usual last-dim softmax): a group of threads per row (a warp up to 1024
// elements, a block beyond: cuda/offset_calc.h row_group_size), three passes over the row,
// the later ones served from L1/L2. inner > 1: one thread per column (outer index, inner
// index), threads of a warp on neighbouring columns so every pass reads coalesced — unless the
// columns are few and long (the LRA projection softmax: [B, n, h·r] over n, B·h·r ≤ 2048
// columns of 4096), where one thread per column leaves most of the GPU idle walking a column
// serially: then the input is transposed so the columns become rows, the row kernels run, and
// the result is transposed back (issue #19 item 5; kFewColumns is not yet tuned on a GPU).
//
// dtypes f32, f64, bf16, f16; f32/bf16/f16 compute and accumulate in float (as the CPU does
// for f32), f64 in double.
#include "lsformer/cuda/reduce_utils.cuh"
#include "lsformer/engine/autograd.h"
#include "lsformer/ops/softmax.h"
#include "lsformer/ops/kernels/softmax.h"

namespace lsf::cuda {
namespace {

using namespace ka;

// y, x [rows, n]. G threads per row (G = 32: 8 rows per 256-thread block; else blockDim = G).
template <typename T, bool Log, int G>
__global__ void __launch_bounds__(kBlockThreads<G>)
    softmax_rows_kernel(T* __restrict__ y, const T* __restrict__ x, int64_t rows, int64_t n) {
  using A = acc_t<T>;
  __shared__ A shared[32];
  const int lane = threadIdx.x % G;
  for (int64_t r0 = int64_t(blockIdx.x) * kRowsPerBlock<G>; r0 < rows; r0 += int64_t(gridDim.x) * kRowsPerBlock<G>) {
    const int64_t r = r0 + threadIdx.x / G;
    const bool active = r < rows;  // inactive threads still join the block-wide reductions
    const T* xr = x + (active ? r : 0) * n;
    A m = -dm::inf(A());
    if (active)
      for (int64_t i = lane; i < n; i += G) m = MaxOp{}(m, cast<A>(xr[i]));
    m = group_reduce<G>(m, MaxOp{}, shared);
    A s = 0;
    if (active)
      for (int64_t i = lane; i < n; i += G) s += dm::exp(cast<A>(xr[i]) - m);
    s = group_reduce<G>(s, SumOp{}, shared);
    if (!active) continue;
    T* yr = y + r * n;
    if constexpr (Log) {
      const A shift = m + dm::log(s);
      for (int64_t i = lane; i < n; i += G) yr[i] = cast<T>(cast<A>(xr[i]) - shift);
    } else {
      const A inv = A(1) / s;
      for (int64_t i = lane; i < n; i += G) yr[i] = cast<T>(dm::exp(cast<A>(xr[i]) - m) * inv);
    }
  }
}

// y, x [outer, n, inner]: one thread per column (o, j).
template <typename T, bool Log>
__global__ void softmax_columns_kernel(T* __restrict__ y, const T* __restrict__ x, int64_t outer, int64_t n,
                                       int64_t inner) {
  using A = acc_t<T>;
  const int64_t columns = outer * inner;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < columns; c += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    A m = -dm::inf(A());
    for (int64_t i = 0; i < n; ++i) m = MaxOp{}(m, cast<A>(x[base + i * inner]));
    A s = 0;
    for (int64_t i = 0; i < n; ++i) s += dm::exp(cast<A>(x[base + i * inner]) - m);
    if constexpr (Log) {
      const A shift = m + dm::log(s);
      for (int64_t i = 0; i < n; ++i) y[base + i * inner] = cast<T>(cast<A>(x[base + i * inner]) - shift);
    } else {
      const A inv = A(1) / s;
      for (int64_t i = 0; i < n; ++i) y[base + i * inner] = cast<T>(dm::exp(cast<A>(x[base + i * inner]) - m) * inv);
    }
  }
}

// dx, dy, y [rows, n]; groups as softmax_rows_kernel.
template <typename T, bool Log, int G>
__global__ void __launch_bounds__(kBlockThreads<G>)
    softmax_backward_rows_kernel(T* __restrict__ dx, const T* __restrict__ dy, const T* __restrict__ y,
                                 int64_t rows, int64_t n) {
  using A = acc_t<T>;
  __shared__ A shared[32];
  const int lane = threadIdx.x % G;
  for (int64_t r0 = int64_t(blockIdx.x) * kRowsPerBlock<G>; r0 < rows; r0 += int64_t(gridDim.x) * kRowsPerBlock<G>) {
    const int64_t r = r0 + threadIdx.x / G;
    const bool active = r < rows;
    const int64_t off = (active ? r : 0) * n;
    A s = 0;
    if (active)
      for (int64_t i = lane; i < n; i += G) s += Log ? cast<A>(dy[off + i]) : cast<A>(dy[off + i]) * cast<A>(y[off + i]);
    s = group_reduce<G>(s, SumOp{}, shared);
    if (!active) continue;
    for (int64_t i = lane; i < n; i += G) {
      const A g = cast<A>(dy[off + i]), v = cast<A>(y[off + i]);
      dx[off + i] = cast<T>(Log ? g - dm::exp(v) * s : v * (g - s));
    }
  }
}

// dx, dy, y [outer, n, inner]: one thread per column.
template <typename T, bool Log>
__global__ void softmax_backward_columns_kernel(T* __restrict__ dx, const T* __restrict__ dy, const T* __restrict__ y,
                                                int64_t outer, int64_t n, int64_t inner) {
  using A = acc_t<T>;
  const int64_t columns = outer * inner;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < columns; c += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    A s = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t o = base + i * inner;
      s += Log ? cast<A>(dy[o]) : cast<A>(dy[o]) * cast<A>(y[o]);
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t o = base + i * inner;
      const A g = cast<A>(dy[o]), v = cast<A>(y[o]);
      dx[o] = cast<T>(Log ? g - dm::exp(v) * s : v * (g - s));
    }
  }
}

Tensor contiguous_input(const Tensor& t) { return t.is_contiguous() ? t : t.detach().contiguous(); }

constexpr int64_t kFewColumns = 16384;  // below this many columns (of ≥ kLongColumn) the row kernels run on a transpose
constexpr int64_t kLongColumn = 64;

bool as_rows(const SoftmaxGeometry& g) { return g.inner > 1 && g.outer * g.inner < kFewColumns && g.n >= kLongColumn; }

// t [outer, n, inner] → a new contiguous [outer, inner, n] (the CUDA copy kernel; nothing recorded).
Tensor columns_to_rows(const Tensor& t, const SoftmaxGeometry& g) {
  return t.detach().view({g.outer, g.n, g.inner}).transpose(1, 2).contiguous();
}
// dst [outer, n, inner] (contiguous) ← rows [outer, inner, n] transposed back.
void rows_to_columns(const Tensor& dst, const Tensor& rows, const SoftmaxGeometry& g) {
  dst.view({g.outer, g.n, g.inner}).copy_(rows.view({g.outer, g.inner, g.n}).transpose(1, 2));
}

void softmax_forward(bool log, const Tensor& y, const Tensor& x, int64_t dim) {
  const char* name = log ? "log_softmax" : "softmax";
  check_cuda_tensors("softmax_forward_kernel", {&y, &x});
  LSF_CHECK(y.shape() == x.shape() && y.dtype() == x.dtype() && y.is_contiguous())
      << "internal: " << name << " CUDA kernel got y " << y.shape() << " for x " << x.shape();
  const SoftmaxGeometry g = softmax_geometry(x.shape(), dim);
  if (x.numel() == 0) return;
  const Tensor xc = contiguous_input(x);
  DeviceGuard guard(x.device().index);
  cudaStream_t stream = current_stream();
  NoGradGuard no_grad;  // the transposing copies below are not part of any graph
  const bool rows = as_rows(g);
  const Tensor xr = rows ? columns_to_rows(xc, g) : xc;
  const Tensor yr = rows ? empty(xr.shape(), xr.options()) : y;
  dispatch_cuda_float(x.dtype(), name, [&]<typename T>() {
    auto run = [&]<bool Log>() {
      if (g.inner == 1 || rows) {
        const int64_t count = g.outer * (rows ? g.inner : 1);
        with_group(g.n, [&]<int G>() {
          softmax_rows_kernel<T, Log, G><<<blocks_for(count, kRowsPerBlock<G>), kBlockThreads<G>, 0, stream>>>(
              ptr<T>(yr), ptr<const T>(xr), count, g.n);
        });
      } else {
        softmax_columns_kernel<T, Log><<<blocks_for(g.outer * g.inner), kThreads, 0, stream>>>(
            ptr<T>(y), ptr<const T>(xc), g.outer, g.n, g.inner);
      }
    };
    if (log) run.template operator()<true>();
    else run.template operator()<false>();
  });
  LSF_CUDA_CHECK_LAUNCH("softmax_forward_kernel");
  if (rows) rows_to_columns(y, yr, g);
}

void softmax_backward(bool log, const Tensor& dx, const Tensor& dy, const Tensor& y, int64_t dim) {
  const char* name = log ? "log_softmax backward" : "softmax backward";
  check_cuda_tensors("softmax_backward_kernel", {&dx, &dy, &y});
  LSF_CHECK(dx.shape() == y.shape() && dy.shape() == y.shape() && dx.dtype() == y.dtype() &&
            dy.dtype() == y.dtype() && dx.is_contiguous())
      << "internal: " << name << " CUDA kernel got dx " << dx.shape() << ", dy " << dy.shape() << ", y " << y.shape();
  const SoftmaxGeometry g = softmax_geometry(y.shape(), dim);
  if (y.numel() == 0) return;
  const Tensor dyc = contiguous_input(dy), yc = contiguous_input(y);
  DeviceGuard guard(y.device().index);
  cudaStream_t stream = current_stream();
  NoGradGuard no_grad;
  const bool rows = as_rows(g);
  const Tensor dyr = rows ? columns_to_rows(dyc, g) : dyc, yr = rows ? columns_to_rows(yc, g) : yc;
  const Tensor dxr = rows ? empty(yr.shape(), yr.options()) : dx;
  dispatch_cuda_float(y.dtype(), name, [&]<typename T>() {
    auto run = [&]<bool Log>() {
      if (g.inner == 1 || rows) {
        const int64_t count = g.outer * (rows ? g.inner : 1);
        with_group(g.n, [&]<int G>() {
          softmax_backward_rows_kernel<T, Log, G><<<blocks_for(count, kRowsPerBlock<G>), kBlockThreads<G>, 0, stream>>>(
              ptr<T>(dxr), ptr<const T>(dyr), ptr<const T>(yr), count, g.n);
        });
      } else {
        softmax_backward_columns_kernel<T, Log><<<blocks_for(g.outer * g.inner), kThreads, 0, stream>>>(
            ptr<T>(dx), ptr<const T>(dyc), ptr<const T>(yc), g.outer, g.n, g.inner);
      }
    };
    if (log) run.template operator()<true>();
    else run.template operator()<false>();
  });
  LSF_CUDA_CHECK_LAUNCH("softmax_backward_kernel");
  if (rows) rows_to_columns(dx, dxr, g);
}

}  // namespace

LSF_REGISTER_KERNEL(softmax_forward_kernel, DeviceType::CUDA, softmax_forward);
LSF_REGISTER_KERNEL(softmax_backward_kernel, DeviceType::CUDA, softmax_backward);

}  // namespace lsf::cuda
