// vision::ViLClassifier: ViL-LS, the Vision-Longformer "MsViT" backbone with the 2-D long-short
// attention (transformer-ls.md §4.4–4.5; the official imagenet/models/msvit.py).
//
//   vision::ViLClassifier model(vision::vil_preset("vil_ls_medium_224"));
//   Tensor logits = model.forward(images);   // [B, 3, 224, 224] → [B, 1000]
//
// Stages (one per arch-string stage, see vil_arch.h), each an nn container named layer<k>:
//   layer<k>.0      PatchEmbed: Conv2d(in, d, kernel = stride = p) → flatten row-major →
//                   LayerNorm(eps 1e-6, norm_embed) → a fresh learned CLS per stage prepended
//                   when g ≥ 1 (cls_token [1, g, d]) → absolute 2-D position embedding when a1
//                   (cls_pos_embed [1, g, d], x_pos_embed [1, nx, d/2], y_pos_embed [1, ny, d/2];
//                   token (i, j) gets [x_pos[i], y_pos[j]]) → dropout(drop_rate).
//   layer<k>.1,3,.. AttnBlock: x ← x + DropPath(attn(LN(x))): attn = LongShortAttention2d (s1;
//                   relative-position bias unless a1) or ViLFullAttention (s0; relative biases
//                   unless a1). Children norm, attn.
//   layer<k>.2,4,.. MlpBlock: x ← x + DropPath(mlp(LN(x))), mlp = fc1 (4d) → GELU → fc2.
// Between stages the global tokens are dropped and the patch tokens reshaped to d × nx × nx.
// Head: norm (LayerNorm eps 1e-6) over the last stage's tokens, then the CLS row when the last
// stage has g ≥ 1 and !avg_pool, else the mean of all its tokens; head = Linear(d → classes).
// DropPath rates: linspace(0, drop_path, total blocks) in block order across stages, the same
// rate for a block's attention and MLP sublayers.
// Initialisation (§4.4): Linear weights trunc-normal std 0.02 and biases 0, LayerNorms (1, 0),
// position tables and CLS tokens trunc-normal 0.02, patch convs PyTorch's default.
// The state_dict names are the official ones, so a released checkpoint converted with
// scripts/convert_vil_checkpoint.py loads with load_state_dict(strict).
//
// Requirements (errors name them): square images; each stage's map side nx = ⌊previous / p⌋
// ≥ 1 (as the official stride-p conv); a long-short stage needs nx % w == 0.
// Deviations: any number of stages ≥ 1 (official: 3 or 4); drop path uses the Philox generator.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lsformer/models/attention/attention.h"
#include "lsformer/models/nn/conv2d.h"
#include "lsformer/models/nn/drop_path.h"
#include "lsformer/models/nn/dropout.h"
#include "lsformer/models/nn/layer_norm.h"
#include "lsformer/models/nn/linear.h"
#include "lsformer/models/nn/mlp.h"
#include "lsformer/models/vision/classifier.h"
#include "lsformer/models/vision/vil_arch.h"

namespace lsf::vision {

struct ViLOptions {
  std::string arch;               // the official arch string (vil_arch.h)
  int64_t image_size = 224;       // square input side
  int64_t in_channels = 3;
  int64_t num_classes = 1000;     // ≥ 1
  bool qkv_bias = true;
  double drop_rate = 0.0;         // after the patch embedding, after attention proj, in the MLP
  double attn_drop_rate = 0.0;    // on attention probabilities
  double drop_path_rate = 0.0;    // stochastic depth at the last block (linear from 0)
  bool norm_embed = true;         // LayerNorm after the patch conv (MODEL.VIT.NORM_EMBED)
  bool avg_pool = false;          // mean-pool even when the last stage has a global token
  bool dual_ln = true;            // DualLN in the long-short stages (false: the paper's ablation)
};

// The official PatchEmbed (layer<k>.0).
class ViLPatchEmbed : public nn::Module {
 public:
  ViLPatchEmbed(int64_t in_channels, const ViLStageConfig& stage, int64_t map_side, bool norm_embed, double drop_rate);
  // x [B, C_in, S, S] → tokens [B, g + nx², d] (nx = map_side).
  Tensor forward(const Tensor& x);

  std::shared_ptr<nn::Conv2d> proj;
  std::shared_ptr<nn::LayerNorm> norm_embed;  // null without norm_embed
  std::shared_ptr<nn::Dropout> pos_drop;
  Tensor cls_token;      // [1, g, d] when g ≥ 1
  Tensor cls_pos_embed;  // [1, g, d] with a1 (zero-sized when g = 0, as the official parameter)
  Tensor x_pos_embed;    // [1, nx, d/2] with a1
  Tensor y_pos_embed;    // [1, nx, d/2] with a1

 private:
  int64_t map_side_, global_tokens_, dim_;
};

// AttnBlock: x + DropPath(attn(norm(x))).
class ViLAttnBlock : public nn::Module {
 public:
  ViLAttnBlock(const ViLStageConfig& stage, int64_t map_side, const ViLOptions& options, double drop_path);
  Tensor forward(const Tensor& x, int64_t map_side);  // x [B, g + nx², d]

  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Attention> attn;  // LongShortAttention2d or ViLFullAttention
  std::shared_ptr<nn::DropPath> drop_path;

 private:
  int64_t global_tokens_;
};

// MlpBlock: x + DropPath(mlp(norm(x))).
class ViLMlpBlock : public nn::Module {
 public:
  ViLMlpBlock(int64_t dim, const ViLOptions& options, double drop_path);
  Tensor forward(const Tensor& x);  // x [B, n, d]

  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Mlp> mlp;
  std::shared_ptr<nn::DropPath> drop_path;
};

// One stage, layer<k>: children "0" (patch embedding), "1", "2", ... (attention, MLP, ...).
class ViLStage : public nn::Module {
 public:
  ViLStage(int64_t in_channels, const ViLStageConfig& stage, int64_t map_side, const ViLOptions& options,
           const std::vector<double>& drop_paths);
  // x [B, C_in, S, S] → tokens [B, g + nx², d].
  Tensor forward(const Tensor& x);
  const ViLStageConfig& config() const { return config_; }
  int64_t map_side() const { return map_side_; }

  std::shared_ptr<ViLPatchEmbed> patch_embed;
  std::vector<std::shared_ptr<ViLAttnBlock>> attn_blocks;
  std::vector<std::shared_ptr<ViLMlpBlock>> mlp_blocks;

 private:
  ViLStageConfig config_;
  int64_t map_side_;
};

class ViLClassifier : public ImageClassifier {
 public:
  explicit ViLClassifier(const ViLOptions& options);
  Tensor forward(const Tensor& images) override;  // [B, C, S, S] → [B, num_classes]
  ImageSpec spec() const override;
  std::string extra_repr() const override;
  const ViLOptions& options() const { return options_; }
  const std::vector<ViLStageConfig>& stages() const { return stage_configs_; }

  std::vector<std::shared_ptr<ViLStage>> layers;  // layer1, layer2, ...
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;

 private:
  ViLOptions options_;
  std::vector<ViLStageConfig> stage_configs_;
};

// The drop-path rate of every block, in order: linspace(0, rate, total) (a single block gets 0).
std::vector<double> vil_drop_path_rates(int64_t total_blocks, double rate);

// Presets of transformer-ls.md §4.5 (their training drop-path rates included):
// vil_ls_medium_224, vil_ls_base_224, vil_ls_medium_384. Unknown names list the known ones.
ViLOptions vil_preset(const std::string& name);
std::vector<std::string> vil_preset_names();

}  // namespace lsf::vision
