// vision::ViLFullAttention: multi-head softmax attention with ViL's relative position biases.
#include "lsformer/models/vision/vil_attention.h"
#include "lsformer/models/nn/capture.h"

#include <cmath>
#include <sstream>
#include <vector>

#include "lsformer/engine/profiler.h"
#include "lsformer/models/attention/heads.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/index.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/shape.h"
#include "lsformer/ops/softmax.h"

namespace lsf::vision {

namespace {
constexpr const char* kOp = "ViLFullAttention";
}  // namespace

Tensor ViLFullAttention::relative_position_index_for(int64_t H, int64_t W) {
  LSF_CHECK(H >= 1 && W >= 1) << kOp << ": the map must be at least 1×1, got " << H << "×" << W;
  const int64_t N = H * W;
  std::vector<int64_t> index(size_t(N * N));
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < N; ++j)
      index[size_t(i * N + j)] = (i / W - j / W + H - 1) * (2 * W - 1) + (i % W - j % W + W - 1);
  return tensor(index, {N, N});
}

ViLFullAttention::ViLFullAttention(const ViLFullAttentionOptions& options)
    : Attention("ViLFullAttention"), options_(options) {
  const auto& o = options;
  LSF_CHECK(o.dim > 0 && o.heads > 0 && o.dim % o.heads == 0)
      << kOp << ": dim = " << o.dim << " must be positive and divisible by heads = " << o.heads;
  LSF_CHECK(o.attn_drop >= 0.0 && o.attn_drop <= 1.0 && o.proj_drop >= 0.0 && o.proj_drop <= 1.0)
      << kOp << ": dropout probabilities must lie in [0, 1], got attn_drop = " << o.attn_drop
      << ", proj_drop = " << o.proj_drop;
  head_dim_ = o.dim / o.heads;
  if (o.rpe) {
    LSF_CHECK(o.map_height >= 1 && o.map_width >= 1 && o.num_global >= 0)
        << kOp << ": rpe needs the patch map size (map_height, map_width ≥ 1) and num_global ≥ 0, got "
        << o.map_height << "×" << o.map_width << ", g = " << o.num_global;
    const int64_t H = o.map_height, W = o.map_width, h = o.heads, g = o.num_global;
    local_relative_position_bias_table =
        register_parameter("local_relative_position_bias_table", empty({(2 * H - 1) * (2 * W - 1), h}));
    nn::init::trunc_normal_(local_relative_position_bias_table, 0.0, 0.02);
    if (g >= 1) {
      g2l_relative_position_bias = register_parameter("g2l_relative_position_bias", empty({2, h, g}));
      g2g_relative_position_bias = register_parameter("g2g_relative_position_bias", empty({h, g, g}));
      nn::init::trunc_normal_(g2l_relative_position_bias, 0.0, 0.02);
      nn::init::trunc_normal_(g2g_relative_position_bias, 0.0, 0.02);
    }
    relative_position_index = register_buffer("relative_position_index", relative_position_index_for(H, W));
  }
  qkv = register_module("qkv", std::make_shared<nn::Linear>(o.dim, 3 * o.dim, o.qkv_bias));
  attn_drop = register_module("attn_drop", std::make_shared<nn::Dropout>(o.attn_drop));
  proj = register_module("proj", std::make_shared<nn::Linear>(o.dim, o.dim));
  proj_drop = register_module("proj_drop", std::make_shared<nn::Dropout>(o.proj_drop));
  for (const auto& lin : {qkv, proj}) {
    nn::init::trunc_normal_(lin->weight, 0.0, 0.02);
    if (lin->bias.defined()) nn::init::zeros_(lin->bias);
  }
}

std::string ViLFullAttention::extra_repr() const {
  std::ostringstream os;
  os << "dim=" << options_.dim << ", heads=" << options_.heads << ", rpe=" << (options_.rpe ? "true" : "false");
  if (options_.rpe) os << ", map=" << options_.map_height << "x" << options_.map_width << ", global=" << options_.num_global;
  return os.str();
}

Tensor ViLFullAttention::position_bias(const Tensor& like) const {
  const int64_t H = options_.map_height, W = options_.map_width, N = H * W, h = options_.heads,
                g = options_.num_global;
  Tensor local = index_select(local_relative_position_bias_table, 0,
                              relative_position_index.to(like.device()).reshape({N * N}));  // [N², h]
  local = local.view({N, N, h}).permute({2, 0, 1});                                           // [h, N, N]
  if (g == 0) return local;
  Tensor to_patches = g2l_relative_position_bias.select(0, 0).unsqueeze(-1).expand({h, g, N});    // global → patch
  Tensor to_globals = g2l_relative_position_bias.select(0, 1).unsqueeze(1).expand({h, N, g});     // patch → global
  Tensor global_rows = cat({g2g_relative_position_bias, to_patches}, -1);                          // [h, g, g+N]
  Tensor patch_rows = cat({to_globals, local}, -1);                                                // [h, N, g+N]
  return cat({global_rows, patch_rows}, 1);                                                        // [h, g+N, g+N]
}

Tensor ViLFullAttention::forward(const Tensor& x, const nn::AttentionArgs& args) {
  ::lsf::nn::ModuleScope call_site(*this);
  profiler::PhaseScope phase("attention");
  const auto& o = options_;
  LSF_CHECK(x.defined()) << kOp << ": the input is undefined";
  LSF_CHECK(!args.mask.defined() && !args.memory.defined() && !args.cls.defined() && !args.cls_only)
      << kOp << ": args.mask, args.memory, args.cls and cls_only are not supported (pass global tokens as x's first rows)";
  LSF_CHECK(x.dtype() == kF32 || x.dtype() == kF64) << kOp << ": x must be f32 or f64, got " << x.dtype();
  LSF_CHECK(x.dim() == 3 && x.size(2) == o.dim)
      << kOp << ": x of shape " << x.shape() << " does not match [B, n, dim = " << o.dim << "]";
  const int64_t n = x.size(1), h = o.heads, e = head_dim_;
  if (o.rpe) {
    LSF_CHECK(args.height == o.map_height && args.width == o.map_width && args.num_global == o.num_global &&
              n == o.num_global + o.map_height * o.map_width)
        << kOp << ": built for a " << o.map_height << "×" << o.map_width << " map with " << o.num_global
        << " global tokens (relative position tables), got a " << args.height << "×" << args.width << " map with "
        << args.num_global << " global tokens and x of shape " << x.shape();
  }
  TensorList parts = split(qkv->forward(x), o.dim, 2);
  Tensor q = nn::split_heads(mul(parts[0], 1.0 / std::sqrt(double(e))), h);  // [B, h, n, e]
  Tensor k = nn::split_heads(parts[1], h), v = nn::split_heads(parts[2], h);
  Tensor logits = matmul(q, k.transpose(-1, -2));  // [B, h, n, n]
  if (o.rpe) logits = add(logits, position_bias(x).to(x.dtype()));
  Tensor joint = softmax(logits, -1);
  nn::capture(this, "attention", joint);
  Tensor probs = attn_drop->forward(joint);
  return proj_drop->forward(proj->forward(nn::merge_heads(matmul(probs, v))));
}

}  // namespace lsf::vision
