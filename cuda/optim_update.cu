// CUDA optimizer kernels: SGD and Adam / AdamW per tensor, the multi-tensor Adam / AdamW step
// (one launch over every parameter), and the gradient-norm helpers behind clip_grad_norm_.
//
// Arithmetic: the CPU's sequence of operations (ops/cpu/optim_update.cpp, PyTorch 1.13's
// single-tensor loops), each multiply, add, divide and square root rounded on its own
// (__fmul_rn, __fadd_rn, ... : nvcc would otherwise fuse a·b + c into one FMA), with the same
// coefficients rounded once to the element type on the host. f32 and f64 (as on the CPU).
//
// Multi-tensor step: a table of tensors (pointers, sizes, coefficients) and a table of
// (tensor, chunk) work items go to the device in one copy; block k updates chunk k. Entries
// whose parameter or gradient is not contiguous use the per-tensor strided kernel.
//
// norm_pow_sum: a fixed grid of at most kNormBlocks blocks, each summing a grid-stride share in
// double, then one block adding the partials in a fixed tree order: the same result on every
// run (not the CPU's summation order; both accumulate in double).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "lsformer/cuda/kb_common.cuh"
#include "lsformer/ops/optim_update.h"
#include "lsformer/ops/kernels/optim_update.h"

namespace lsf::cuda {
namespace {

// ---- correctly rounded single operations ----

__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double sqrt_rn(double a) { return __dsqrt_rn(a); }

// ---- SGD ----

template <typename T>
struct SgdCoefficients {
  T wd, momentum, keep, neg_lr;
  bool decay, use_momentum, nesterov, init;
};

template <typename T>
__device__ __forceinline__ void sgd_element(T& p, T g, T* buf, const SgdCoefficients<T>& k) {
  const T pi = p;
  if (k.decay) g = add(g, mul(k.wd, pi));
  if (k.use_momentum) {
    const T b = k.init ? g : add(mul(*buf, k.momentum), mul(k.keep, g));
    *buf = b;
    g = k.nesterov ? add(g, mul(k.momentum, b)) : b;
  }
  p = add(pi, mul(k.neg_lr, g));
}

// param, grad over `space` (operands 0, 1); buffer [n] contiguous (null without momentum).
template <typename T>
__global__ void sgd_kernel(T* param, const T* grad, T* buffer, OffsetCalc<2> space, int64_t n, bool dense,
                           SgdCoefficients<T> k) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[2] = {e, e};
    if (!dense) {
      const Offsets<2> o = space.get(e);
      off[0] = o.v[0];
      off[1] = o.v[1];
    }
    sgd_element(param[off[0]], grad[off[1]], buffer == nullptr ? nullptr : buffer + e, k);
  }
}

// ---- Adam / AdamW ----

// One element: p, g any layout; m, v, vmax (null without amsgrad) this element's state.
template <typename T>
__device__ __forceinline__ void adam_element(T& p, T g, T& m, T& v, T* vmax, const AdamCoefficients<T>& k) {
  T pi = p;
  if (k.l2) g = add(g, mul(k.wd, pi));
  if (k.decoupled) pi = mul(pi, k.decay_factor);
  const T mi = add(mul(m, k.beta1), mul(k.one_minus_beta1, g));
  const T vi = add(mul(v, k.beta2), mul(mul(k.one_minus_beta2, g), g));
  m = mi;
  v = vi;
  T v_hat = vi;
  if (vmax != nullptr) {
    const T old = *vmax;
    v_hat = (vi > old || vi != vi) ? vi : old;  // torch.maximum: a NaN on either side wins
    *vmax = v_hat;
  }
  const T denom = add(div(sqrt_rn(v_hat), k.bc2_sqrt), k.eps);
  p = add(pi, div(mul(k.neg_step_size, mi), denom));
}

// param, grad over `space` (operands 0, 1); exp_avg, exp_avg_sq, max_exp_avg_sq [n] contiguous.
template <typename T>
__global__ void adam_kernel(T* param, const T* grad, T* m, T* v, T* vmax, OffsetCalc<2> space, int64_t n,
                            bool dense, AdamCoefficients<T> k) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[2] = {e, e};
    if (!dense) {
      const Offsets<2> o = space.get(e);
      off[0] = o.v[0];
      off[1] = o.v[1];
    }
    adam_element(param[off[0]], grad[off[1]], m[e], v[e], vmax == nullptr ? nullptr : vmax + e, k);
  }
}

// ---- multi-tensor Adam / AdamW ----

