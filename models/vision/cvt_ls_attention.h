// vision::CvTLSAttention: the attention layer of CvT*-LS (transformer-ls.md §4.6): CvT's
// convolutional q/k/v projection feeding the 2-D long-short attention, whose dynamic projection
// W_P is a depthwise-separable convolution with a weight-standardised depthwise kernel.
//
//   x [B, g + N, C] (g ∈ {0, 1} CLS first, then the N = nx² patch tokens row-major; the block's
//   LN1 output) → [B, g + N, C]:
//     map = patches as C × nx × nx
//     q = proj_q([cls ; tokens(bn(conv(map)))])      conv: depthwise k×k, stride 1, no bias;
//     k = proj_k([cls ; tokens(bn(conv(map)))])      bn: BatchNorm2d; proj_*: Linear C → C
//     v = proj_v([cls ; tokens(bn(conv(map)))])      (CvT's "dw_bn" projection; the CLS skips the
//                                                     convolution, as in CvT)
//     logits = pointwise(ws(depthwise)(map))          W_P: depthwise k_P×k_P (stride s, no bias,
//                                                     weight-standardised) then 1×1 conv C → h·r
//     y = LongShortAttention2d.forward_projected(q, k, v, logits)   (DualLN, window w, rank r,
//                                                     the CLS as the global token; proj)
// Parameter names follow the official CvT where it has them (conv_proj_q.conv.weight,
// conv_proj_q.bn.*, proj_q.weight, ...); W_P is dynamic_projection.depthwise.weight and
// dynamic_projection.pointwise.{weight,bias} (dynamic_projection.bn.* with batch_norm_projection);
// the long-short core is `ls` (ls.proj, ls.dual_ln_dp, ls.dual_ln_full).
//
// Choices the paper leaves open (CvT*-LS code is not released), each an option:
//  * kv_stride (default 1): CvT sub-samples keys/values with stride-2 convolutions; here the
//    window branch always uses every key (a w×w group's T×T neighbourhood must exist at full
//    resolution), and kv_stride = s makes only the long-range branch sub-sample: W_P runs with
//    stride s and K̄, V̄ compress every s-th row and column (LongShortAttention2d's
//    projection_stride). Default 1: the dynamic projection already compresses to r slots.
//  * W_P = depthwise k_P×k_P (default 3, CvT's projection kernel) + pointwise 1×1 with bias,
//    applied to the attention input x (as every official LS layer computes its logits from x,
//    §1.2), softmax over the spatial positions; weight standardisation (eps 1e-6, timm's) of the
//    depthwise kernel, or with batch_norm_projection a BatchNorm after it instead (CvT's form).
//  * The query scale is e^{-1/2} (the LS convention; official CvT scales by C^{-1/2}).
//  * No position encoding: no relative-position bias in the window (rpe option, default off).
#pragma once

#include <memory>
#include <string>

#include "lsformer/models/attention/long_short_2d.h"
#include "lsformer/models/nn/batch_norm.h"
#include "lsformer/models/nn/conv2d.h"
#include "lsformer/models/nn/linear.h"

namespace lsf::vision {

struct CvTLSAttentionOptions {
  int64_t dim = 0;                    // C, divisible by heads
  int64_t heads = 1;                  // h
  int64_t window = 8;                 // w: the map side must be a multiple of it
  int64_t rank = 16;                  // r ≥ 1
  bool qkv_bias = true;               // proj_q/k/v biases (CvT: QKV_BIAS true)
  double attn_drop = 0.0;
  double proj_drop = 0.0;
  int64_t kernel = 3;                 // depthwise kernel of the q/k/v projections (CvT: 3)
  int64_t kv_stride = 1;              // long-range branch sub-sampling s ≥ 1 (see above)
  int64_t dp_kernel = 3;              // depthwise kernel of W_P
  bool batch_norm_projection = false; // W_P with BatchNorm instead of weight standardisation
  bool rpe = false;                   // relative-position bias in the window (the paper: none)
  bool dual_ln = true;                // DualLN (false: the paper's "w/o DualLN" ablation)
};

// CvT's "dw_bn" projection: conv (depthwise, no bias) then bn, on a C × nx × nx map.
class ConvProjection : public nn::Module {
 public:
  ConvProjection(int64_t channels, int64_t kernel, int64_t stride);
  Tensor forward(const Tensor& map);  // [B, C, nx, nx] → tokens [B, n', C]
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::BatchNorm2d> bn;
};

// W_P: depthwise (weight-standardised, or followed by bn) then pointwise C → h·r.
class DynamicProjectionConv : public nn::Module {
 public:
  DynamicProjectionConv(int64_t channels, int64_t outputs, int64_t kernel, int64_t stride, bool batch_norm);
  Tensor forward(const Tensor& map);  // [B, C, nx, nx] → logits [B, n', h·r]
  std::shared_ptr<nn::Conv2d> depthwise;  // an nn::StdConv2d unless batch_norm
  std::shared_ptr<nn::BatchNorm2d> bn;    // only with batch_norm
  std::shared_ptr<nn::Conv2d> pointwise;
};

class CvTLSAttention : public nn::Attention {
 public:
  explicit CvTLSAttention(const CvTLSAttentionOptions& options);
  // x [B, g + nx², C]; args.height = args.width = nx, args.num_global = g ∈ {0, 1}.
  Tensor forward(const Tensor& x, const nn::AttentionArgs& args = {}) override;
  std::string extra_repr() const override;
  const CvTLSAttentionOptions& options() const { return options_; }

  std::shared_ptr<ConvProjection> conv_proj_q, conv_proj_k, conv_proj_v;
  std::shared_ptr<nn::Linear> proj_q, proj_k, proj_v;
  std::shared_ptr<DynamicProjectionConv> dynamic_projection;
  std::shared_ptr<nn::LongShortAttention2d> ls;

 private:
  CvTLSAttentionOptions options_;
};

}  // namespace lsf::vision
