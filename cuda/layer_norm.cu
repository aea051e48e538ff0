// CUDA layer norm, forward and backward, the contract of ops/layer_norm.h: x viewed as
// [rows, n] contiguous, y [rows, n], mean and rstd [rows] in the accumulation dtype (f32 for
// bf16/f16 and f32, f64 for f64; ops/kernels/layer_norm.h), weight/bias [n] or
// undefined; the backward overwrites dx [rows, n] and dweight/dbias [n] (each only if defined).
//
// Forward, a group of threads per row (a warp up to 1024 elements, a block beyond): mean, then
// the biased variance as Σ(x − mean)²/n (two passes, as the CPU, no E[x²] − mean²
// cancellation), then y = (x − mean)·rstd·w + b.
// Backward, with x̂ = (x − mean)·rstd and g = dy·w:
//   dx = rstd·(g − mean(g) − x̂·mean(g·x̂))         (a group per row, two group sums)
//   dweight = Σ_rows dy·x̂, dbias = Σ_rows dy       (a thread per column, rows split over
//                                                     blocks; partial sums in f64 combined in
//                                                     a fixed order: deterministic)
// dtypes f32, f64, bf16, f16; row statistics accumulate in float (f64 for f64), the parameter
// gradients in double. mean and rstd are kept in float for bf16/f16, so the backward sees the
// statistics the forward used, not their 16-bit roundings (issue #19 item 4).
#include "lsformer/cuda/reduce_utils.cuh"
#include "lsformer/ops/layer_norm.h"
#include "lsformer/ops/kernels/layer_norm.h"

