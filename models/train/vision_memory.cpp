// The vision family's activation estimate (vision_task.h: vision_activation_bytes).
#include <cmath>

#include "lsformer/models/train/memory_estimate.h"
#include "lsformer/models/train/vision_task.h"
#include "lsformer/models/vision/cnn.h"
#include "lsformer/models/vision/cvt_ls.h"
#include "lsformer/models/vision/vil.h"
#include "lsformer/ops/kernels/long_short_geometry.h"

namespace lsf::train {

double vision_activation_bytes(const vision::ImageClassifier& model, double batch) {
  auto transformer_stage = [&](double nx, double g, double d, double heads, double blocks, bool long_short,
                               double window, double rank) {
    const double tokens = batch * (g + nx * nx);
    const double T = double(ls_geometry::window_span(int64_t(window)));
    const double span = long_short ? rank + T * T + g : g + nx * nx;
    double bytes = transformer_activation_bytes(tokens, d, 4 * d, heads, span, blocks);
    if (long_short) bytes += 4.0 * tokens * blocks * (2 * T * T / (window * window) + 2) * d;
    return bytes + 4.0 * 3 * batch * nx * nx * d;  // patch embedding: convolution, norm, positions
  };
  double bytes = 0;
  if (const auto* vil = dynamic_cast<const vision::ViLClassifier*>(&model)) {
    for (const auto& stage : vil->layers) {
      const vision::ViLStageConfig& s = stage->config();
      bytes += transformer_stage(double(stage->map_side()), double(s.global_tokens), double(s.dim), double(s.heads),
                                 double(s.blocks), s.long_short, double(s.window), double(s.rank));
    }
  } else if (const auto* cvt = dynamic_cast<const vision::CvTLSClassifier*>(&model)) {
    for (const auto& stage : cvt->stages) {
      const vision::CvTLSStageConfig& s = stage->config();
      bytes += transformer_stage(double(stage->map_side()), s.cls_token ? 1.0 : 0.0, double(s.dim), double(s.heads),
                                 double(s.depth), true, double(s.window), double(s.rank));
    }
  } else if (const auto* cnn = dynamic_cast<const vision::CnnClassifier*>(&model)) {
    const vision::CnnOptions& o = cnn->options();
    double side = double(o.image_size);
    for (int64_t c : o.channels) {
      bytes += 4.0 * 3 * batch * double(c) * side * side * double(o.convs_per_block);
      if (side >= 2) {
        side = std::floor(side / 2);
        bytes += (4.0 + 8.0) * batch * double(c) * side * side;  // pooled map and its argmax indices
      }
    }
  }
  return bytes;
}

}  // namespace lsf::train
