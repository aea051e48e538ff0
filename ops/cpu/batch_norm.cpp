// CPU batch norm, forward and backward, over x viewed as [N, C, S] (contiguous).
//
// Work is split over channels (each channel's N runs of S values are independent). Per channel
// the sums run in double: the mean, then the biased variance as Σ(x − mean)²/M (two passes, no
// cancellation), and in backward Σdy and Σdy·x̂; so the statistics of a channel of M values
// carry about M·2⁻⁵³ relative error before the final rounding to the dtype.
#include <cmath>

#include "lsformer/ops/batch_norm.h"
#include "lsformer/ops/kernels/batch_norm.h"
#include "lsformer/ops/cpu/loops.h"

namespace lsf::cpu {
namespace {

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
    double mu, istd;
    if (training) {
      double s = 0.0;
      for (int64_t n = 0; n < N; ++n) {
        const T* row = xp + (n * C + c) * S;
        for (int64_t i = 0; i < S; ++i) s += double(row[i]);
      }
      mu = s / M;
      double v = 0.0;
      for (int64_t n = 0; n < N; ++n) {
        const T* row = xp + (n * C + c) * S;
        for (int64_t i = 0; i < S; ++i) {
          const double d = double(row[i]) - mu;
          v += d * d;
        }
      }
      v /= M;
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
    const T sc = T(scale), sh = T((bp ? double(bp[c]) : 0.0) - mu * scale);
    for (int64_t n = 0; n < N; ++n) {
      const T* row = xp + (n * C + c) * S;
      T* out = yp + (n * C + c) * S;
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) out[i] = row[i] * sc + sh;
    }
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
    const double mu = double(mp[c]), istd = double(ip[c]);
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = xp + (n * C + c) * S;
      const T* gr = gp + (n * C + c) * S;
      for (int64_t i = 0; i < S; ++i) {
        sum_dy += double(gr[i]);
        sum_dy_xhat += double(gr[i]) * (double(xr[i]) - mu);
      }
    }
    sum_dy_xhat *= istd;
    if (dwp) dwp[c] = T(sum_dy_xhat);
    if (dbp) dbp[c] = T(sum_dy);
    if (!dxp) continue;
    const double w = wp ? double(wp[c]) : 1.0;
    // dx = k·dy + a·x + b per channel: k = w·invstd; training adds −k·(Σdy/M + x̂·Σdy·x̂/M).
    const double k = w * istd;
    const double a = training ? -k * istd * sum_dy_xhat / M : 0.0;
    const double b = training ? -k * sum_dy / M - a * mu : 0.0;
    const T kt = T(k), at = T(a), bt = T(b);
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = xp + (n * C + c) * S;
      const T* gr = gp + (n * C + c) * S;
      T* dr = dxp + (n * C + c) * S;
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) dr[i] = kt * gr[i] + at * xr[i] + bt;
    }
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
