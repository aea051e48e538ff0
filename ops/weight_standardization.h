// Weight standardisation of a convolution kernel (Qiao et al. 2019; timm's StdConv2d): every
// output channel's filter is shifted to zero mean and scaled to unit variance,
//   ŵ[o] = (w[o] − mean(w[o])) / √(var(w[o]) + eps)
// with mean and the biased variance over the I·kH·kW taps of filter o — exactly timm's
// F.batch_norm(w.reshape(1, O, −1), training=True, eps=eps). For a depthwise kernel [C, 1, k, k]
// each channel's k² taps are standardised on their own. Composed from mean / var / sub / div, so
// gradients flow to w through the statistics.
#pragma once

#include "lsformer/engine/tensor.h"

namespace lsf {

// weight [O, *] (at least 2-D, f32 or f64, at least 2 taps per filter); eps ≥ 0 (timm's default 1e-6).
Tensor weight_standardize(const Tensor& weight, double eps = 1e-6);

}  // namespace lsf