constexpr int64_t kChunk = 16384;  // elements per work item
constexpr int kMultiThreads = 512;

template <typename T>
struct MultiTensor {
  T* param;
  const T* grad;
  T* m;
  T* v;
  T* vmax;  // null without amsgrad
  int64_t n;
  AdamCoefficients<T> k;
};

struct WorkItem {
  int32_t tensor;
  int32_t chunk;
};

template <typename T>
__global__ void adam_multi_kernel(const MultiTensor<T>* __restrict__ tensors, const WorkItem* __restrict__ items) {
  const WorkItem item = items[blockIdx.x];
  const MultiTensor<T>& t = tensors[item.tensor];
  const AdamCoefficients<T> k = t.k;
  const int64_t begin = int64_t(item.chunk) * kChunk;
  const int64_t end = begin + kChunk < t.n ? begin + kChunk : t.n;
  for (int64_t e = begin + threadIdx.x; e < end; e += blockDim.x)
    adam_element(t.param[e], t.grad[e], t.m[e], t.v[e], t.vmax == nullptr ? nullptr : t.vmax + e, k);
}

// ---- norms and scaling ----

constexpr int kNormBlocks = 1024;
constexpr int kNormThreads = 256;

enum class NormKind { kMax, kTwo, kOne, kPow };

__device__ __forceinline__ double combine(NormKind kind, double a, double b) {
  if (kind != NormKind::kMax) return a + b;
  return (a != a || b != b) ? __longlong_as_double(0x7ff8000000000000ll) : fmax(a, b);
}

// Block-wide combination in a fixed order: warp shuffles, then the warps' results.
__device__ double block_combine(NormKind kind, double acc) {
  __shared__ double warp_results[32];
  for (int offset = 16; offset > 0; offset /= 2) acc = combine(kind, acc, __shfl_down_sync(0xffffffffu, acc, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_results[warp] = acc;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  acc = threadIdx.x < warps ? warp_results[threadIdx.x] : 0.0;
  if (warp == 0)
    for (int offset = 16; offset > 0; offset /= 2)
      acc = combine(kind, acc, __shfl_down_sync(0xffffffffu, acc, offset));
  return acc;
}

// partial[block] = the block's share of Σ f(x) (or max).
template <typename T>
__global__ void norm_partial_kernel(const T* __restrict__ x, int64_t n, NormKind kind, double p,
                                    double* __restrict__ partial) {
  double acc = 0.0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const double a = fabs(double(kb::to_compute(x[i])));
    double term = a;
    if (kind == NormKind::kTwo) term = a * a;
    if (kind == NormKind::kPow) term = pow(a, p);
    acc = combine(kind, acc, term);
  }
  acc = block_combine(kind, acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// partial[count] combined by one block into partial[count].
__global__ void norm_final_kernel(const double* partial, int count, NormKind kind, double* result) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc = combine(kind, acc, partial[i]);
  acc = block_combine(kind, acc);
  if (threadIdx.x == 0) *result = acc;
}

template <typename T>
__global__ void scale_kernel(T* x, OffsetCalc<1> space, int64_t n, bool dense, T factor) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[1] = {e};
    if (!dense) off[0] = space.get(e).v[0];
    x[off[0]] = mul(x[off[0]], factor);
  }
}

// ---- entries ----

void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& buffer, const SgdUpdate& u) {
  const int64_t n = param.numel();
  if (n == 0) return;
  DeviceGuard guard(param.device().index);
  const bool dense = param.is_contiguous() && grad.is_contiguous();
  const auto space = make_offset_calc<2>(param.shape(), {&param.strides(), &grad.strides()}, "sgd_update_");
  kb::dispatch_f32_f64(param.dtype(), "sgd_update_", [&]<typename T>() {
    const SgdCoefficients<T> k{T(u.weight_decay), T(u.momentum), T(1.0 - u.dampening), T(-u.lr),
                               u.weight_decay != 0.0, u.momentum != 0.0, u.nesterov, u.init_buffer};
    T* buf = u.momentum != 0.0 ? static_cast<T*>(buffer.raw_data()) : nullptr;
    sgd_kernel<T><<<blocks_for(n), kThreads, 0, current_stream()>>>(
        static_cast<T*>(param.raw_data()), static_cast<const T*>(grad.raw_data()), buf, space, n, dense, k);
    LSF_CUDA_CHECK_LAUNCH("sgd_update_kernel");
  });
}

