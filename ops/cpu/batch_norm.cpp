// CPU batch norm, forward and backward, over x viewed as [N, C, S] (contiguous).
//
// Work is split over channels (each channel's N runs of S values are independent). Per channel
// the sums run in double: the mean, then the biased variance as Σ(x − mean)²/M (two passes, no
// cancellation), and in backward Σdy and Σdy·x̂; so the statistics of a channel of M values
// carry about M·2⁻⁵³ relative error before the final rounding to the dtype. Each run of S
// values is summed in SIMD lanes (omp simd reductions: one partial sum per lane, combined at
// the end of the run), a fixed order for a given build whatever the thread count; a serial
// chain of double additions would wait on the adder's latency at every element.
#include <cmath>

#include "lsformer/ops/batch_norm.h"
#include "lsformer/ops/kernels/batch_norm.h"
#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/cpu/simd.h"

namespace lsf::cpu {
namespace {

// One channel's values: N runs of S contiguous values, run n at n·stride (stride = C·S).
template <typename T>
struct Channel {
  const T* x;
  int64_t N, stride, S;
};

// Σ x over the channel, in double.
template <typename T>
LSF_SIMD_CLONES double channel_sum(Channel<T> ch) {
  double s = 0.0;
  for (int64_t n = 0; n < ch.N; ++n) {
    const T* row = ch.x + n * ch.stride;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < ch.S; ++i) s += double(row[i]);
  }
  return s;
}

// Σ (x − mu)² over the channel, in double.
template <typename T>
LSF_SIMD_CLONES double channel_squared_deviation(Channel<T> ch, double mu) {
  double v = 0.0;
  for (int64_t n = 0; n < ch.N; ++n) {
    const T* row = ch.x + n * ch.stride;
#pragma omp simd reduction(+ : v)
    for (int64_t i = 0; i < ch.S; ++i) {
      const double d = double(row[i]) - mu;
      v += d * d;
    }
  }
  return v;
}

// y = x·scale + shift over the channel (y laid out as x).
template <typename T>
LSF_SIMD_CLONES void channel_affine(T* y, Channel<T> ch, T scale, T shift) {
  for (int64_t n = 0; n < ch.N; ++n) {
    const T* row = ch.x + n * ch.stride;
    T* out = y + n * ch.stride;
#pragma omp simd
    for (int64_t i = 0; i < ch.S; ++i) out[i] = row[i] * scale + shift;
  }
}

// Σ dy and Σ dy·(x − mu) over the channel, in double (dy laid out as x).
template <typename T>
LSF_SIMD_CLONES void channel_grad_sums(const T* dy, Channel<T> ch, double mu, double& sum_dy, double& sum_dy_xc) {
  double a = 0.0, b = 0.0;
  for (int64_t n = 0; n < ch.N; ++n) {
    const T* xr = ch.x + n * ch.stride;
    const T* gr = dy + n * ch.stride;
#pragma omp simd reduction(+ : a, b)
    for (int64_t i = 0; i < ch.S; ++i) {
      a += double(gr[i]);
      b += double(gr[i]) * (double(xr[i]) - mu);
    }
  }
  sum_dy = a;
  sum_dy_xc = b;
}

// dx = k·dy + a·x + b over the channel.
template <typename T>
LSF_SIMD_CLONES void channel_input_grad(T* dx, const T* dy, Channel<T> ch, T k, T a, T b) {
  for (int64_t n = 0; n < ch.N; ++n) {
    const T* xr = ch.x + n * ch.stride;
    const T* gr = dy + n * ch.stride;
    T* dr = dx + n * ch.stride;
#pragma omp simd
    for (int64_t i = 0; i < ch.S; ++i) dr[i] = k * gr[i] + a * xr[i] + b;
  }
}

template <typename T>
void forward_typed(const Tensor& y, const Tensor& mean, const Tensor& invstd, const Tensor& var, const Tensor& x,
                   const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                   bool training, double eps) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2);
  const T* xp = x.data_ptr<T>();
  T* yp = y.data_ptr<T>();
  T* mp = mean.data_ptr<T>();
  T* ip = invstd.data_ptr<T>();
  T* vp = training ? var.data_ptr<T>() : nullptr;
  const T* wp = weight.defined() ? weight.data_ptr<T>() : nullptr;
  const T* bp = bias.defined() ? bias.data_ptr<T>() : nullptr;
  const T* rm = training ? nullptr : running_mean.data_ptr<T>();
  const T* rv = training ? nullptr : running_var.data_ptr<T>();
  const double M = double(N * S);
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain && C > 1)
  for (int64_t c = 0; c < C; ++c) {
    const Channel<T> ch{xp + c * S, N, C * S, S};
    double mu, istd;
    if (training) {
      mu = channel_sum(ch) / M;
      const double v = channel_squared_deviation(ch, mu) / M;
      vp[c] = T(v);
      istd = 1.0 / std::sqrt(v + eps);
    } else {
      mu = double(rm[c]);
      istd = 1.0 / std::sqrt(double(rv[c]) + eps);
    }
    mp[c] = T(mu);
    ip[c] = T(istd);
    // y = x·scale + shift with scale = w·invstd, shift = b − mean·scale.
    const double scale = (wp ? double(wp[c]) : 1.0) * istd;
    channel_affine(yp + c * S, ch, T(scale), T((bp ? double(bp[c]) : 0.0) - mu * scale));
  }
}