namespace lsf::cuda {
namespace {

using namespace ka;

// y, x [rows, n]; mean, rstd [rows]; w, b [n] or null.
template <typename T, int G>
__global__ void __launch_bounds__(kBlockThreads<G>)
    layer_norm_forward_cuda_kernel(T* __restrict__ y, acc_t<T>* __restrict__ mean, acc_t<T>* __restrict__ rstd,
                                   const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                                   int64_t rows, int64_t n, acc_t<T> eps) {
  using A = acc_t<T>;
  __shared__ A shared[32];
  const int lane = threadIdx.x % G;
  const A inv_n = A(1) / A(n);
  for (int64_t r0 = int64_t(blockIdx.x) * kRowsPerBlock<G>; r0 < rows; r0 += int64_t(gridDim.x) * kRowsPerBlock<G>) {
    const int64_t r = r0 + threadIdx.x / G;
    const bool active = r < rows;  // inactive threads still join the block-wide reductions
    const T* xr = x + (active ? r : 0) * n;
    A s = 0;
    if (active)
      for (int64_t i = lane; i < n; i += G) s += cast<A>(xr[i]);
    const A mu = group_reduce<G>(s, SumOp{}, shared) * inv_n;
    A v = 0;
    if (active)
      for (int64_t i = lane; i < n; i += G) {
        const A d = cast<A>(xr[i]) - mu;
        v += d * d;
      }
    v = group_reduce<G>(v, SumOp{}, shared);
    if (!active) continue;
    const A rs = A(1) / dm::sqrt(v * inv_n + eps);
    if (lane == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    T* yr = y + r * n;
    for (int64_t i = lane; i < n; i += G) {
      A h = (cast<A>(xr[i]) - mu) * rs;
      if (w) h *= cast<A>(w[i]);
      if (b) h += cast<A>(b[i]);
      yr[i] = cast<T>(h);
    }
  }
}

// dx, dy, x [rows, n]; mean, rstd [rows]; w [n] or null.
template <typename T, int G>
__global__ void __launch_bounds__(kBlockThreads<G>)
    layer_norm_dx_kernel(T* __restrict__ dx, const T* __restrict__ dy, const T* __restrict__ x,
                         const acc_t<T>* __restrict__ mean, const acc_t<T>* __restrict__ rstd, const T* __restrict__ w,
                         int64_t rows, int64_t n) {
  using A = acc_t<T>;
  __shared__ A shared[32];
  const int lane = threadIdx.x % G;
  const A inv_n = A(1) / A(n);
  for (int64_t r0 = int64_t(blockIdx.x) * kRowsPerBlock<G>; r0 < rows; r0 += int64_t(gridDim.x) * kRowsPerBlock<G>) {
    const int64_t r = r0 + threadIdx.x / G;
    const bool active = r < rows;
    const int64_t off = (active ? r : 0) * n;
    const A mu = active ? mean[r] : A(0), rs = active ? rstd[r] : A(0);
    A sg = 0, sgx = 0;
    if (active)
      for (int64_t i = lane; i < n; i += G) {
        const A g = w ? cast<A>(dy[off + i]) * cast<A>(w[i]) : cast<A>(dy[off + i]);
        sg += g;
        sgx += g * ((cast<A>(x[off + i]) - mu) * rs);
      }
    const A a = group_reduce<G>(sg, SumOp{}, shared) * inv_n;
    const A c = group_reduce<G>(sgx, SumOp{}, shared) * inv_n;
    if (!active) continue;
    for (int64_t i = lane; i < n; i += G) {
      const A g = w ? cast<A>(dy[off + i]) * cast<A>(w[i]) : cast<A>(dy[off + i]);
      const A xh = (cast<A>(x[off + i]) - mu) * rs;
      dx[off + i] = cast<T>(rs * (g - a - xh * c));
    }
  }
}

// Column sums of dy·x̂ and dy: blockDim (32, 8); thread (tx, ty) of block (bx, by) owns column
// j = bx·32 + tx and rows ≡ by·8 + ty (mod gridDim.y·8). Block results go to
// partial[(by·2 + 0|1)·n + j] (f64).
template <typename T>
__global__ void layer_norm_params_kernel(double* __restrict__ partial, const T* __restrict__ dy,
                                         const T* __restrict__ x, const acc_t<T>* __restrict__ mean,
                                         const acc_t<T>* __restrict__ rstd, int64_t rows, int64_t n) {
  __shared__ double sw[8][33], sb[8][33];
  const int64_t j = int64_t(blockIdx.x) * 32 + threadIdx.x;
  double aw = 0, ab = 0;
  if (j < n) {
    for (int64_t r = int64_t(blockIdx.y) * 8 + threadIdx.y; r < rows; r += int64_t(gridDim.y) * 8) {
      const double g = cast<double>(dy[r * n + j]);
      const double xh = (cast<double>(x[r * n + j]) - double(mean[r])) * double(rstd[r]);
      aw += g * xh;
      ab += g;
    }
  }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && j < n) {
    for (int k = 1; k < 8; ++k) {
      aw += sw[k][threadIdx.x];
      ab += sb[k][threadIdx.x];
    }
    partial[(int64_t(blockIdx.y) * 2) * n + j] = aw;
    partial[(int64_t(blockIdx.y) * 2 + 1) * n + j] = ab;
  }
}

// dweight[j], dbias[j] (either may be null) = Σ_s partial[s, 0|1, j] in split order.
template <typename T>
__global__ void layer_norm_params_finish_kernel(T* __restrict__ dw, T* __restrict__ db, const double* __restrict__ partial,
                                                int64_t n, int64_t splits) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < n; j += int64_t(gridDim.x) * blockDim.x) {
    double aw = 0, ab = 0;
    for (int64_t s = 0; s < splits; ++s) {
      aw += partial[(s * 2) * n + j];
      ab += partial[(s * 2 + 1) * n + j];
    }
    if (dw) dw[j] = cast<T>(aw);
    if (db) db[j] = cast<T>(ab);
  }
}

template <typename T>
const T* optional_ptr(const Tensor& t) {
  return t.defined() ? ptr<const T>(t) : nullptr;
}

// mean and rstd hold acc_t<T> (ops/layer_norm.cpp allocates them so): the kernels read them
// through raw pointers, so a mismatch would be silent.
template <typename T>
void check_stats_dtype(DType x_dtype, const Tensor& mean, const Tensor& rstd) {
  LSF_CHECK(mean.dtype() == dtype_v<acc_t<T>> && rstd.dtype() == dtype_v<acc_t<T>>)
      << "internal: layer norm (CUDA) on " << x_dtype << " needs mean and rstd in " << dtype_v<acc_t<T>>
      << ", got " << mean.dtype() << " and " << rstd.dtype();
}

