// vision::CvTLSAttention: convolutional projections around the shared long-short core.
#include "lsformer/models/vision/cvt_ls_attention.h"

#include <sstream>

#include "lsformer/engine/profiler.h"
#include "lsformer/models/nn/std_conv2d.h"
#include "lsformer/ops/shape.h"

namespace lsf::vision {

namespace {

constexpr const char* kOp = "CvTLSAttention";

// [B, C, H, W] → [B, H·W, C].
Tensor tokens_of(const Tensor& map) { return map.flatten(2).transpose(1, 2); }

}  // namespace

ConvProjection::ConvProjection(int64_t channels, int64_t kernel, int64_t stride) : Module("ConvProjection") {
  conv = register_module("conv", std::make_shared<nn::Conv2d>(
                                     channels, channels, kernel,
                                     Conv2dOptions{.stride = stride, .padding = kernel / 2, .groups = channels},
                                     /*bias=*/false));
  bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(channels));
}

Tensor ConvProjection::forward(const Tensor& map) {
  ::lsf::nn::ModuleScope call_site(*this);
  return tokens_of(bn->forward(conv->forward(map)));
}

DynamicProjectionConv::DynamicProjectionConv(int64_t channels, int64_t outputs, int64_t kernel, int64_t stride,
                                             bool batch_norm)
    : Module("DynamicProjectionConv") {
  const Conv2dOptions dw{.stride = stride, .padding = kernel / 2, .groups = channels};
  if (batch_norm) {
    depthwise = register_module("depthwise", std::make_shared<nn::Conv2d>(channels, channels, kernel, dw, false));
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(channels));
  } else {
    depthwise = register_module("depthwise", std::make_shared<nn::StdConv2d>(channels, channels, kernel, dw, false));
  }
  pointwise = register_module("pointwise", std::make_shared<nn::Conv2d>(channels, outputs, 1));
}

Tensor DynamicProjectionConv::forward(const Tensor& map) {
  ::lsf::nn::ModuleScope call_site(*this);
  Tensor y = depthwise->forward(map);
  if (bn) y = bn->forward(y);
  return tokens_of(pointwise->forward(y));
}

CvTLSAttention::CvTLSAttention(const CvTLSAttentionOptions& o) : Attention("CvTLSAttention"), options_(o) {
  LSF_CHECK(o.dim > 0 && o.heads > 0 && o.dim % o.heads == 0)
      << kOp << ": dim = " << o.dim << " must be positive and divisible by heads = " << o.heads;
  LSF_CHECK(o.rank >= 1) << kOp << ": rank r = " << o.rank << " must be ≥ 1 (W_P is a convolution to h·r maps)";
  LSF_CHECK(o.kernel >= 1 && o.kernel % 2 == 1 && o.dp_kernel >= 1 && o.dp_kernel % 2 == 1)
      << kOp << ": the projection kernels must be odd (same-size maps), got kernel = " << o.kernel
      << ", dp_kernel = " << o.dp_kernel;
  LSF_CHECK(o.kv_stride >= 1) << kOp << ": kv_stride = " << o.kv_stride << " must be ≥ 1";
  LSF_CHECK(o.dp_kernel * o.dp_kernel >= 2 || o.batch_norm_projection)
      << kOp << ": a 1×1 depthwise kernel cannot be weight-standardised (one tap); use dp_kernel ≥ 3";
  conv_proj_q = register_module("conv_proj_q", std::make_shared<ConvProjection>(o.dim, o.kernel, 1));
  conv_proj_k = register_module("conv_proj_k", std::make_shared<ConvProjection>(o.dim, o.kernel, 1));
  conv_proj_v = register_module("conv_proj_v", std::make_shared<ConvProjection>(o.dim, o.kernel, 1));
  proj_q = register_module("proj_q", std::make_shared<nn::Linear>(o.dim, o.dim, o.qkv_bias));
  proj_k = register_module("proj_k", std::make_shared<nn::Linear>(o.dim, o.dim, o.qkv_bias));
  proj_v = register_module("proj_v", std::make_shared<nn::Linear>(o.dim, o.dim, o.qkv_bias));
  dynamic_projection = register_module(
      "dynamic_projection", std::make_shared<DynamicProjectionConv>(o.dim, o.heads * o.rank, o.dp_kernel, o.kv_stride,
                                                                    o.batch_norm_projection));
  ls = register_module("ls", std::make_shared<nn::LongShortAttention2d>(nn::LongShortAttention2dOptions{
                                 .dim = o.dim,
                                 .heads = o.heads,
                                 .window = o.window,
                                 .rank = o.rank,
                                 .rpe = o.rpe,
                                 .attn_drop = o.attn_drop,
                                 .proj_drop = o.proj_drop,
                                 .external_projections = true,
                                 .projection_stride = o.kv_stride,
                                 .dual_ln = o.dual_ln}));
}

std::string CvTLSAttention::extra_repr() const {
  std::ostringstream os;
  os << "dim=" << options_.dim << ", heads=" << options_.heads << ", window=" << options_.window
     << ", rank=" << options_.rank << ", kv_stride=" << options_.kv_stride << ", dp_kernel=" << options_.dp_kernel
     << ", w_p=" << (options_.batch_norm_projection ? "batch_norm" : "weight_standardized");
  return os.str();
}

Tensor CvTLSAttention::forward(const Tensor& x, const nn::AttentionArgs& args) {
  ::lsf::nn::ModuleScope call_site(*this);
  profiler::PhaseScope phase("attention");
  const int64_t nx = args.height, g = args.num_global;
  LSF_CHECK(!args.mask.defined() && !args.memory.defined() && !args.cls.defined() && !args.cls_only)
      << kOp << ": args.mask, args.memory, args.cls and cls_only are not supported (pass the CLS as x's first row with "
      << "num_global = 1)";
  LSF_CHECK(x.defined() && x.dim() == 3 && x.size(2) == options_.dim && args.height == args.width &&
            (g == 0 || g == 1) && x.size(1) == g + nx * nx)
      << kOp << ": expected x [B, g + nx², " << options_.dim << "] with args.height = args.width = nx and g ∈ {0, 1}, got x "
      << (x.defined() ? x.shape() : Shape{}) << ", map " << args.height << "×" << args.width << ", g = " << g;
  const int64_t B = x.size(0), C = options_.dim;
  Tensor map = x.narrow(1, g, nx * nx).transpose(1, 2).reshape({B, C, nx, nx});
  auto project = [&](ConvProjection& conv, nn::Linear& linear) {
    Tensor tokens = conv.forward(map);  // [B, N, C]
    if (g > 0) tokens = cat({x.narrow(1, 0, g), tokens}, 1);
    return linear.forward(tokens);
  };
  Tensor q = project(*conv_proj_q, *proj_q);
  Tensor k = project(*conv_proj_k, *proj_k);
  Tensor v = project(*conv_proj_v, *proj_v);
  Tensor logits = dynamic_projection->forward(map);  // [B, Ns, h·r]
  return ls->forward_projected(q, k, v, logits, args);
}

}  // namespace lsf::vision
