// vision::CvTLSClassifier: stages of convolutional token embedding and long-short blocks.
#include "lsformer/models/vision/cvt_ls.h"

#include <sstream>

#include "lsformer/models/nn/batch_norm.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/models/nn/module_list.h"
#include "lsformer/models/vision/vil.h"  // vil_drop_path_rates (the same linspace rule)
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/shape.h"

namespace lsf::vision {

namespace {

constexpr double kLnEps = 1e-5;  // CvT's norm_layer = LayerNorm(eps=1e-5)

// CvT's "trunc_norm" init, applied after construction.
void cvt_init(nn::Module& m) {
  if (auto* lin = dynamic_cast<nn::Linear*>(&m)) {
    nn::init::trunc_normal_(lin->weight, 0.0, 0.02);
    if (lin->bias.defined()) nn::init::zeros_(lin->bias);
  } else if (auto* ln = dynamic_cast<nn::LayerNorm*>(&m)) {
    ln->reset_parameters();
  } else if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(&m)) {
    bn->reset_parameters();
  }
}

int64_t conv_out(int64_t in, const CvTLSStageConfig& s) { return (in + 2 * s.patch_padding - s.patch_size) / s.patch_stride + 1; }

}  // namespace

// ---- parts ---------------------------------------------------------------------------------------------

ConvEmbed::ConvEmbed(int64_t in_channels, const CvTLSStageConfig& s) : Module("ConvEmbed") {
  proj = register_module("proj", std::make_shared<nn::Conv2d>(
                                     in_channels, s.dim, s.patch_size,
                                     Conv2dOptions{.stride = s.patch_stride, .padding = s.patch_padding}));
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(s.dim, kLnEps));
}

Tensor ConvEmbed::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  return norm->forward(proj->forward(x).flatten(2).transpose(1, 2));
}

CvTLSBlock::CvTLSBlock(const CvTLSStageConfig& s, const CvTLSOptions& o, double rate) : Module("Block") {
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(s.dim, kLnEps));
  attn = register_module("attn", std::make_shared<CvTLSAttention>(CvTLSAttentionOptions{
                                     .dim = s.dim,
                                     .heads = s.heads,
                                     .window = s.window,
                                     .rank = s.rank,
                                     .qkv_bias = o.qkv_bias,
                                     .attn_drop = o.attn_drop_rate,
                                     .proj_drop = o.drop_rate,
                                     .kv_stride = o.kv_stride,
                                     .dp_kernel = o.dp_kernel,
                                     .batch_norm_projection = o.batch_norm_projection,
                                     .dual_ln = o.dual_ln}));
  drop_path = register_module("drop_path", std::make_shared<nn::DropPath>(rate));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(s.dim, kLnEps));
  nn::MlpOptions mlp_options;
  mlp_options.hidden_features = s.mlp_ratio * s.dim;
  mlp_options.activation = nn::Activation::GELU;
  mlp_options.dropout = o.drop_rate;
  mlp = register_module("mlp", std::make_shared<nn::Mlp>(s.dim, mlp_options));
}

Tensor CvTLSBlock::forward(const Tensor& x, int64_t map_side, int64_t g) {
  ::lsf::nn::ModuleScope call_site(*this);
  nn::AttentionArgs args;
  args.height = args.width = map_side;
  args.num_global = g;
  Tensor y = add(x, drop_path->forward(attn->forward(norm1->forward(x), args)));
  return add(y, drop_path->forward(mlp->forward(norm2->forward(y))));
}

CvTLSStage::CvTLSStage(int64_t in_channels, const CvTLSStageConfig& s, int64_t map_side, const CvTLSOptions& o)
    : Module("VisionTransformer"), config_(s), map_side_(map_side) {
  patch_embed = register_module("patch_embed", std::make_shared<ConvEmbed>(in_channels, s));
  pos_drop = register_module("pos_drop", std::make_shared<nn::Dropout>(o.drop_rate));
  if (s.cls_token) {
    cls_token = register_parameter("cls_token", empty({1, 1, s.dim}));
    nn::init::trunc_normal_(cls_token, 0.0, 0.02);
  }
  const std::vector<double> rates = vil_drop_path_rates(s.depth, s.drop_path);
  auto list = register_module("blocks", std::make_shared<nn::ModuleList>());
  for (int64_t j = 0; j < s.depth; ++j) blocks.push_back(list->push_back(std::make_shared<CvTLSBlock>(s, o, rates[size_t(j)])));
}

Tensor CvTLSStage::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  Tensor tokens = patch_embed->forward(x);  // [B, nx², d]
  LSF_CHECK(tokens.size(1) == map_side_ * map_side_)
      << "CvT-LS: the token embedding gave " << tokens.size(1) << " tokens, the model was built for a " << map_side_
      << "×" << map_side_ << " map (input shape " << x.shape() << ")";
  const int64_t g = cls_token.defined() ? 1 : 0;
  if (g) tokens = cat({cls_token.expand({x.size(0), 1, config_.dim}), tokens}, 1);
  tokens = pos_drop->forward(tokens);
  for (const auto& block : blocks) tokens = block->forward(tokens, map_side_, g);
  return tokens;
}

// ---- classifier ---------------------------------------------------------------------------------------