void layer_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                        const Tensor& bias, double eps) {
  check_cuda_tensors("layer_norm_forward_kernel", {&y, &mean, &rstd, &x, &weight, &bias});
  const int64_t rows = mean.numel();
  const int64_t n = rows > 0 ? x.numel() / rows : 0;
  LSF_CHECK(x.is_contiguous() && y.is_contiguous() && (!weight.defined() || weight.numel() == n) &&
            (!bias.defined() || bias.numel() == n))
      << "internal: layer_norm_forward_kernel (CUDA) got x " << x.shape() << " with " << rows << " rows";
  if (rows == 0 || n == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_cuda_float(x.dtype(), "layer_norm", [&]<typename T>() {
    check_stats_dtype<T>(x.dtype(), mean, rstd);
    with_group(n, [&]<int G>() {
      layer_norm_forward_cuda_kernel<T, G><<<blocks_for(rows, kRowsPerBlock<G>), kBlockThreads<G>, 0, current_stream()>>>(
          ptr<T>(y), ptr<acc_t<T>>(mean), ptr<acc_t<T>>(rstd), ptr<const T>(x), optional_ptr<T>(weight), optional_ptr<T>(bias), rows,
          n, acc_t<T>(eps));
    });
  });
  LSF_CUDA_CHECK_LAUNCH("layer_norm_forward_cuda_kernel");
}

void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                         const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  check_cuda_tensors("layer_norm_backward_kernel", {&dx, &dweight, &dbias, &dy, &x, &mean, &rstd, &weight});
  const int64_t rows = mean.numel();
  const int64_t n = rows > 0 ? x.numel() / rows : (dweight.defined() ? dweight.numel() : dbias.numel());
  LSF_CHECK(x.is_contiguous() && dy.is_contiguous() && (!dx.defined() || dx.is_contiguous()))
      << "internal: layer_norm_backward_kernel (CUDA) expects contiguous x, dy and dx (x " << x.shape() << ")";
  DeviceGuard guard(x.device().index);
  cudaStream_t stream = current_stream();
  dispatch_cuda_float(x.dtype(), "layer_norm backward", [&]<typename T>() {
    check_stats_dtype<T>(x.dtype(), mean, rstd);
    if (dx.defined() && rows > 0 && n > 0) {
      with_group(n, [&]<int G>() {
        layer_norm_dx_kernel<T, G><<<blocks_for(rows, kRowsPerBlock<G>), kBlockThreads<G>, 0, stream>>>(
            ptr<T>(dx), ptr<const T>(dy), ptr<const T>(x), ptr<const acc_t<T>>(mean), ptr<const acc_t<T>>(rstd),
            optional_ptr<T>(weight), rows, n);
      });
      LSF_CUDA_CHECK_LAUNCH("layer_norm_dx_kernel");
    }
    if ((!dweight.defined() && !dbias.defined()) || n == 0) return;
    const int64_t col_blocks = (n + 31) / 32;
    const int64_t splits = rows == 0 ? 0 : reduction_splits(col_blocks, rows, /*fill=*/264, /*min_per_split=*/128);
    Tensor partial = empty({std::max<int64_t>(splits, 1) * 2 * n}, TensorOptions(kF64).device(x.device()));
    if (splits > 0) {
      layer_norm_params_kernel<T><<<dim3(unsigned(col_blocks), unsigned(splits)), dim3(32, 8), 0, stream>>>(
          ptr<double>(partial), ptr<const T>(dy), ptr<const T>(x), ptr<const acc_t<T>>(mean), ptr<const acc_t<T>>(rstd),
          rows, n);
      LSF_CUDA_CHECK_LAUNCH("layer_norm_params_kernel");
    }
    layer_norm_params_finish_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
        dweight.defined() ? ptr<T>(dweight) : nullptr, dbias.defined() ? ptr<T>(dbias) : nullptr, ptr<double>(partial),
        n, splits);
    LSF_CUDA_CHECK_LAUNCH("layer_norm_params_finish_kernel");
  });
}

}  // namespace

LSF_REGISTER_KERNEL(layer_norm_forward_kernel, DeviceType::CUDA, layer_norm_forward);
LSF_REGISTER_KERNEL(layer_norm_backward_kernel, DeviceType::CUDA, layer_norm_backward);

}  // namespace lsf::cuda
