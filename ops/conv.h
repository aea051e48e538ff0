// 2-D convolution (cross-correlation, as torch.nn.functional.conv2d) with stride, zero
// padding, dilation and groups (groups == C is a depthwise convolution), forward and backward.
//
// Dimension legend: N batch, C input channels, H×W input size, O output channels, G groups,
// kH×kW kernel size, Ho×Wo output size with
//   Ho = (H + 2·padding.h − dilation.h·(kH − 1) − 1) / stride.h + 1   (likewise Wo).
// Layouts are PyTorch's: x [N, C, H, W], weight [O, C/G, kH, kW] (OIHW), bias [O],
// y [N, O, Ho, Wo]. Group g maps input channels [g·C/G, (g+1)·C/G) to output channels
// [g·O/G, (g+1)·O/G).
//
// The CPU kernels lower the convolution to GEMMs over an im2col matrix [C/G·kH·kW, Ho·Wo] per
// image and group, built a band of output rows at a time (y_g = w_g · col_g; dw_g += dy_g ·
// col_gᵀ; dx: for stride 1 the convolution of dy with the flipped, transposed kernel, else
// dcol_g = w_gᵀ · dy_g added back into dx by col2im). A 1×1 kernel with stride 1 and no padding
// uses x itself as col; depthwise convolutions (C/G = 1, fewer than 8 outputs per input
// channel) run direct loops instead (ops/cpu/conv.cpp).
#pragma once

#include <cstdint>
#include <iosfwd>

#include "lsformer/engine/tensor.h"

namespace lsf {

// A (height, width) pair; a single number means the same value for both.
struct Int2 {
  int64_t h = 0;
  int64_t w = 0;
  constexpr Int2(int64_t both = 0) : h(both), w(both) {}
  constexpr Int2(int64_t height, int64_t width) : h(height), w(width) {}
  bool operator==(const Int2&) const = default;
};
// Prints as (h, w), like PyTorch's tuples.
std::ostream& operator<<(std::ostream& os, const Int2& p);

//   lsf::conv2d(x, w, b, {.stride = 2, .padding = {1, 0}, .groups = 4});
struct Conv2dOptions {
  Int2 stride = 1;    // ≥ 1
  Int2 padding = 0;   // zeros added on both sides, ≥ 0
  Int2 dilation = 1;  // spacing of kernel taps, ≥ 1
  int64_t groups = 1; // divides C and O
};

// The output shape [N, O, Ho, Wo] of conv2d for a 4-D input, after checking every argument
// (throws lsf::Error naming conv2d and the shapes).
Shape conv2d_output_shape(const Shape& x_shape, const Shape& weight_shape, const Conv2dOptions& options);

// torch.nn.functional.conv2d: x [N, C, H, W] (or unbatched [C, H, W]), weight [O, C/G, kH, kW],
// bias [O] or undefined → [N, O, Ho, Wo] (or [O, Ho, Wo]). f32 or f64, one dtype and device.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv2dOptions& options = {});

}  // namespace lsf