template <typename T>
void adam_typed(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const Tensor& max_exp_avg_sq, const AdamUpdate& u) {
  const int64_t n = param.numel();
  if (n == 0) return;
  const bool dense = param.is_contiguous() && grad.is_contiguous();
  const auto space = make_offset_calc<2>(param.shape(), {&param.strides(), &grad.strides()}, "adam_update_");
  T* vmax = u.amsgrad ? static_cast<T*>(max_exp_avg_sq.raw_data()) : nullptr;
  adam_kernel<T><<<blocks_for(n), kThreads, 0, current_stream()>>>(
      static_cast<T*>(param.raw_data()), static_cast<const T*>(grad.raw_data()), static_cast<T*>(exp_avg.raw_data()),
      static_cast<T*>(exp_avg_sq.raw_data()), vmax, space, n, dense, adam_coefficients<T>(u));
  LSF_CUDA_CHECK_LAUNCH("adam_update_kernel");
}

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& max_exp_avg_sq, const AdamUpdate& u) {
  DeviceGuard guard(param.device().index);
  kb::dispatch_f32_f64(param.dtype(), "adam_update_", [&]<typename T>() {
    adam_typed<T>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, u);
  });
}

// The contiguous entries of dtype T in one launch.
template <typename T>
void adam_multi_typed(const std::vector<const AdamTensor*>& list) {
  std::vector<MultiTensor<T>> tensors;
  std::vector<WorkItem> items;
  for (const AdamTensor* t : list) {
    const int64_t n = t->param.numel();
    if (n == 0) continue;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    LSF_CHECK(chunks < (int64_t(1) << 31) && tensors.size() < (size_t(1) << 31))
        << "adam_multi_update_: too many elements for one launch (parameter shape " << t->param.shape() << ")";
    for (int64_t c = 0; c < chunks; ++c) items.push_back({int32_t(tensors.size()), int32_t(c)});
    tensors.push_back({static_cast<T*>(t->param.raw_data()), static_cast<const T*>(t->grad.raw_data()),
                       static_cast<T*>(t->exp_avg.raw_data()), static_cast<T*>(t->exp_avg_sq.raw_data()),
                       t->u.amsgrad ? static_cast<T*>(t->max_exp_avg_sq.raw_data()) : nullptr, n,
                       adam_coefficients<T>(t->u)});
  }
  if (items.empty()) return;
  LSF_CHECK(items.size() < (size_t(1) << 31)) << "adam_multi_update_: too many chunks for one launch";
  // Both tables in one device buffer, tensors first (8-byte aligned: the item table follows
  // a whole number of 8-byte-aligned structs).
  const size_t tensor_bytes = tensors.size() * sizeof(MultiTensor<T>);
  const size_t item_bytes = items.size() * sizeof(WorkItem);
  std::vector<char> host(tensor_bytes + item_bytes);
  std::memcpy(host.data(), tensors.data(), tensor_bytes);
  std::memcpy(host.data() + tensor_bytes, items.data(), item_bytes);
  kb::DeviceBuffer device(host.size());
  // From pageable memory: the copy has read `host` when the call returns.
  LSF_CUDA_CHECK(cudaMemcpyAsync(device.as<char>(), host.data(), host.size(), cudaMemcpyHostToDevice,
                                 current_stream()));
  adam_multi_kernel<T><<<unsigned(items.size()), kMultiThreads, 0, current_stream()>>>(
      reinterpret_cast<const MultiTensor<T>*>(device.as<char>()),
      reinterpret_cast<const WorkItem*>(device.as<char>() + tensor_bytes));
  LSF_CUDA_CHECK_LAUNCH("adam_multi_update_kernel");
}

void adam_multi_update(const std::vector<AdamTensor>& list) {
  if (list.empty()) return;
  DeviceGuard guard(list.front().param.device().index);
  std::vector<const AdamTensor*> f32, f64;
  for (const AdamTensor& t : list) {
    const bool dense = t.param.is_contiguous() && t.grad.is_contiguous();
    if (dense && t.param.dtype() == DType::F32) {
      f32.push_back(&t);
    } else if (dense && t.param.dtype() == DType::F64) {
      f64.push_back(&t);
    } else {
      adam_update(t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq, t.u);  // strided or an error
    }
  }
  adam_multi_typed<float>(f32);
  adam_multi_typed<double>(f64);
}

NormKind norm_kind(double p) {
  return std::isinf(p) ? NormKind::kMax : p == 2.0 ? NormKind::kTwo : p == 1.0 ? NormKind::kOne : NormKind::kPow;
}

