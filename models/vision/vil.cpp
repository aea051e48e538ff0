// vision::ViLClassifier and its parts: PatchEmbed, AttnBlock, MlpBlock, the stage container,
// the drop-path schedule and the presets.
#include "lsformer/models/vision/vil.h"

#include <sstream>

#include "lsformer/models/attention/long_short_2d.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/models/vision/vil_attention.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/shape.h"

namespace lsf::vision {

namespace {

constexpr double kBlockEps = 1e-6;  // every MsViT LayerNorm (norm_layer = LayerNorm(eps=1e-6))

// ViL's _init_weights (Linear weights trunc-normal 0.02, biases 0; LayerNorms (1, 0)), which
// the official model applies to every module after construction. The attention modules already
// initialise their Linears that way and every LayerNorm starts at (1, 0), so only the Linears
// built with PyTorch's default (the MLPs' and the head) are drawn again here: the same
// distribution, one pass over the weights instead of two.
void vil_init_linear(nn::Linear& lin) {
  nn::init::trunc_normal_(lin.weight, 0.0, 0.02);
  if (lin.bias.defined()) nn::init::zeros_(lin.bias);
}

}  // namespace

// ---- PatchEmbed ------------------------------------------------------------------------------------

ViLPatchEmbed::ViLPatchEmbed(int64_t in_channels, const ViLStageConfig& s, int64_t map_side, bool with_norm,
                             double drop_rate)
    : Module("PatchEmbed"), map_side_(map_side), global_tokens_(s.global_tokens), dim_(s.dim) {
  const int64_t d = s.dim, g = s.global_tokens;
  proj = register_module("proj", std::make_shared<nn::Conv2d>(in_channels, d, s.patch, Conv2dOptions{.stride = s.patch}));
  if (with_norm) norm_embed = register_module("norm_embed", std::make_shared<nn::LayerNorm>(d, kBlockEps));
  if (g >= 1) {
    cls_token = register_parameter("cls_token", empty({1, g, d}));
    nn::init::trunc_normal_(cls_token, 0.0, 0.02);
  }
  if (s.absolute_pos) {
    cls_pos_embed = register_parameter("cls_pos_embed", empty({1, g, d}));
    x_pos_embed = register_parameter("x_pos_embed", empty({1, map_side, d / 2}));
    y_pos_embed = register_parameter("y_pos_embed", empty({1, map_side, d / 2}));
    for (const Tensor& t : {cls_pos_embed, x_pos_embed, y_pos_embed}) nn::init::trunc_normal_(t, 0.0, 0.02);
  }
  pos_drop = register_module("pos_drop", std::make_shared<nn::Dropout>(drop_rate));
}

Tensor ViLPatchEmbed::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  Tensor maps = proj->forward(x);  // [B, d, nx, nx]
  const int64_t B = maps.size(0), nx = map_side_, N = nx * nx, g = global_tokens_;
  LSF_CHECK(maps.size(2) == nx && maps.size(3) == nx)
      << "ViL PatchEmbed: the patch convolution gave a " << maps.size(2) << "×" << maps.size(3)
      << " map, but the model was built for " << nx << "×" << nx << " (input shape " << x.shape() << ")";
  Tensor tokens = maps.flatten(2).transpose(1, 2);  // [B, N, d]
  if (norm_embed) tokens = norm_embed->forward(tokens);
  if (g >= 1) tokens = cat({cls_token.expand({B, g, dim_}), tokens}, 1);  // [B, g + N, d]
  if (x_pos_embed.defined()) {
    const int64_t half = dim_ / 2;
    Tensor rows = x_pos_embed.unsqueeze(2).expand({1, nx, nx, half});  // token (i, j) → x_pos[i]
    Tensor cols = y_pos_embed.unsqueeze(1).expand({1, nx, nx, half});  //                y_pos[j]
    Tensor grid = cat({rows, cols}, -1).reshape({1, N, dim_});
    tokens = add(tokens, cat({cls_pos_embed, grid}, 1));
  }
  return pos_drop->forward(tokens);
}

// ---- blocks -------------------------------------------------------------------------------------------

