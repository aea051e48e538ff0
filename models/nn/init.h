// Parameter initialisers, as torch.nn.init: each fills a tensor in place (not recorded by
// autograd, so it works on parameters that require grad) and returns it. Random ones draw from
// `generator` (the default generator when null) with the Philox fills of ops/factory.h.
//
// Fans follow torch.nn.init._calculate_fan_in_and_fan_out: for a tensor of shape
// [out, in, *receptive] (≥ 2-D), fan_in = in · ∏receptive and fan_out = out · ∏receptive
// (Linear [out, in]: fan_in = in; Conv2d [O, C/G, kH, kW]: fan_in = C/G·kH·kW).
// Zero-element tensors are left as they are (PyTorch warns and does nothing).
//
//   lsf::nn::init::kaiming_uniform_(linear.weight, /*a=*/std::sqrt(5.0));  // Linear's default
//   lsf::nn::init::trunc_normal_(w, /*mean=*/0.0, /*std=*/0.02);            // ViT / timm
#pragma once

#include <optional>

#include "lsformer/engine/random.h"
#include "lsformer/engine/tensor.h"

namespace lsf::nn::init {

// While one is alive on this thread, the random initialisers below (uniform_, normal_,
// trunc_normal_, xavier_*, kaiming_*) return without touching the tensor or the generator:
// for building a model only to count its parameters, or one whose state is loaded right after
// (a checkpoint). Constant fills (zeros_, ones_, constant_) still run. Guards nest.
//   { nn::init::SkipRandomInit skip; ViLClassifier m(options); count = m.parameter_count(); }
class SkipRandomInit {
 public:
  SkipRandomInit();
  ~SkipRandomInit();
  SkipRandomInit(const SkipRandomInit&) = delete;
  SkipRandomInit& operator=(const SkipRandomInit&) = delete;
  static bool active();
};

enum class Nonlinearity { Linear, Conv, Sigmoid, Tanh, ReLU, LeakyReLU, SELU };
enum class FanMode { FanIn, FanOut };

struct Fans {
  int64_t fan_in = 0;
  int64_t fan_out = 0;
};
// Throws for tensors with fewer than 2 dimensions (as PyTorch).
Fans calculate_fan_in_and_fan_out(const Tensor& t);

// torch.nn.init.calculate_gain: Linear/Conv/Sigmoid 1, Tanh 5/3, ReLU √2, SELU 3/4,
// LeakyReLU √(2 / (1 + slope²)) with slope = param (0.01 when absent).
double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param = std::nullopt);

// U(low, high).
const Tensor& uniform_(const Tensor& t, double low = 0.0, double high = 1.0, Generator* generator = nullptr);
// N(mean, std²).
const Tensor& normal_(const Tensor& t, double mean = 0.0, double std = 1.0, Generator* generator = nullptr);
// N(mean, std²) truncated to [a, b], by inverse-CDF sampling as torch.nn.init.trunc_normal_:
// u ~ U(Φ(α), Φ(β)) with α = (a − mean)/std, β = (b − mean)/std, value = mean + std·Φ⁻¹(u),
// clamped to [a, b]. a and b are absolute values, not multiples of std: with the defaults and
// std = 0.02 the truncation is at ±100σ, i.e. none (timm's behaviour, kept on purpose).
// The uniforms are drawn in f64 (53 bits) whatever t's dtype. Requires mean − 2std ≤ b and
// mean + 2std ≥ a, like PyTorch's warning, but as an error: otherwise the result is mostly
// clamped values.
const Tensor& trunc_normal_(const Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0,
                            Generator* generator = nullptr);

// U(−bound, bound), bound = gain·√(6 / (fan_in + fan_out)).
const Tensor& xavier_uniform_(const Tensor& t, double gain = 1.0, Generator* generator = nullptr);
// N(0, std²), std = gain·√(2 / (fan_in + fan_out)).
const Tensor& xavier_normal_(const Tensor& t, double gain = 1.0, Generator* generator = nullptr);
// U(−bound, bound), bound = gain·√(3 / fan) with gain = calculate_gain(nonlinearity, a) and
// fan = fan_in or fan_out. PyTorch's Linear and Conv default: a = √5, giving bound = 1/√fan_in.
const Tensor& kaiming_uniform_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                               Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, Generator* generator = nullptr);
// N(0, std²), std = gain / √fan.
const Tensor& kaiming_normal_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                              Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, Generator* generator = nullptr);

const Tensor& zeros_(const Tensor& t);
const Tensor& ones_(const Tensor& t);
const Tensor& constant_(const Tensor& t, double value);

}  // namespace lsf::nn::init