int norm_blocks(int64_t n) { return int(std::min<int64_t>(kNormBlocks, (n + kNormThreads - 1) / kNormThreads)); }

// The two launches of one tensor's norm (n > 0): partial sums of `blocks` grid-stride shares
// into partial[0, blocks), then their combination into *result, on the current stream.
void launch_norm(const Tensor& c, NormKind kind, double p, double* partial, double* result) {
  const int64_t n = c.numel();
  const int blocks = norm_blocks(n);
  kb::dispatch_floating(c.dtype(), "norm_pow_sum", [&]<typename T>() {
    norm_partial_kernel<T><<<blocks, kNormThreads, 0, current_stream()>>>(static_cast<const T*>(c.raw_data()), n,
                                                                          kind, p, partial);
    LSF_CUDA_CHECK_LAUNCH("norm_pow_sum_kernel");
  });
  norm_final_kernel<<<1, kNormThreads, 0, current_stream()>>>(partial, blocks, kind, result);
  LSF_CUDA_CHECK_LAUNCH("norm_pow_sum_kernel (final)");
}

double norm_pow_sum(const Tensor& x, double p) {
  const Tensor c = x.contiguous();
  const int64_t n = c.numel();
  if (n == 0) return 0.0;
  DeviceGuard guard(c.device().index);
  const int blocks = norm_blocks(n);
  kb::DeviceBuffer partial(size_t(blocks + 1) * sizeof(double));
  launch_norm(c, norm_kind(p), p, partial.as<double>(), partial.as<double>() + blocks);
  double result = 0.0;
  LSF_CUDA_CHECK(cudaMemcpyAsync(&result, partial.as<double>() + blocks, sizeof(double), cudaMemcpyDeviceToHost,
                                 current_stream()));
  LSF_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
  return result;
}

// Every tensor's norm_pow_sum with the same launches, the results gathered in one device array,
// then one copy and one synchronisation (xs non-empty tensors on one device: ops/optim_update.cpp).
std::vector<double> norm_pow_sums(const TensorList& xs, double p) {
  std::vector<double> results(xs.size(), 0.0);
  if (xs.empty()) return results;
  DeviceGuard guard(xs.front().device().index);
  TensorList contiguous;
  std::vector<int64_t> offsets;
  int64_t slots = 0;
  for (const Tensor& x : xs) {
    contiguous.push_back(x.contiguous());
    offsets.push_back(slots);
    slots += norm_blocks(x.numel());
  }
  kb::DeviceBuffer buffer(size_t(slots + int64_t(xs.size())) * sizeof(double));  // partials, then results
  double* base = buffer.as<double>();
  const NormKind kind = norm_kind(p);
  for (size_t i = 0; i < xs.size(); ++i) launch_norm(contiguous[i], kind, p, base + offsets[i], base + slots + i);
  LSF_CUDA_CHECK(cudaMemcpyAsync(results.data(), base + slots, xs.size() * sizeof(double), cudaMemcpyDeviceToHost,
                                 current_stream()));
  LSF_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
  return results;
}

void scale_inplace(const Tensor& x, double factor) {
  const int64_t n = x.numel();
  if (n == 0) return;
  DeviceGuard guard(x.device().index);
  const auto space = make_offset_calc<1>(x.shape(), {&x.strides()}, "scale_");
  kb::dispatch_f32_f64(x.dtype(), "scale_", [&]<typename T>() {
    scale_kernel<T><<<blocks_for(n), kThreads, 0, current_stream()>>>(static_cast<T*>(x.raw_data()), space, n,
                                                                      x.is_contiguous(), T(factor));
    LSF_CUDA_CHECK_LAUNCH("scale_inplace_kernel");
  });
}

}  // namespace

LSF_REGISTER_KERNEL(sgd_update_kernel, DeviceType::CUDA, sgd_update);
LSF_REGISTER_KERNEL(adam_update_kernel, DeviceType::CUDA, adam_update);
LSF_REGISTER_KERNEL(adam_multi_update_kernel, DeviceType::CUDA, adam_multi_update);
LSF_REGISTER_KERNEL(norm_pow_sum_kernel, DeviceType::CUDA, norm_pow_sum);
LSF_REGISTER_KERNEL(norm_pow_sums_kernel, DeviceType::CUDA, norm_pow_sums);
LSF_REGISTER_KERNEL(scale_inplace_kernel, DeviceType::CUDA, scale_inplace);

}  // namespace lsf::cuda