ViLAttnBlock::ViLAttnBlock(const ViLStageConfig& s, int64_t map_side, const ViLOptions& o, double rate)
    : Module("AttnBlock"), global_tokens_(s.global_tokens) {
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(s.dim, kBlockEps));
  if (s.long_short) {
    attn = register_module("attn", std::make_shared<nn::LongShortAttention2d>(nn::LongShortAttention2dOptions{
                                       .dim = s.dim,
                                       .heads = s.heads,
                                       .window = s.window,
                                       .rank = s.rank,
                                       .rpe = !s.absolute_pos,
                                       .qkv_bias = o.qkv_bias,
                                       .attn_drop = o.attn_drop_rate,
                                       .proj_drop = o.drop_rate,
                                       .dual_ln = o.dual_ln}));
  } else {
    attn = register_module("attn", std::make_shared<ViLFullAttention>(ViLFullAttentionOptions{
                                       .dim = s.dim,
                                       .heads = s.heads,
                                       .qkv_bias = o.qkv_bias,
                                       .attn_drop = o.attn_drop_rate,
                                       .proj_drop = o.drop_rate,
                                       .rpe = !s.absolute_pos,
                                       .map_height = map_side,
                                       .map_width = map_side,
                                       .num_global = s.global_tokens}));
  }
  drop_path = register_module("drop_path", std::make_shared<nn::DropPath>(rate));
}

Tensor ViLAttnBlock::forward(const Tensor& x, int64_t map_side) {
  ::lsf::nn::ModuleScope call_site(*this);
  nn::AttentionArgs args;
  args.height = args.width = map_side;
  args.num_global = global_tokens_;
  return add(x, drop_path->forward(attn->forward(norm->forward(x), args)));
}

ViLMlpBlock::ViLMlpBlock(int64_t dim, const ViLOptions& o, double rate) : Module("MlpBlock") {
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(dim, kBlockEps));
  nn::MlpOptions mlp_options;
  mlp_options.hidden_features = 4 * dim;
  mlp_options.activation = nn::Activation::GELU;
  mlp_options.dropout = o.drop_rate;
  mlp = register_module("mlp", std::make_shared<nn::Mlp>(dim, mlp_options));
  drop_path = register_module("drop_path", std::make_shared<nn::DropPath>(rate));
}

Tensor ViLMlpBlock::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  return add(x, drop_path->forward(mlp->forward(norm->forward(x))));
}

// ---- stage --------------------------------------------------------------------------------------------

ViLStage::ViLStage(int64_t in_channels, const ViLStageConfig& s, int64_t map_side, const ViLOptions& o,
                   const std::vector<double>& drop_paths)
    : Module("ViLStage"), config_(s), map_side_(map_side) {
  patch_embed = register_module("0", std::make_shared<ViLPatchEmbed>(in_channels, s, map_side, o.norm_embed, o.drop_rate));
  for (int64_t b = 0; b < s.blocks; ++b) {
    attn_blocks.push_back(register_module(std::to_string(2 * b + 1),
                                          std::make_shared<ViLAttnBlock>(s, map_side, o, drop_paths[size_t(b)])));
    mlp_blocks.push_back(
        register_module(std::to_string(2 * b + 2), std::make_shared<ViLMlpBlock>(s.dim, o, drop_paths[size_t(b)])));
  }
}

Tensor ViLStage::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  Tensor tokens = patch_embed->forward(x);
  for (size_t b = 0; b < attn_blocks.size(); ++b) {
    tokens = attn_blocks[b]->forward(tokens, map_side_);
    tokens = mlp_blocks[b]->forward(tokens);
  }
  return tokens;
}

// ---- classifier ---------------------------------------------------------------------------------------

std::vector<double> vil_drop_path_rates(int64_t total, double rate) {
  std::vector<double> rates(size_t(std::max<int64_t>(total, 0)), 0.0);
  for (int64_t i = 0; i < total && total > 1; ++i) rates[size_t(i)] = rate * double(i) / double(total - 1);
  return rates;
}