CvTLSClassifier::CvTLSClassifier(const CvTLSOptions& o) : ImageClassifier("ConvolutionalVisionTransformer"), options_(o) {
  LSF_CHECK(!o.stages.empty()) << "CvT-LS: at least one stage is needed";
  LSF_CHECK(o.image_size >= 1 && o.in_channels >= 1 && o.num_classes >= 1)
      << "CvT-LS: image_size, in_channels and num_classes must be positive, got " << o.image_size << ", "
      << o.in_channels << ", " << o.num_classes;
  int64_t side = o.image_size, channels = o.in_channels;
  for (size_t i = 0; i < o.stages.size(); ++i) {
    const CvTLSStageConfig& s = o.stages[i];
    LSF_CHECK(s.patch_size >= 1 && s.patch_stride >= 1 && s.patch_padding >= 0 && s.dim >= 1 && s.heads >= 1 &&
              s.dim % s.heads == 0 && s.depth >= 0 && s.mlp_ratio >= 1 && s.window >= 1 && s.rank >= 1 &&
              s.drop_path >= 0 && s.drop_path <= 1)
        << "CvT-LS: stage " << i << " has an invalid configuration (patch " << s.patch_size << "/" << s.patch_stride
        << "/" << s.patch_padding << ", dim " << s.dim << ", heads " << s.heads << ", depth " << s.depth
        << ", window " << s.window << ", rank " << s.rank << ", drop_path " << s.drop_path << ")";
    const int64_t map_side = conv_out(side, s);
    LSF_CHECK(map_side >= 1) << "CvT-LS: stage " << i << " (kernel " << s.patch_size << ", stride " << s.patch_stride
                             << ") gets a " << side << "×" << side << " input and would leave no tokens (image_size "
                             << o.image_size << ")";
    LSF_CHECK(map_side % s.window == 0)
        << "CvT-LS: stage " << i << ": the " << map_side << "×" << map_side << " token map (image_size "
        << o.image_size << ") is not a multiple of the window w = " << s.window
        << "; choose an image size or window with map side % window == 0";
    stages.push_back(register_module("stage" + std::to_string(i), std::make_shared<CvTLSStage>(channels, s, map_side, o)));
    side = map_side;
    channels = s.dim;
  }
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(channels, kLnEps));
  head = register_module("head", std::make_shared<nn::Linear>(channels, o.num_classes));
  apply(cvt_init);
}

ImageSpec CvTLSClassifier::spec() const { return {options_.num_classes, options_.image_size, options_.in_channels}; }

std::string CvTLSClassifier::extra_repr() const {
  std::ostringstream os;
  os << "stages=" << options_.stages.size() << ", image_size=" << options_.image_size
     << ", in_channels=" << options_.in_channels << ", num_classes=" << options_.num_classes
     << ", kv_stride=" << options_.kv_stride;
  return os.str();
}

Tensor CvTLSClassifier::forward(const Tensor& images) {
  ::lsf::nn::ModuleScope call_site(*this);
  check_images("CvT-LS", images, spec());
  const int64_t B = images.size(0);
  Tensor x = images, tokens;
  for (size_t i = 0; i < stages.size(); ++i) {
    tokens = stages[i]->forward(x);
    const CvTLSStageConfig& s = stages[i]->config();
    const int64_t g = s.cls_token ? 1 : 0, nx = stages[i]->map_side();
    if (i + 1 < stages.size()) x = tokens.narrow(1, g, nx * nx).transpose(1, 2).reshape({B, s.dim, nx, nx});
  }
  const bool cls = options_.stages.back().cls_token;
  Tensor features = cls ? norm->forward(tokens.select(1, 0)) : mean(norm->forward(tokens), {1});  // [B, d]
  return head->forward(features);
}

// ---- presets --------------------------------------------------------------------------------------------

namespace {

std::vector<CvTLSStageConfig> cvt_layout(int64_t depth2, int64_t depth3, const int64_t (&r)[3], const int64_t (&w)[3]) {
  return {
      {.patch_size = 7, .patch_stride = 4, .patch_padding = 2, .dim = 64, .heads = 1, .depth = 1, .window = w[0],
       .rank = r[0]},
      {.patch_size = 3, .patch_stride = 2, .patch_padding = 1, .dim = 192, .heads = 3, .depth = depth2,
       .window = w[1], .rank = r[1]},
      {.patch_size = 3, .patch_stride = 2, .patch_padding = 1, .dim = 384, .heads = 6, .depth = depth3,
       .window = w[2], .rank = r[2], .cls_token = true, .drop_path = 0.1},
  };
}

struct Preset {
  const char* name;
  int64_t depth2, depth3, image_size;
  int64_t r[3], w[3];
};

const Preset kPresets[] = {
    {"cvt_ls_13_224", 2, 10, 224, {64, 16, 4}, {8, 4, 2}},
    {"cvt_ls_21_224", 4, 16, 224, {64, 16, 4}, {8, 4, 2}},
    {"cvt_ls_21_384", 4, 16, 384, {64, 16, 4}, {12, 6, 3}},
    {"cvt_ls_21_448", 4, 16, 448, {128, 32, 8}, {16, 8, 4}},
};

}  // namespace

std::vector<std::string> cvt_ls_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

CvTLSOptions cvt_ls_preset(const std::string& name) {
  for (const Preset& p : kPresets)
    if (name == p.name) return {.stages = cvt_layout(p.depth2, p.depth3, p.r, p.w), .image_size = p.image_size};
  std::ostringstream known;
  for (const auto& n : cvt_ls_preset_names()) known << " " << n;
  LSF_FAIL() << "CvT-LS: unknown preset '" << name << "' (known:" << known.str() << ")";
}

}  // namespace lsf::vision
