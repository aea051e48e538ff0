// timm's batch-mode Mixup / CutMix and smoothed soft targets (data/mixup.h).
#include "lsformer/data/mixup.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "lsformer/engine/error.h"

namespace lsf::data {

MixResult mix_batch(Tensor& images, const MixupOptions& options, SampleRandom& random) {
  LSF_CHECK(images.dim() == 4 && images.dtype() == kF32 && images.is_contiguous() && images.device().is_cpu())
      << "mix_batch: images must be a contiguous CPU [B, C, H, W] f32 tensor, got shape " << images.shape();
  const int64_t batch = images.size(0), channels = images.size(1), height = images.size(2), width = images.size(3);
  LSF_CHECK(batch % 2 == 0) << "mix_batch: Mixup/CutMix pairs sample i with B − 1 − i, so the batch size must be "
                            << "even, got " << batch;
  LSF_CHECK(options.mixup_alpha >= 0 && options.cutmix_alpha >= 0 && options.enabled())
      << "mix_batch: alphas must be ≥ 0 and one > 0, got mixup " << options.mixup_alpha << ", cutmix "
      << options.cutmix_alpha;
  MixResult result;
  if (!(random.uniform() < options.prob)) return result;
  if (options.mixup_alpha > 0 && options.cutmix_alpha > 0) {
    result.cutmix = random.uniform() < options.switch_prob;
  } else {
    result.cutmix = options.cutmix_alpha > 0;
  }
  result.lambda = result.cutmix ? random.beta(options.cutmix_alpha, options.cutmix_alpha)
                                : random.beta(options.mixup_alpha, options.mixup_alpha);
  if (result.lambda == 1.0) return result;  // timm: nothing to mix
  result.mixed = true;
  float* x = images.data_ptr<float>();
  const int64_t sample = channels * height * width;
  if (result.cutmix) {
    const double ratio = std::sqrt(1.0 - result.lambda);
    const int64_t cut_h = int64_t(double(height) * ratio), cut_w = int64_t(double(width) * ratio);
    const int64_t cy = random.randint(0, height - 1), cx = random.randint(0, width - 1);
    auto clip = [](int64_t v, int64_t hi) { return std::min(std::max<int64_t>(v, 0), hi); };
    result.top = clip(cy - cut_h / 2, height);
    result.bottom = clip(cy + cut_h / 2, height);
    result.left = clip(cx - cut_w / 2, width);
    result.right = clip(cx + cut_w / 2, width);
    // x[:, :, box] = x.flip(0)[:, :, box]: pairs swap their boxes (read from a copy of the batch).
    std::vector<float> original(x, x + batch * sample);
    for (int64_t b = 0; b < batch; ++b) {
      const float* partner = original.data() + (batch - 1 - b) * sample;
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t y = result.top; y < result.bottom; ++y)
          for (int64_t xx = result.left; xx < result.right; ++xx) {
            const int64_t at = (c * height + y) * width + xx;
            x[b * sample + at] = partner[at];
          }
    }
    const double box = double((result.bottom - result.top) * (result.right - result.left));
    result.lambda = 1.0 - box / double(height * width);
  } else {
    const float own = float(result.lambda), other = float(1.0 - result.lambda);
    for (int64_t b = 0; b < batch / 2; ++b) {
      float* first = x + b * sample;
      float* second = x + (batch - 1 - b) * sample;
      for (int64_t i = 0; i < sample; ++i) {
        const float u = first[i], v = second[i];
        first[i] = u * own + v * other;   // torch: x.mul_(λ).add_(x.flip(0).mul_(1 − λ))
        second[i] = v * own + u * other;
      }
    }
  }
  return result;
}

Tensor mixup_targets(const Tensor& labels, int64_t num_classes, double lambda, double label_smoothing) {
  LSF_CHECK(labels.dim() == 1 && labels.dtype() == kI64 && labels.device().is_cpu())
      << "mixup_targets: labels must be a CPU [B] i64 tensor, got shape " << labels.shape();
  LSF_CHECK(num_classes >= 1) << "mixup_targets: num_classes must be ≥ 1, got " << num_classes;
  LSF_CHECK(label_smoothing >= 0 && label_smoothing <= 1)
      << "mixup_targets: label_smoothing must be in [0, 1], got " << label_smoothing;
  const int64_t batch = labels.size(0);
  const std::vector<int64_t> y = labels.contiguous().to_vector<int64_t>();
  const float off = float(label_smoothing / double(num_classes));
  const float on = float(1.0 - label_smoothing + label_smoothing / double(num_classes));
  const float own = float(lambda), other = float(1.0 - lambda);
  Tensor targets = empty({batch, num_classes}, kF32);
  float* t = targets.data_ptr<float>();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t a = y[size_t(b)], p = y[size_t(batch - 1 - b)];
    LSF_CHECK(a >= 0 && a < num_classes) << "mixup_targets: label " << a << " outside [0, " << num_classes << ")";
    for (int64_t k = 0; k < num_classes; ++k)
      t[b * num_classes + k] = (k == a ? on : off) * own + (k == p ? on : off) * other;
  }
  return targets;
}

}  // namespace lsf::data