ViLClassifier::ViLClassifier(const ViLOptions& o) : ImageClassifier("MsViT"), options_(o) {
  stage_configs_ = parse_vil_arch(o.arch);
  LSF_CHECK(o.image_size >= 1 && o.in_channels >= 1 && o.num_classes >= 1)
      << "ViL: image_size, in_channels and num_classes must be positive, got " << o.image_size << ", "
      << o.in_channels << ", " << o.num_classes;
  LSF_CHECK(o.drop_rate >= 0 && o.drop_rate <= 1 && o.attn_drop_rate >= 0 && o.attn_drop_rate <= 1 &&
            o.drop_path_rate >= 0 && o.drop_path_rate <= 1)
      << "ViL: drop_rate, attn_drop_rate and drop_path_rate must lie in [0, 1]";
  int64_t total = 0;
  for (const auto& s : stage_configs_) total += s.blocks;
  const std::vector<double> rates = vil_drop_path_rates(total, o.drop_path_rate);

  int64_t side = o.image_size, channels = o.in_channels, first_block = 0;
  for (const auto& s : stage_configs_) {
    const int64_t map_side = side / s.patch;
    LSF_CHECK(map_side >= 1) << "ViL: stage " << s.id << " (patch " << s.patch << ") gets a " << side << "×" << side
                             << " input and would leave no patches; use larger images (image_size "
                             << o.image_size << ") or smaller patches";
    LSF_CHECK(!s.long_short || map_side % s.window == 0)
        << "ViL: stage " << s.id << ": the " << map_side << "×" << map_side << " patch map (image_size "
        << o.image_size << ") is not a multiple of the long-short window f = " << s.window
        << "; choose an image size or window with map side % window == 0";
    std::vector<double> stage_rates(rates.begin() + first_block, rates.begin() + first_block + s.blocks);
    layers.push_back(register_module("layer" + std::to_string(s.id),
                                     std::make_shared<ViLStage>(channels, s, map_side, o, stage_rates)));
    side = map_side;
    channels = s.dim;
    first_block += s.blocks;
  }
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(channels, kBlockEps));
  head = register_module("head", std::make_shared<nn::Linear>(channels, o.num_classes));
  for (const auto& stage : layers) {
    for (const auto& block : stage->mlp_blocks) {
      vil_init_linear(*block->mlp->fc1);
      vil_init_linear(*block->mlp->fc2);
    }
  }
  vil_init_linear(*head);
}

ImageSpec ViLClassifier::spec() const { return {options_.num_classes, options_.image_size, options_.in_channels}; }

std::string ViLClassifier::extra_repr() const {
  std::ostringstream os;
  os << "arch=" << format_vil_arch(stage_configs_) << ", image_size=" << options_.image_size
     << ", in_channels=" << options_.in_channels << ", num_classes=" << options_.num_classes;
  return os.str();
}

Tensor ViLClassifier::forward(const Tensor& images) {
  ::lsf::nn::ModuleScope call_site(*this);
  check_images("ViL", images, spec());
  const int64_t B = images.size(0);
  Tensor x = images, tokens;
  for (size_t k = 0; k < layers.size(); ++k) {
    tokens = layers[k]->forward(x);  // [B, g + nx², d]
    if (k + 1 < layers.size()) {
      const ViLStageConfig& s = layers[k]->config();
      const int64_t nx = layers[k]->map_side();
      x = tokens.narrow(1, s.global_tokens, nx * nx).transpose(1, 2).reshape({B, s.dim, nx, nx});
    }
  }
  tokens = norm->forward(tokens);
  const bool cls_readout = stage_configs_.back().global_tokens > 0 && !options_.avg_pool;
  Tensor features = cls_readout ? tokens.select(1, 0) : mean(tokens, {1});  // [B, d]
  return head->forward(features);
}

// ---- presets ------------------------------------------------------------------------------------------

namespace {

struct Preset {
  const char* name;
  const char* arch;
  int64_t image_size;
  double drop_path;
};

// The launch scripts' arch strings and drop-path rates (imagenet/launch/train/*.sh).
const Preset kPresets[] = {
    {"vil_ls_medium_224",
     "l1,h3,d96,n1,s1,g1,p4,f7,a0,r8_l2,h3,d192,n4,s1,g1,p2,f7,a0,r8_l3,h6,d384,n16,s0,g1,p2,f7,a0,r8_"
     "l4,h12,d768,n1,s0,g0,p2,f7,a0,r8",
     224, 0.3},
    {"vil_ls_base_224",
     "l1,h3,d96,n1,s1,g1,p4,f7,a0,r8_l2,h3,d192,n8,s1,g1,p2,f7,a0,r8_l3,h6,d384,n24,s0,g1,p2,f7,a0,r8_"
     "l4,h12,d768,n1,s0,g0,p2,f7,a0,r8",
     224, 0.5},
    {"vil_ls_medium_384",
     "l1,h3,d96,n1,s1,g1,p4,f8,a0,r8_l2,h3,d192,n4,s1,g1,p2,f8,a0,r8_l3,h6,d384,n16,s0,g1,p2,f8,a0,r8_"
     "l4,h12,d768,n1,s0,g0,p2,f8,a0,r8",
     384, 0.2},
};

}  // namespace

std::vector<std::string> vil_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

ViLOptions vil_preset(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) return {.arch = p.arch, .image_size = p.image_size, .drop_path_rate = p.drop_path};
  }
  std::ostringstream known;
  for (const auto& n : vil_preset_names()) known << " " << n;
  LSF_FAIL() << "ViL: unknown preset '" << name << "' (known:" << known.str() << ")";
}

}  // namespace lsf::vision
