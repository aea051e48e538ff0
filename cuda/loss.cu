// CUDA classification losses, the contract of ops/loss.h: cross-entropy fused with log-softmax
// (ignore_index, label smoothing) and nll_loss, forward and backward. Inputs arrive as
// logits / log_probs [N, C, K] and target [N, K] (i64 or i32), all contiguous.
//
// Forward, per element (n, k): m = max_c x_c, lse = m + log Σ_c exp(x_c − m) (saved for the
// backward), loss = lse − (1 − ε)·x_t − (ε/C)·Σ_c x_c, formed in f64 from the float sums as
// on the CPU; 0 where the target is ignore_index. With K == 1 a group of threads reduces
// each row of C logits (a warp, or a block for large C); with K > 1 a thread per (n, k) walks
// the classes, neighbouring threads on neighbouring k (coalesced). Each element's loss (f64)
// and status (ignored / counted / out of range) go to scratch; one block then sums them in a
// fixed order into the ClassLossStats the op needs (sum, count, first bad target), which are
// copied to the host: the forward synchronises with the stream once.
//
// Backward, elementwise over [N, C, K]: dx_c = g·exp(x_c − lse) − g·ε/C − [c = t]·g·(1 − ε),
// g = scale·dloss (dloss [N, K] or one value), 0 for ignored elements. nll_loss backward puts
// −scale·dloss at each counted target and 0 elsewhere.
//
// dtypes f32, f64, bf16, f16 (float compute for the 16-bit ones and f32, f64 for f64).
#include <limits>

#include "lsformer/cuda/reduce_utils.cuh"
#include "lsformer/ops/loss.h"
#include "lsformer/ops/kernels/loss.h"

