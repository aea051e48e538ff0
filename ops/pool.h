// 2-D pooling, as torch.nn.functional: avg_pool2d, max_pool2d, adaptive_avg_pool2d (and the
// global average pool as its 1×1 case), forward and backward.
//
// x [N, C, H, W] (or unbatched [C, H, W]) → y [N, C, Ho, Wo]; every plane (n, c) is pooled on
// its own. Window geometry (kernel k, stride s, padding p, dilation 1), per axis:
//   Ho = ⌊(H + 2p − k)/s⌋ + 1, or with ceil_mode ⌈(H + 2p − k)/s⌉ + 1, less one when the last
//   window would start in the right padding (PyTorch's rule); p ≤ k/2.
// Average: the window [hs, he) is clipped to [−p, H + p) for the divisor when count_include_pad
// (padding counts, positions past the padded border do not) and to [0, H) for the sum; without
// count_include_pad the divisor is the clipped [0, H) size. Max: padding is −∞; the first
// maximum in row-major window order wins, NaN beats every number (PyTorch's rule); backward
// routes each gradient to its maximum's position (saved as an i64 index into the H·W plane).
// Adaptive average: output cell i covers rows [⌊i·H/Ho⌋, ⌈(i+1)·H/Ho⌉) (likewise columns), so
// cells may overlap when Ho does not divide H.
#pragma once

#include "lsformer/engine/tensor.h"
#include "lsformer/ops/conv.h"  // Int2

namespace lsf {

//   lsf::max_pool2d(x, {.kernel_size = 3, .stride = 2, .padding = 1});
struct Pool2dOptions {
  Int2 kernel_size = 2;          // ≥ 1
  Int2 stride = 0;               // 0: the kernel size (PyTorch's default)
  Int2 padding = 0;              // ≥ 0 and ≤ kernel/2
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling only
};

// The pooled size along one axis (after checking the arguments; throws naming `op`).
int64_t pool_output_size(const char* op, int64_t in, int64_t kernel, int64_t stride, int64_t padding, bool ceil_mode);

// f32 or f64; x [N, C, H, W] or [C, H, W].
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options);
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options);
Tensor adaptive_avg_pool2d(const Tensor& x, Int2 output_size);
// The mean over H and W: [N, C, H, W] → [N, C] (adaptive_avg_pool2d to 1×1, flattened).
Tensor global_avg_pool2d(const Tensor& x);

}  // namespace lsf
