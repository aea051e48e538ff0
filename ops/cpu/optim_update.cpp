// CPU optimizer kernels: one pass over parameter, gradient and state per update, split over
// OpenMP threads by the loop machinery of ops/cpu/loops.h (chunks of a long contiguous run, or
// rows of a strided one). Operations and their rounding follow PyTorch 1.13's single-tensor
// loops step by step (see ops/optim_update.h); every element is independent, so the result does
// not depend on the thread count.
#include <cmath>
#include <limits>
#include <vector>

#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/optim_update.h"
#include "lsformer/ops/kernels/optim_update.h"

namespace lsf::cpu {
namespace {

// Runs kernel.template run<Dense>(ptrs, element_strides, n) over every run of the same-shaped
// tensors `ts` (any strides). Dense runs (every operand contiguous) get strides fixed at 1 at
// compile time, so the compiler vectorises them.
template <typename T, size_t N, typename Kernel>
void for_each_run_typed(const std::array<const Tensor*, N>& ts, const Kernel& kernel) {
  for_each_run<N>(ts, [&](std::array<char*, N> p, std::array<int64_t, N> s, int64_t n) {
    bool dense = true;
    for (size_t k = 0; k < N; ++k) {
      s[k] /= int64_t(sizeof(T));  // bytes → elements
      dense = dense && s[k] == 1;
    }
    if (dense) {
      kernel.template run<true>(p, s, n);
    } else {
      kernel.template run<false>(p, s, n);
    }
  });
}

// ---- SGD ----

// Operands: param, grad, momentum buffer (the param again, unread, without momentum).
template <typename T, bool Momentum>
struct SgdKernel {
  // Coefficients rounded once to T, as PyTorch passes Python floats to T-typed kernels.
  T wd, momentum, keep, neg_lr;
  bool decay, nesterov, init;

  template <bool Dense>
  void run(std::array<char*, 3> ptr, std::array<int64_t, 3> s, int64_t n) const {
    T* __restrict p = reinterpret_cast<T*>(ptr[0]);
    const T* __restrict g = reinterpret_cast<const T*>(ptr[1]);
    T* __restrict b = reinterpret_cast<T*>(ptr[2]);
    const int64_t sp = Dense ? 1 : s[0], sg = Dense ? 1 : s[1], sb = Dense ? 1 : s[2];
    for (int64_t i = 0; i < n; ++i) {
      T pi = p[i * sp];
      T gi = g[i * sg];
      if (decay) gi = gi + wd * pi;
      if constexpr (Momentum) {
        const T buf = init ? gi : T(T(b[i * sb] * momentum) + keep * gi);
        b[i * sb] = buf;
        gi = nesterov ? T(gi + momentum * buf) : buf;
      }
      p[i * sp] = pi + neg_lr * gi;
    }
  }
};

template <typename T>
void sgd_typed(const Tensor& param, const Tensor& grad, const Tensor& buffer, const SgdUpdate& u) {
  const T wd = T(u.weight_decay), momentum = T(u.momentum), keep = T(1.0 - u.dampening), neg_lr = T(-u.lr);
  const bool decay = u.weight_decay != 0.0;
  if (u.momentum == 0.0) {
    for_each_run_typed<T, 3>({&param, &grad, &param},
                             SgdKernel<T, false>{wd, momentum, keep, neg_lr, decay, u.nesterov, u.init_buffer});
  } else {
    for_each_run_typed<T, 3>({&param, &grad, &buffer},
                             SgdKernel<T, true>{wd, momentum, keep, neg_lr, decay, u.nesterov, u.init_buffer});
  }
}

void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& buffer, const SgdUpdate& u) {
  dispatch_float(param.dtype(), "sgd_update_", [&]<typename T>() { sgd_typed<T>(param, grad, buffer, u); });
}

// ---- Adam / AdamW ----

// Operands: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (exp_avg_sq again, unread,
// without amsgrad).
template <typename T, bool AmsGrad>
struct AdamKernel {
  AdamCoefficients<T> coefficients;  // ops/optim_update.h, shared with the CUDA kernel

