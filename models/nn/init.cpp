// Initialisers (see init.h). Uniform and normal fills run on t's device through ops/factory.h;
// trunc_normal_ transforms f64 uniforms on the host (erfinv is not a device op) and copies the
// result into t, converting to t's dtype and device.
#include "lsformer/models/nn/init.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/factory.h"

namespace lsf::nn::init {
namespace {

// Inverse error function in double: Giles' single-precision approximation ("Approximating the
// erfinv function", GPU Computing Gems, 2011) as a start, then two Newton steps on
// erf(x) − y, each of which roughly squares the relative error; the result is then accurate to
// a few ulps except where y itself is within a few ulps of ±1.
double erfinv(double y) {
  if (y <= -1.0) return y == -1.0 ? -std::numeric_limits<double>::infinity() : std::nan("");
  if (y >= 1.0) return y == 1.0 ? std::numeric_limits<double>::infinity() : std::nan("");
  double w = -std::log((1.0 - y) * (1.0 + y)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * y;
  constexpr double kTwoOverSqrtPi = 1.1283791670955126;
  for (int i = 0; i < 2; ++i) {
    const double slope = kTwoOverSqrtPi * std::exp(-x * x);
    if (slope == 0.0) break;
    x -= (std::erf(x) - y) / slope;
  }
  return x;
}

double normal_cdf(double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); }

int64_t fan(const Tensor& t, FanMode mode) {
  const Fans f = calculate_fan_in_and_fan_out(t);
  return mode == FanMode::FanIn ? f.fan_in : f.fan_out;
}

void check_float(const Tensor& t, const char* op) {
  LSF_CHECK(t.defined()) << op << ": the tensor is undefined";
  LSF_CHECK(is_floating(t.dtype())) << op << ": expected a floating-point tensor, got " << t.dtype()
                                    << " of shape " << t.shape();
}

thread_local int skip_random_init_depth = 0;

}  // namespace

SkipRandomInit::SkipRandomInit() { ++skip_random_init_depth; }
SkipRandomInit::~SkipRandomInit() { --skip_random_init_depth; }
bool SkipRandomInit::active() { return skip_random_init_depth > 0; }

Fans calculate_fan_in_and_fan_out(const Tensor& t) {
  LSF_CHECK(t.defined()) << "calculate_fan_in_and_fan_out: the tensor is undefined";
  LSF_CHECK(t.dim() >= 2) << "calculate_fan_in_and_fan_out: fan in and fan out need a tensor with at least 2 "
                             "dimensions, got shape "
                          << t.shape();
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv:
    case Nonlinearity::Sigmoid: return 1.0;
    case Nonlinearity::Tanh: return 5.0 / 3.0;
    case Nonlinearity::ReLU: return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: {
      const double slope = param.value_or(0.01);
      return std::sqrt(2.0 / (1.0 + slope * slope));
    }
    case Nonlinearity::SELU: return 0.75;
  }
  LSF_FAIL() << "calculate_gain: unknown nonlinearity " << int(nonlinearity);
}

const Tensor& uniform_(const Tensor& t, double low, double high, Generator* generator) {
  check_float(t, "init::uniform_");
  if (SkipRandomInit::active()) return t;
  return ::lsf::uniform_(t, low, high, generator);
}

const Tensor& normal_(const Tensor& t, double mean, double std, Generator* generator) {
  check_float(t, "init::normal_");
  if (SkipRandomInit::active()) return t;
  return ::lsf::normal_(t, mean, std, generator);
}

const Tensor& trunc_normal_(const Tensor& t, double mean, double std, double a, double b, Generator* generator) {
  check_float(t, "init::trunc_normal_");
  LSF_CHECK(std > 0 && a < b) << "init::trunc_normal_: needs std > 0 and a < b, got std " << std << ", bounds [" << a
                              << ", " << b << "]";
  LSF_CHECK(mean >= a - 2 * std && mean <= b + 2 * std)
      << "init::trunc_normal_: mean " << mean << " is more than 2 std (" << std << ") from [" << a << ", " << b
      << "]: the values would mostly be clamped";
  if (t.numel() == 0 || SkipRandomInit::active()) return t;
  NoGradGuard no_grad;
  // u ~ U(2Φ(α) − 1, 2Φ(β) − 1), value = mean + std·√2·erfinv(u): the normal quantile of a
  // uniform draw from [Φ(α), Φ(β)].
  const double lo = 2.0 * normal_cdf((a - mean) / std) - 1.0, hi = 2.0 * normal_cdf((b - mean) / std) - 1.0;
  Tensor host = empty(t.shape(), TensorOptions(kF64));
  ::lsf::uniform_(host, lo, hi, generator);
  double* p = host.data_ptr<double>();
  const double scale = std * std::sqrt(2.0);
  const int64_t n = host.numel();
  // Elementwise (each value depends on its own uniform only), so threads change nothing.
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (int64_t i = 0; i < n; ++i) p[i] = std::clamp(mean + scale * erfinv(p[i]), a, b);
  t.copy_(host.to(t.device()));
  return t;
}

const Tensor& xavier_uniform_(const Tensor& t, double gain, Generator* generator) {
  check_float(t, "init::xavier_uniform_");
  if (SkipRandomInit::active()) return t;
  if (t.numel() == 0) return t;
  const Fans f = calculate_fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / double(f.fan_in + f.fan_out));
  return ::lsf::uniform_(t, -bound, bound, generator);
}

const Tensor& xavier_normal_(const Tensor& t, double gain, Generator* generator) {
  check_float(t, "init::xavier_normal_");
  if (SkipRandomInit::active()) return t;
  if (t.numel() == 0) return t;
  const Fans f = calculate_fan_in_and_fan_out(t);
  return ::lsf::normal_(t, 0.0, gain * std::sqrt(2.0 / double(f.fan_in + f.fan_out)), generator);
}

const Tensor& kaiming_uniform_(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity,
                               Generator* generator) {
  check_float(t, "init::kaiming_uniform_");
  if (SkipRandomInit::active()) return t;
  if (t.numel() == 0) return t;
  const double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / double(fan(t, mode)));
  return ::lsf::uniform_(t, -bound, bound, generator);
}

const Tensor& kaiming_normal_(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity,
                              Generator* generator) {
  check_float(t, "init::kaiming_normal_");
  if (SkipRandomInit::active()) return t;
  if (t.numel() == 0) return t;
  return ::lsf::normal_(t, 0.0, calculate_gain(nonlinearity, a) / std::sqrt(double(fan(t, mode))), generator);
}

const Tensor& constant_(const Tensor& t, double value) {
  LSF_CHECK(t.defined()) << "init::constant_: the tensor is undefined";
  NoGradGuard no_grad;
  return t.fill_(value);
}
const Tensor& zeros_(const Tensor& t) { return constant_(t, 0.0); }
const Tensor& ones_(const Tensor& t) { return constant_(t, 1.0); }

}  // namespace lsf::nn::init