namespace lsf::cuda {
namespace {

using namespace ka;

enum : int8_t { kIgnored = 0, kCounted = 1, kBadTarget = 2 };

// Label smoothing as the two weights of the target distribution.
struct Smoothing {
  double keep = 1;     // 1 − ε
  double uniform = 0;  // ε / C
  bool on = false;     // ε > 0 (Σ x_c may be −inf for masked logits; only used then)
};

Smoothing smoothing(double eps, int64_t C) { return {1.0 - eps, C > 0 ? eps / double(C) : 0.0, eps > 0}; }

template <typename I>
__device__ __forceinline__ int8_t classify(I t, int64_t C, int64_t ignore_index) {
  if (int64_t(t) == ignore_index) return kIgnored;
  if (t < 0 || int64_t(t) >= C) return kBadTarget;
  return kCounted;
}

// Writes one element's results: lse (when given), loss (when given), scratch value and status.
template <typename T>
__device__ __forceinline__ void store_element(int64_t flat, double v, int8_t status, T* loss, double* elem,
                                              int8_t* stat) {
  if (loss) loss[flat] = cast<T>(v);
  elem[flat] = v;
  stat[flat] = status;
}

// K == 1: x [N, C]; G threads per row.
template <typename T, typename I, int G>
__global__ void __launch_bounds__(kBlockThreads<G>)
    ce_forward_rows_kernel(T* __restrict__ loss, acc_t<T>* __restrict__ lse, double* __restrict__ elem,
                           int8_t* __restrict__ stat, const T* __restrict__ x, const I* __restrict__ target,
                           int64_t N, int64_t C, int64_t ignore_index, Smoothing sm) {
  using A = acc_t<T>;
  __shared__ A shared[32];
  const int lane = threadIdx.x % G;
  for (int64_t r0 = int64_t(blockIdx.x) * kRowsPerBlock<G>; r0 < N; r0 += int64_t(gridDim.x) * kRowsPerBlock<G>) {
    const int64_t r = r0 + threadIdx.x / G;
    const bool active = r < N;  // inactive threads still join the block-wide reductions
    const T* xr = x + (active ? r : 0) * C;
    A m = -dm::inf(A()), sx = 0;
    if (active)
      for (int64_t c = lane; c < C; c += G) {
        const A v = cast<A>(xr[c]);
        m = MaxOp{}(m, v);
        sx += v;
      }
    m = group_reduce<G>(m, MaxOp{}, shared);
    sx = group_reduce<G>(sx, SumOp{}, shared);
    A s = 0;
    if (active)
      for (int64_t c = lane; c < C; c += G) s += dm::exp(cast<A>(xr[c]) - m);
    s = group_reduce<G>(s, SumOp{}, shared);
    if (!active || lane != 0) continue;
    const double l = double(m) + dm::log(double(s));
    lse[r] = A(l);  // f32 for 16-bit logits (ops/loss.cpp)
    const I t = target[r];
    const int8_t status = classify(t, C, ignore_index);
    double v = 0;
    if (status == kCounted) {
      v = l - sm.keep * double(cast<A>(xr[int64_t(t)]));
      if (sm.on) v -= sm.uniform * double(sx);
    }
    store_element(r, v, status, loss, elem, stat);
  }
}

// K > 1: x [N, C, K]; one thread per element (n, k).
template <typename T, typename I>
__global__ void ce_forward_columns_kernel(T* __restrict__ loss, acc_t<T>* __restrict__ lse, double* __restrict__ elem,
                                          int8_t* __restrict__ stat, const T* __restrict__ x,
                                          const I* __restrict__ target, int64_t N, int64_t C, int64_t K,
                                          int64_t ignore_index, Smoothing sm) {
  using A = acc_t<T>;
  for (int64_t flat = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; flat < N * K;
       flat += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = flat / K, k = flat % K;
    const T* xb = x + n * C * K + k;
    A m = -dm::inf(A()), sx = 0;
    for (int64_t c = 0; c < C; ++c) {
      const A v = cast<A>(xb[c * K]);
      m = MaxOp{}(m, v);
      sx += v;
    }
    A s = 0;
    for (int64_t c = 0; c < C; ++c) s += dm::exp(cast<A>(xb[c * K]) - m);
    const double l = double(m) + dm::log(double(s));
    lse[flat] = A(l);
    const I t = target[flat];
    const int8_t status = classify(t, C, ignore_index);
    double v = 0;
    if (status == kCounted) {
      v = l - sm.keep * double(cast<A>(xb[int64_t(t) * K]));
      if (sm.on) v -= sm.uniform * double(sx);
    }
    store_element(flat, v, status, loss, elem, stat);
  }
}

// nll_loss: loss = −x[n, t, k] per element (n, k).
template <typename T, typename I>
__global__ void nll_forward_kernel(T* __restrict__ loss, double* __restrict__ elem, int8_t* __restrict__ stat,
                                   const T* __restrict__ x, const I* __restrict__ target, int64_t N, int64_t C,
                                   int64_t K, int64_t ignore_index) {
  for (int64_t flat = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; flat < N * K;
       flat += int64_t(gridDim.x) * blockDim.x) {
    const I t = target[flat];
    const int8_t status = classify(t, C, ignore_index);
    double v = 0;
    if (status == kCounted) {
      const int64_t n = flat / K, k = flat % K;
      v = -cast<double>(x[(n * C + int64_t(t)) * K + k]);
    }
    store_element(flat, v, status, loss, elem, stat);
  }
}

// What the forward kernels report, as the device writes it (ClassLossStats' fields).
struct DeviceStats {
  double sum;
  long long count;
  long long bad_index;
  long long bad_value;
};

// One block of 1024 threads: Σ elem, the number counted, and the first bad target, each
// thread over a strided share and then a tree: the same order on every run.
template <typename I>
__global__ void __launch_bounds__(1024)
    loss_stats_kernel(DeviceStats* __restrict__ out, const double* __restrict__ elem,
                      const int8_t* __restrict__ stat, const I* __restrict__ target, int64_t total) {
  __shared__ double shared_sum[32];
  __shared__ long long shared_int[32];
  constexpr long long kNone = std::numeric_limits<long long>::max();
  double sum = 0;
  long long count = 0, bad = kNone;
  for (int64_t i = threadIdx.x; i < total; i += blockDim.x) {
    sum += elem[i];
    count += stat[i] == kCounted;
    if (stat[i] == kBadTarget && i < bad) bad = i;
  }
  sum = group_reduce<1024>(sum, SumOp{}, shared_sum);
  count = group_reduce<1024>(count, SumOp{}, shared_int);
  bad = group_reduce<1024>(bad, MinOp{}, shared_int);
  if (threadIdx.x == 0) {
    out->sum = sum;
    out->count = count;
    out->bad_index = bad == kNone ? -1 : bad;
    out->bad_value = bad == kNone ? 0 : (long long)target[bad];
  }
}

// Scratch for the per-element results, the stats kernel, and the copy back to the host.
struct Scratch {
  Tensor elem, stat, stats;
  Scratch(int64_t total, Device device)
      : elem(empty({total}, TensorOptions(kF64).device(device))),
        stat(empty({total}, TensorOptions(kU8).device(device))),
        stats(empty({4}, TensorOptions(kI64).device(device))) {}
  double* elem_ptr() const { return ptr<double>(elem); }
  int8_t* stat_ptr() const { return ptr<int8_t>(stat); }