template <typename T>
void backward_typed(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x,
                    const Tensor& mean, const Tensor& invstd, const Tensor& weight, bool training) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2);
  const T* xp = x.data_ptr<T>();
  const T* gp = dy.data_ptr<T>();
  const T* mp = mean.data_ptr<T>();
  const T* ip = invstd.data_ptr<T>();
  const T* wp = weight.defined() ? weight.data_ptr<T>() : nullptr;
  T* dxp = dx.defined() ? dx.data_ptr<T>() : nullptr;
  T* dwp = dweight.defined() ? dweight.data_ptr<T>() : nullptr;
  T* dbp = dbias.defined() ? dbias.data_ptr<T>() : nullptr;
  const double M = double(N * S);
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain && C > 1)
  for (int64_t c = 0; c < C; ++c) {
    const Channel<T> ch{xp + c * S, N, C * S, S};
    const double mu = double(mp[c]), istd = double(ip[c]);
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    channel_grad_sums(gp + c * S, ch, mu, sum_dy, sum_dy_xhat);
    sum_dy_xhat *= istd;
    if (dwp) dwp[c] = T(sum_dy_xhat);
    if (dbp) dbp[c] = T(sum_dy);
    if (!dxp) continue;
    const double w = wp ? double(wp[c]) : 1.0;
    // dx = k·dy + a·x + b per channel: k = w·invstd; training adds −k·(Σdy/M + x̂·Σdy·x̂/M).
    const double k = w * istd;
    const double a = training ? -k * istd * sum_dy_xhat / M : 0.0;
    const double b = training ? -k * sum_dy / M - a * mu : 0.0;
    channel_input_grad(dxp + c * S, gp + c * S, ch, T(k), T(a), T(b));
  }
}

void batch_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& invstd, const Tensor& var, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                        const Tensor& running_var, bool training, double eps) {
  dispatch_float(x.dtype(), "batch_norm", [&]<typename T>() {
    forward_typed<T>(y, mean, invstd, var, x, weight, bias, running_mean, running_var, training, eps);
  });
}

void batch_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                         const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                         bool training) {
  dispatch_float(x.dtype(), "batch_norm_backward", [&]<typename T>() {
    backward_typed<T>(dx, dweight, dbias, dy, x, mean, invstd, weight, training);
  });
}

}  // namespace

LSF_REGISTER_KERNEL(batch_norm_forward_kernel, DeviceType::CPU, batch_norm_forward);
LSF_REGISTER_KERNEL(batch_norm_backward_kernel, DeviceType::CPU, batch_norm_backward);

}  // namespace lsf::cpu
