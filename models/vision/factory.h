// Building an image classifier from a name, and measuring its size and forward cost.
//
//   auto model = vision::make_image_classifier("cvt_ls_13_224", {.num_classes = 1000});
//   vision::ModelCost cost = vision::measure_cost(*model);   // parameters, multiply-adds per image
//
// Names:
//   vil_ls_medium_224, vil_ls_base_224, vil_ls_medium_384   ViL-LS presets (vil.h)
//   vil:<arch string>                                       ViL with any official arch string
//   cvt_ls_13_224, cvt_ls_21_224, cvt_ls_21_384, cvt_ls_21_448   CvT*-LS presets (cvt_ls.h)
//   cnn                                                     the CNN baseline (cnn.h)
// The spec's num_classes, image_size and in_channels replace the preset's (a preset's image size
// is in its name; another size must still fit every stage's window, or the constructor says which
// stage and window do not). Unknown names are errors listing the known ones.
// ClassifierOptions set the training options a family has (drop path, dropout, DualLN, the
// CvT*-LS open choices); an option the family does not have is an error naming it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lsformer/models/vision/classifier.h"

namespace lsf::vision {

enum class ClassifierFamily { ViL, CvTLS, Cnn };
// The family a name builds (vil presets and vil:<arch> → ViL, cvt_ls_* → CvTLS, cnn → Cnn);
// an error listing the known names otherwise, or naming what is wrong in a vil:<arch>.
ClassifierFamily classifier_family(const std::string& name);

// Options beyond the spec; each one left unset keeps the preset's value (or the family's default).
struct ClassifierOptions {
  std::optional<double> drop_path;  // ViL: stochastic depth of the last block (linear from 0 over all
                                    // blocks); CvT*-LS: the last stage's rate (linear within it)
  std::optional<double> drop_rate;  // ViL, CvT*-LS: dropout after the embedding, attention proj and in
                                    // the MLP; CNN: dropout before the classifier
  std::optional<bool> qkv_bias;     // ViL, CvT*-LS
  std::optional<bool> dual_ln;      // ViL (its long-short stages), CvT*-LS
  std::optional<int64_t> kv_stride;            // CvT*-LS (cvt_ls_attention.h)
  std::optional<int64_t> dp_kernel;            // CvT*-LS
  std::optional<bool> batch_norm_projection;   // CvT*-LS
};

std::shared_ptr<ImageClassifier> make_image_classifier(const std::string& name, const ImageSpec& spec,
                                                       const ClassifierOptions& options = {});
// A lower bound of the trainable parameters `name` builds, from its stage list alone (no model
// is built): 12·d² per transformer block (its attention and MLP weights), 9·c_in·c_out per CNN
// convolution. For refusing a size that cannot fit before any of it is allocated: building a
// model of 200,000 blocks took minutes before its memory could be checked.
double parameter_lower_bound(const std::string& name, const ImageSpec& spec);
// The names above (without the vil: form); for help texts.
std::vector<std::string> image_classifier_names();
// The image spec a preset name implies (its resolution, 3 channels, 1000 classes); the CNN's
// defaults for "cnn"; an error for unknown names.
ImageSpec default_spec(const std::string& name);

struct ModelCost {
  int64_t parameters = 0;     // trainable scalars (buffers not counted)
  int64_t multiply_adds = 0;  // one forward pass of one image (ops/flops.h's convention)
  double gflops() const { return double(multiply_adds) * 1e-9; }  // as papers report "FLOPs"
};

// Runs one forward pass of a zero image [1, C, S, S] (in eval mode, without autograd; the
// module's mode is restored) under a FlopCounter. Multiply-adds of matmul/bmm/conv2d and the
// fused attention ops: what ViL, CvT and fvcore report as FLOPs (see ops/flops.h).
ModelCost measure_cost(ImageClassifier& model);

}  // namespace lsf::vision