  template <typename I>
  ClassLossStats finish(const I* target, int64_t total, cudaStream_t stream) const {
    loss_stats_kernel<I><<<1, 1024, 0, stream>>>(ptr<DeviceStats>(stats), elem_ptr(), stat_ptr(), target, total);
    LSF_CUDA_CHECK_LAUNCH("loss_stats_kernel");
    DeviceStats host{};
    LSF_CUDA_CHECK(cudaMemcpyAsync(&host, stats.raw_data(), sizeof(DeviceStats), cudaMemcpyDeviceToHost, stream));
    LSF_CUDA_CHECK(cudaStreamSynchronize(stream));
    ClassLossStats st;
    st.sum = host.sum;
    st.count = host.count;
    st.bad_index = host.bad_index;
    st.bad_value = host.bad_value;
    return st;
  }
};

struct Geometry {
  int64_t N = 1, C = 1, K = 1;
};

Geometry geometry(const Tensor& input, const Tensor& target, const char* what) {
  LSF_CHECK(input.dim() == 3 && input.is_contiguous() && target.is_contiguous() && target.dim() == 2 &&
            target.shape()[0] == input.shape()[0] && target.shape()[1] == input.shape()[2])
      << "internal: " << what << " (CUDA) expects contiguous input [N, C, K] and target [N, K], got " << input.shape()
      << " and " << target.shape();
  return {input.shape()[0], input.shape()[1], input.shape()[2]};
}

ClassLossStats cross_entropy_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& target,
                                     int64_t ignore_index, double label_smoothing) {
  check_cuda_tensors("cross_entropy_forward_kernel", {&loss, &lse, &logits, &target});
  const Geometry g = geometry(logits, target, "cross_entropy_forward_kernel");
  const int64_t total = g.N * g.K;
  if (total == 0) return {};
  const Smoothing sm = smoothing(label_smoothing, g.C);
  DeviceGuard guard(logits.device().index);
  cudaStream_t stream = current_stream();
  const Scratch scratch(total, logits.device());
  ClassLossStats result;
  dispatch_cuda_float(logits.dtype(), "cross_entropy", [&]<typename T>() {
    dispatch_cuda_index(target.dtype(), "cross_entropy", [&]<typename I>() {
      T* pl = loss.defined() ? ptr<T>(loss) : nullptr;
      if (g.K == 1) {
        with_group(g.C, [&]<int G>() {
          ce_forward_rows_kernel<T, I, G><<<blocks_for(g.N, kRowsPerBlock<G>), kBlockThreads<G>, 0, stream>>>(
              pl, ptr<acc_t<T>>(lse), scratch.elem_ptr(), scratch.stat_ptr(), ptr<const T>(logits),
              ptr<const I>(target), g.N, g.C, ignore_index, sm);
        });
      } else {
        ce_forward_columns_kernel<T, I><<<blocks_for(total), kThreads, 0, stream>>>(
            pl, ptr<acc_t<T>>(lse), scratch.elem_ptr(), scratch.stat_ptr(), ptr<const T>(logits),
            ptr<const I>(target), g.N, g.C, g.K, ignore_index, sm);
      }
      LSF_CUDA_CHECK_LAUNCH("cross_entropy_forward_kernel");
      result = scratch.finish(ptr<const I>(target), total, stream);
    });
  });
  return result;
}

// dx [N, C, K] elementwise; Index: 32-bit when N·C·K fits, else 64-bit.
template <typename T, typename I, typename Index>
__global__ void ce_backward_kernel(T* __restrict__ dx, const T* __restrict__ dloss, int64_t gstride,
                                   const T* __restrict__ x, const acc_t<T>* __restrict__ lse,
                                   const I* __restrict__ target, Index C, Index K, Index total, int64_t ignore_index,
                                   Smoothing sm, double scale) {
  using A = acc_t<T>;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += Index(gridDim.x) * blockDim.x) {
    const Index k = i % K, c = (i / K) % C, n = i / (C * K);
    const Index flat = n * K + k;
    const int64_t t = int64_t(target[flat]);
    if (t == ignore_index || t < 0 || t >= int64_t(C)) {
      dx[i] = cast<T>(A(0));
      continue;
    }
    const A gv = A(scale * double(cast<A>(dloss[int64_t(flat) * gstride])));
    A v = gv * dm::exp(cast<A>(x[i]) - lse[flat]) - A(double(gv) * sm.uniform);
    if (int64_t(c) == t) v -= A(double(gv) * sm.keep);
    dx[i] = cast<T>(v);
  }
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits, const Tensor& lse,
                            const Tensor& target, int64_t ignore_index, double label_smoothing, double scale) {
  check_cuda_tensors("cross_entropy_backward_kernel", {&dlogits, &dloss, &logits, &lse, &target});
  const Geometry g = geometry(logits, target, "cross_entropy_backward_kernel");
  LSF_CHECK(dlogits.is_contiguous() && dloss.is_contiguous() && lse.is_contiguous() &&
            (dloss.numel() == 1 || dloss.numel() == g.N * g.K))
      << "internal: cross_entropy_backward_kernel (CUDA) got dloss " << dloss.shape() << " for logits "
      << logits.shape();
  const int64_t total = logits.numel();
  if (total == 0) return;
  const Smoothing sm = smoothing(label_smoothing, g.C);
  const int64_t gstride = dloss.numel() == 1 ? 0 : 1;
  DeviceGuard guard(logits.device().index);
  dispatch_cuda_float(logits.dtype(), "cross_entropy backward", [&]<typename T>() {
    dispatch_cuda_index(target.dtype(), "cross_entropy backward", [&]<typename I>() {
      auto go = [&]<typename Index>() {
        ce_backward_kernel<T, I, Index><<<blocks_for(total), kThreads, 0, current_stream()>>>(
            ptr<T>(dlogits), ptr<const T>(dloss), gstride, ptr<const T>(logits), ptr<const acc_t<T>>(lse),
            ptr<const I>(target), Index(g.C), Index(g.K), Index(total), ignore_index, sm, scale);
      };
      if (total < (int64_t(1) << 31)) go.template operator()<uint32_t>();
      else go.template operator()<int64_t>();
      LSF_CUDA_CHECK_LAUNCH("cross_entropy_backward_kernel");
    });
  });
}

