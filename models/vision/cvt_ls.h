// vision::CvTLSClassifier: CvT*-LS (transformer-ls.md §4.6) — the Convolutional vision
// Transformer (CvT) with the long-short attention in every block. No official code exists; the
// layout follows the official CvT (microsoft/CvT, cls_cvt.py) and its state_dict names:
//
//   stage<i>.patch_embed.proj      Conv2d(in, d_i, k_i, stride s_i, padding p_i)  (7/4/2, 3/2/1, 3/2/1)
//   stage<i>.patch_embed.norm      LayerNorm(d_i) over the tokens (eps 1e-5)
//   stage<i>.cls_token             [1, 1, d_i] when the stage has a CLS (CvT: the last stage)
//   stage<i>.blocks.<j>            pre-LN block: x + DropPath(attn(norm1(x))),
//                                                x + DropPath(mlp(norm2(x)))   (mlp 4·d, GELU)
//                                  with attn = CvTLSAttention (cvt_ls_attention.h)
//   norm, head                     LayerNorm(d_last), Linear(d_last → classes)
// Between stages the CLS (if any) is dropped and the tokens become a d × nx × nx map again. The
// head reads norm(CLS) when the last stage has a CLS, else the mean of norm(tokens).
// No position embedding (CvT's convolutions carry position). DropPath per stage as CvT:
// linspace(0, drop_path_i, depth_i) within stage i. Init as CvT ("trunc_norm"): Linear weights
// trunc-normal 0.02 and biases 0, LayerNorm/BatchNorm (1, 0), CLS trunc-normal 0.02, convs
// PyTorch's default.
//
// Presets (CvT-13 / CvT-21 layer configurations, the paper's (r, w) per resolution):
//   cvt_ls_13_224, cvt_ls_21_224: r (64, 16, 4), w (8, 4, 2) on 56/28/14 maps
//   cvt_ls_21_384: r (64, 16, 4), w (12, 6, 3) on 96/48/24 maps
//   cvt_ls_21_448: r (128, 32, 8), w (16, 8, 4) on 112/56/28 maps
// Requirements (errors name them): each stage's map side ≥ 1 and a multiple of its window.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lsformer/models/nn/conv2d.h"
#include "lsformer/models/nn/drop_path.h"
#include "lsformer/models/nn/dropout.h"
#include "lsformer/models/nn/layer_norm.h"
#include "lsformer/models/nn/linear.h"
#include "lsformer/models/nn/mlp.h"
#include "lsformer/models/vision/classifier.h"
#include "lsformer/models/vision/cvt_ls_attention.h"

namespace lsf::vision {

struct CvTLSStageConfig {
  int64_t patch_size = 3;     // convolutional token embedding kernel
  int64_t patch_stride = 2;
  int64_t patch_padding = 1;
  int64_t dim = 64;           // d_i
  int64_t heads = 1;
  int64_t depth = 1;          // blocks
  int64_t mlp_ratio = 4;      // hidden = mlp_ratio · d_i
  int64_t window = 8;         // w_i: the stage's map side must be a multiple of it
  int64_t rank = 16;          // r_i
  bool cls_token = false;     // a CLS token in this stage (CvT: only the last)
  double drop_path = 0.0;     // the stage's largest drop-path rate
};

struct CvTLSOptions {
  std::vector<CvTLSStageConfig> stages;
  int64_t image_size = 224;
  int64_t in_channels = 3;
  int64_t num_classes = 1000;
  bool qkv_bias = true;
  double drop_rate = 0.0;       // after the embedding, after attention proj, in the MLP
  double attn_drop_rate = 0.0;
  // The open choices of CvTLSAttentionOptions, shared by every layer.
  int64_t kv_stride = 1;
  int64_t dp_kernel = 3;
  bool batch_norm_projection = false;
  bool dual_ln = true;          // DualLN in every layer (false: the paper's ablation, 81.3 vs 81.9)
};

class CvTLSBlock : public nn::Module {
 public:
  CvTLSBlock(const CvTLSStageConfig& stage, const CvTLSOptions& options, double drop_path);
  Tensor forward(const Tensor& x, int64_t map_side, int64_t num_global);  // x [B, g + nx², d]

  std::shared_ptr<nn::LayerNorm> norm1;
  std::shared_ptr<CvTLSAttention> attn;
  std::shared_ptr<nn::DropPath> drop_path;
  std::shared_ptr<nn::LayerNorm> norm2;
  std::shared_ptr<nn::Mlp> mlp;
};

// The official ConvEmbed: conv then LayerNorm over the channels.
class ConvEmbed : public nn::Module {
 public:
  ConvEmbed(int64_t in_channels, const CvTLSStageConfig& stage);
  Tensor forward(const Tensor& x);  // [B, C_in, S, S] → tokens [B, nx², d] (nx from the conv)
  std::shared_ptr<nn::Conv2d> proj;
  std::shared_ptr<nn::LayerNorm> norm;
};

class CvTLSStage : public nn::Module {
 public:
  CvTLSStage(int64_t in_channels, const CvTLSStageConfig& stage, int64_t map_side, const CvTLSOptions& options);
  // x [B, C_in, S, S] → tokens [B, g + nx², d] (the CLS first when the stage has one).
  Tensor forward(const Tensor& x);
  int64_t map_side() const { return map_side_; }
  const CvTLSStageConfig& config() const { return config_; }

  std::shared_ptr<ConvEmbed> patch_embed;
  std::shared_ptr<nn::Dropout> pos_drop;
  Tensor cls_token;  // [1, 1, d] or undefined
  std::vector<std::shared_ptr<CvTLSBlock>> blocks;

 private:
  CvTLSStageConfig config_;
  int64_t map_side_;
};

class CvTLSClassifier : public ImageClassifier {
 public:
  explicit CvTLSClassifier(const CvTLSOptions& options);
  Tensor forward(const Tensor& images) override;  // [B, C, S, S] → [B, num_classes]
  ImageSpec spec() const override;
  std::string extra_repr() const override;
  const CvTLSOptions& options() const { return options_; }

  std::vector<std::shared_ptr<CvTLSStage>> stages;  // stage0, stage1, ...
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;

 private:
  CvTLSOptions options_;
};

// cvt_ls_13_224, cvt_ls_21_224, cvt_ls_21_384, cvt_ls_21_448 (CvT's drop-path rates 0, 0, 0.1).
CvTLSOptions cvt_ls_preset(const std::string& name);
std::vector<std::string> cvt_ls_preset_names();

}  // namespace lsf::vision