  template <bool Dense>
  void run(std::array<char*, 5> ptr, std::array<int64_t, 5> s, int64_t n) const {
    T* __restrict p = reinterpret_cast<T*>(ptr[0]);
    const T* __restrict g = reinterpret_cast<const T*>(ptr[1]);
    T* __restrict m = reinterpret_cast<T*>(ptr[2]);
    T* __restrict v = reinterpret_cast<T*>(ptr[3]);
    T* __restrict vmax = reinterpret_cast<T*>(ptr[4]);
    const auto& [neg_step_size, bc2_sqrt, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, wd, decay_factor, l2,
                 decoupled, amsgrad] = coefficients;
    const int64_t sp = Dense ? 1 : s[0], sg = Dense ? 1 : s[1], sm = Dense ? 1 : s[2], sv = Dense ? 1 : s[3],
                  sx = Dense ? 1 : s[4];
    for (int64_t i = 0; i < n; ++i) {
      T pi = p[i * sp];
      T gi = g[i * sg];
      if (l2) gi = gi + wd * pi;
      if (decoupled) pi = pi * decay_factor;
      const T mi = T(m[i * sm] * beta1) + one_minus_beta1 * gi;
      const T vi = T(v[i * sv] * beta2) + T(one_minus_beta2 * gi) * gi;
      m[i * sm] = mi;
      v[i * sv] = vi;
      T v_hat = vi;
      if constexpr (AmsGrad) {
        const T old = vmax[i * sx];
        v_hat = (vi > old || vi != vi) ? vi : old;  // torch.maximum: a NaN on either side wins
        vmax[i * sx] = v_hat;
      }
      const T denom = T(std::sqrt(v_hat) / bc2_sqrt) + eps;
      p[i * sp] = pi + T(neg_step_size * mi) / denom;
    }
  }
};

template <typename T>
void adam_typed(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const Tensor& max_exp_avg_sq, const AdamUpdate& u) {
  if (u.amsgrad) {
    for_each_run_typed<T, 5>({&param, &grad, &exp_avg, &exp_avg_sq, &max_exp_avg_sq},
                             AdamKernel<T, true>{adam_coefficients<T>(u)});
  } else {
    for_each_run_typed<T, 5>({&param, &grad, &exp_avg, &exp_avg_sq, &exp_avg_sq},
                             AdamKernel<T, false>{adam_coefficients<T>(u)});
  }
}

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& max_exp_avg_sq, const AdamUpdate& u) {
  dispatch_float(param.dtype(), "adam_update_",
                 [&]<typename T>() { adam_typed<T>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, u); });
}

// The multi-tensor step is a loop on the CPU: each tensor already runs as one fused pass.
void adam_multi_update(const std::vector<AdamTensor>& list) {
  for (const AdamTensor& t : list) adam_update(t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq, t.u);
}

// ---- norms and scaling (clip_grad_norm_) ----

// Σ f(x[i]) over [begin, end) in double, in 8 interleaved partial sums (independent additions
// the compiler can overlap and vectorise) combined in a fixed order.
template <typename T, typename F>
double lane_sum(const T* x, int64_t begin, int64_t end, F f) {
  constexpr int kLanes = 8;
  double lane[kLanes] = {};
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lane[k] += f(double(x[i + k]));
  for (int k = 0; i < end; ++i, ++k) lane[k] += f(double(x[i]));
  double acc = 0.0;
  for (double l : lane) acc += l;
  return acc;
}

// Σ|x|^p (or max |x|) over a contiguous array. Fixed chunks of kParallelGrain elements are
// summed independently and the partials added in chunk order, so the result is the same bit
// for bit whatever the thread count (a resumed run clips exactly as the uninterrupted one).
template <typename T>
double norm_pow_sum_contiguous(const T* x, int64_t n, double p) {
  const bool is_max = std::isinf(p);
  const int64_t chunks = (n + kParallelGrain - 1) / kParallelGrain;
  std::vector<double> partial(size_t(chunks), 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kParallelGrain, end = std::min(n, begin + kParallelGrain);
    double acc = 0.0;
    if (is_max) {
      for (int64_t i = begin; i < end; ++i) {
        const double a = std::fabs(double(x[i]));
        if (std::isnan(a)) {
          acc = a;
          break;
        }
        acc = std::max(acc, a);
      }
    } else if (p == 2.0) {
      acc = lane_sum(x, begin, end, [](double v) { return v * v; });
    } else if (p == 1.0) {
      acc = lane_sum(x, begin, end, [](double v) { return std::fabs(v); });
    } else {
      acc = lane_sum(x, begin, end, [p](double v) { return std::pow(std::fabs(v), p); });
    }
    partial[size_t(c)] = acc;
  }
  double total = 0.0;
  for (double v : partial) {
    if (is_max) {
      total = (std::isnan(v) || std::isnan(total)) ? std::numeric_limits<double>::quiet_NaN() : std::max(total, v);
    } else {
      total += v;
    }
  }
  return total;
}

double norm_pow_sum_of(const Tensor& x, double p) {
  // Gradients are contiguous in practice (AccumulateGrad owns them); a strided one is copied.
  const Tensor c = x.contiguous();
  return dispatch_float(c.dtype(), "norm_pow_sum", [&]<typename T>() {
    return norm_pow_sum_contiguous<T>(c.data_ptr<T>(), c.numel(), p);
  });
}

std::vector<double> norm_pow_sums_of(const TensorList& xs, double p) {
  std::vector<double> sums;
  sums.reserve(xs.size());
  for (const Tensor& x : xs) sums.push_back(norm_pow_sum_of(x, p));
  return sums;
}

void scale_inplace(const Tensor& x, double factor) {
  dispatch_float(x.dtype(), "scale_", [&]<typename T>() {
    const T f = T(factor);
    map<T, T>(x, [f](T v) { return T(v * f); }, x);
  });
}

}  // namespace

LSF_REGISTER_KERNEL(sgd_update_kernel, DeviceType::CPU, sgd_update);
LSF_REGISTER_KERNEL(adam_update_kernel, DeviceType::CPU, adam_update);
LSF_REGISTER_KERNEL(adam_multi_update_kernel, DeviceType::CPU, adam_multi_update);
LSF_REGISTER_KERNEL(norm_pow_sum_kernel, DeviceType::CPU, norm_pow_sum_of);
LSF_REGISTER_KERNEL(norm_pow_sums_kernel, DeviceType::CPU, norm_pow_sums_of);
LSF_REGISTER_KERNEL(scale_inplace_kernel, DeviceType::CPU, scale_inplace);

}  // namespace lsf::cpu