ClassLossStats nll_forward(const Tensor& loss, const Tensor& log_probs, const Tensor& target, int64_t ignore_index) {
  check_cuda_tensors("nll_loss_forward_kernel", {&loss, &log_probs, &target});
  const Geometry g = geometry(log_probs, target, "nll_loss_forward_kernel");
  const int64_t total = g.N * g.K;
  if (total == 0) return {};
  DeviceGuard guard(log_probs.device().index);
  cudaStream_t stream = current_stream();
  const Scratch scratch(total, log_probs.device());
  ClassLossStats result;
  dispatch_cuda_float(log_probs.dtype(), "nll_loss", [&]<typename T>() {
    dispatch_cuda_index(target.dtype(), "nll_loss", [&]<typename I>() {
      nll_forward_kernel<T, I><<<blocks_for(total), kThreads, 0, stream>>>(
          loss.defined() ? ptr<T>(loss) : nullptr, scratch.elem_ptr(), scratch.stat_ptr(), ptr<const T>(log_probs),
          ptr<const I>(target), g.N, g.C, g.K, ignore_index);
      LSF_CUDA_CHECK_LAUNCH("nll_loss_forward_kernel");
      result = scratch.finish(ptr<const I>(target), total, stream);
    });
  });
  return result;
}

// dx [N, C, K] elementwise: −scale·dloss at the counted target, 0 elsewhere.
template <typename T, typename I, typename Index>
__global__ void nll_backward_kernel(T* __restrict__ dx, const T* __restrict__ dloss, int64_t gstride,
                                    const I* __restrict__ target, Index C, Index K, Index total, int64_t ignore_index,
                                    double scale) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += Index(gridDim.x) * blockDim.x) {
    const Index k = i % K, c = (i / K) % C, n = i / (C * K);
    const Index flat = n * K + k;
    const int64_t t = int64_t(target[flat]);
    const bool hit = t != ignore_index && t >= 0 && t < int64_t(C) && int64_t(c) == t;
    dx[i] = cast<T>(hit ? -scale * cast<double>(dloss[int64_t(flat) * gstride]) : 0.0);
  }
}

