// CPU optimizer kernels: one pass over parameter, gradient and state per update, split over
// OpenMP threads by the loop machinery of ops/cpu/loops.h (chunks of a long contiguous run, or
// rows of a strided one). Operations and their rounding follow PyTorch 1.13's single-tensor
// loops step by step (see ops/optim_update.h); every element is independent, so the result does
// not depend on the thread count.
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/loops.h"
#include "ops/optim_update.h"

namespace lsf::cpu {
namespace {

// Calls elem(ptrs) with one pointer per operand for every element of the same-shaped tensors
// `ts` (any strides). Dense runs (every operand contiguous) get plain indexed pointers.
template <typename T, size_t N, typename Elem>
void for_each_element(const std::array<const Tensor*, N>& ts, Elem elem) {
  for_each_run<N>(ts, [&](std::array<char*, N> p, std::array<int64_t, N> s, int64_t n) {
    bool dense = true;
    for (size_t k = 0; k < N; ++k) dense = dense && s[k] == int64_t(sizeof(T));
    std::array<T*, N> q;
    if (dense) {
      for (int64_t i = 0; i < n; ++i) {
        for (size_t k = 0; k < N; ++k) q[k] = reinterpret_cast<T*>(p[k]) + i;
        elem(q);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        for (size_t k = 0; k < N; ++k) q[k] = reinterpret_cast<T*>(p[k] + i * s[k]);
        elem(q);
      }
    }
  });
}

// ---- SGD ----

template <typename T>
void sgd_typed(const Tensor& param, const Tensor& grad, const Tensor& buffer, const SgdUpdate& u) {
  // Coefficients rounded once to T, as PyTorch passes Python floats to T-typed kernels.
  const T wd = T(u.weight_decay), momentum = T(u.momentum), keep = T(1.0 - u.dampening), neg_lr = T(-u.lr);
  const bool decay = u.weight_decay != 0.0, nesterov = u.nesterov, init = u.init_buffer;
  if (u.momentum == 0.0) {
    for_each_element<T, 2>({&param, &grad}, [=](std::array<T*, 2> q) {
      T& p = *q[0];
      T g = *q[1];
      if (decay) g = g + wd * p;
      p = p + neg_lr * g;
    });
    return;
  }
  for_each_element<T, 3>({&param, &grad, &buffer}, [=](std::array<T*, 3> q) {
    T& p = *q[0];
    T& buf = *q[2];
    T g = *q[1];
    if (decay) g = g + wd * p;
    buf = init ? g : T(buf * momentum) + keep * g;
    const T d = nesterov ? T(g + momentum * buf) : buf;
    p = p + neg_lr * d;
  });
}

void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& buffer, const SgdUpdate& u) {
  dispatch_float(param.dtype(), "sgd_update_", [&]<typename T>() { sgd_typed<T>(param, grad, buffer, u); });
}

// ---- Adam / AdamW ----

template <typename T>
T nan_max(T a, T b) {  // torch.maximum: a NaN operand wins
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return a > b ? a : b;
}

template <typename T, bool AmsGrad>
void adam_typed(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const Tensor& max_exp_avg_sq, const AdamUpdate& u) {
  const double t = double(u.step);
  const double bias_correction1 = 1.0 - std::pow(u.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(u.beta2, t);
  const T neg_step_size = T(-(u.lr / bias_correction1));
  const T bc2_sqrt = T(std::sqrt(bias_correction2));
  const T beta1 = T(u.beta1), one_minus_beta1 = T(1.0 - u.beta1);
  const T beta2 = T(u.beta2), one_minus_beta2 = T(1.0 - u.beta2);
  const T eps = T(u.eps), wd = T(u.weight_decay), decay_factor = T(1.0 - u.lr * u.weight_decay);
  const bool l2 = !u.decoupled && u.weight_decay != 0.0, decoupled = u.decoupled;

  auto elem = [=](auto q) {
    T& p = *q[0];
    T& m = *q[2];
    T& v = *q[3];
    T g = *q[1];
    if (l2) g = g + wd * p;
    if (decoupled) p = p * decay_factor;
    m = T(m * beta1) + one_minus_beta1 * g;
    v = T(v * beta2) + T(one_minus_beta2 * g) * g;
    T v_hat = v;
    if constexpr (AmsGrad) {
      T& vmax = *q[4];
      vmax = nan_max(vmax, v);
      v_hat = vmax;
    }
    const T denom = T(std::sqrt(v_hat) / bc2_sqrt) + eps;
    p = p + T(neg_step_size * m) / denom;
  };
  if constexpr (AmsGrad) {
    for_each_element<T, 5>({&param, &grad, &exp_avg, &exp_avg_sq, &max_exp_avg_sq}, elem);
  } else {
    for_each_element<T, 4>({&param, &grad, &exp_avg, &exp_avg_sq}, elem);
  }
}

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& max_exp_avg_sq, const AdamUpdate& u) {
  dispatch_float(param.dtype(), "adam_update_", [&]<typename T>() {
    if (u.amsgrad) {
      adam_typed<T, true>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, u);
    } else {
      adam_typed<T, false>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, u);
    }
  });
}

// ---- norms and scaling (clip_grad_norm_) ----

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
      for (int64_t i = begin; i < end; ++i) acc += double(x[i]) * double(x[i]);
    } else if (p == 1.0) {
      for (int64_t i = begin; i < end; ++i) acc += std::fabs(double(x[i]));
    } else {
      for (int64_t i = begin; i < end; ++i) acc += std::pow(std::fabs(double(x[i])), p);
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

double norm_pow_sum(const Tensor& x, double p) {
  // Gradients are contiguous in practice (AccumulateGrad owns them); a strided one is copied.
  const Tensor c = x.contiguous();
  return dispatch_float(c.dtype(), "norm_pow_sum", [&]<typename T>() {
    return norm_pow_sum_contiguous<T>(c.data_ptr<T>(), c.numel(), p);
  });
}

void scale_inplace(const Tensor& x, double factor) {
  dispatch_float(x.dtype(), "scale_", [&]<typename T>() {
    const T f = T(factor);
    for_each_element<T, 1>({&x}, [f](std::array<T*, 1> q) { *q[0] = *q[0] * f; });
  });
}

}  // namespace

LSF_REGISTER_KERNEL(sgd_update_kernel, DeviceType::CPU, sgd_update);
LSF_REGISTER_KERNEL(adam_update_kernel, DeviceType::CPU, adam_update);
LSF_REGISTER_KERNEL(norm_pow_sum_kernel, DeviceType::CPU, norm_pow_sum);
LSF_REGISTER_KERNEL(scale_inplace_kernel, DeviceType::CPU, scale_inplace);

}  // namespace lsf::cpu