void nll_backward(const Tensor& dlog_probs, const Tensor& dloss, const Tensor& target, int64_t ignore_index,
                  double scale) {
  check_cuda_tensors("nll_loss_backward_kernel", {&dlog_probs, &dloss, &target});
  const Geometry g = geometry(dlog_probs, target, "nll_loss_backward_kernel");
  LSF_CHECK(dloss.is_contiguous() && (dloss.numel() == 1 || dloss.numel() == g.N * g.K))
      << "internal: nll_loss_backward_kernel (CUDA) got dloss " << dloss.shape() << " for " << dlog_probs.shape();
  const int64_t total = dlog_probs.numel();
  if (total == 0) return;
  const int64_t gstride = dloss.numel() == 1 ? 0 : 1;
  DeviceGuard guard(dlog_probs.device().index);
  dispatch_cuda_float(dlog_probs.dtype(), "nll_loss backward", [&]<typename T>() {
    dispatch_cuda_index(target.dtype(), "nll_loss backward", [&]<typename I>() {
      auto go = [&]<typename Index>() {
        nll_backward_kernel<T, I, Index><<<blocks_for(total), kThreads, 0, current_stream()>>>(
            ptr<T>(dlog_probs), ptr<const T>(dloss), gstride, ptr<const I>(target), Index(g.C), Index(g.K),
            Index(total), ignore_index, scale);
      };
      if (total < (int64_t(1) << 31)) go.template operator()<uint32_t>();
      else go.template operator()<int64_t>();
      LSF_CUDA_CHECK_LAUNCH("nll_loss_backward_kernel");
    });
  });
}

}  // namespace

LSF_REGISTER_KERNEL(cross_entropy_forward_kernel, DeviceType::CUDA, cross_entropy_forward);
LSF_REGISTER_KERNEL(cross_entropy_backward_kernel, DeviceType::CUDA, cross_entropy_backward);
LSF_REGISTER_KERNEL(nll_loss_forward_kernel, DeviceType::CUDA, nll_forward);
LSF_REGISTER_KERNEL(nll_loss_backward_kernel, DeviceType::CUDA, nll_backward);

}  // namespace lsf::cuda
