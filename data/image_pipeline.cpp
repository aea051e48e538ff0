// ImagePipeline: the recipe's per-sample transforms and per-batch mixing (data/image_pipeline.h).
#include "lsformer/data/image_pipeline.h"

#include <cmath>
#include <cstring>

#include "lsformer/data/image_decode.h"
#include "lsformer/engine/error.h"

namespace lsf::data {

ImagePipeline::ImagePipeline(ImagePipelineOptions options, int64_t num_classes)
    : options_(std::move(options)), num_classes_(num_classes) {
  const ImagePipelineOptions& o = options_;
  LSF_CHECK(o.image_size > 0) << "ImagePipeline: image_size must be > 0, got " << o.image_size;
  LSF_CHECK(o.channels == 0 || o.channels == 1 || o.channels == 3)
      << "ImagePipeline: channels must be 0 (the dataset's), 1 or 3, got " << o.channels;
  LSF_CHECK(num_classes >= 1) << "ImagePipeline: num_classes must be ≥ 1, got " << num_classes;
  LSF_CHECK(!o.mean.empty() && o.mean.size() == o.std.size())
      << "ImagePipeline: mean and std must have one value per channel, got " << o.mean.size() << " and "
      << o.std.size();
  for (float s : o.std) LSF_CHECK(s > 0) << "ImagePipeline: every std must be > 0, got " << s;
  LSF_CHECK(o.crop_pct > 0 && o.crop_pct <= 1) << "ImagePipeline: crop_pct must be in (0, 1], got " << o.crop_pct;
  LSF_CHECK(o.hflip >= 0 && o.hflip <= 1) << "ImagePipeline: hflip must be a probability, got " << o.hflip;
  LSF_CHECK(o.erasing.probability >= 0 && o.erasing.probability <= 1)
      << "ImagePipeline: erasing.probability must be in [0, 1], got " << o.erasing.probability;
  LSF_CHECK(o.mixup.mixup_alpha >= 0 && o.mixup.cutmix_alpha >= 0 && o.mixup.prob >= 0 && o.mixup.prob <= 1 &&
            o.mixup.switch_prob >= 0 && o.mixup.switch_prob <= 1 && o.mixup.label_smoothing >= 0 &&
            o.mixup.label_smoothing <= 1)
      << "ImagePipeline: mixup needs alphas ≥ 0 and prob, switch_prob, label_smoothing in [0, 1]";
  LSF_CHECK(o.color_jitter.brightness >= 0 && o.color_jitter.contrast >= 0 && o.color_jitter.saturation >= 0)
      << "ImagePipeline: colour jitter strengths must be ≥ 0";
  if (o.train && o.random_resized_crop) {
    LSF_CHECK(o.crop.scale_min > 0 && o.crop.scale_min <= o.crop.scale_max && o.crop.ratio_min > 0 &&
              o.crop.ratio_min <= o.crop.ratio_max)
        << "ImagePipeline: random-resized-crop needs 0 < scale_min ≤ scale_max and 0 < ratio_min ≤ ratio_max";
  }
  use_rand_augment_ = o.train && !o.rand_augment.empty();
  if (use_rand_augment_) {
    RandAugmentOptions base;
    base.interpolation = o.interpolation;
    // timm: img_mean = round(255 · mean) per channel, the fill of the geometric ops.
    for (size_t c = 0; c < 3; ++c) {
      const double m = o.mean[std::min(c, o.mean.size() - 1)];
      base.fill[c] = uint8_t(std::min(255.0, std::nearbyint(255.0 * m)));
    }
    rand_augment_ = parse_rand_augment(o.rand_augment, base);
  }
  const bool jitter = o.color_jitter.brightness > 0 || o.color_jitter.contrast > 0 || o.color_jitter.saturation > 0;
  use_color_jitter_ = o.train && jitter && (!use_rand_augment_ || o.force_color_jitter);
}

int64_t ImagePipeline::output_channels(const ImageDataset& dataset) const {
  return options_.channels == 0 ? dataset.channels() : options_.channels;
}

Image ImagePipeline::prepare(const ImageDataset& dataset, int64_t index) const {
  Image image = dataset.image(index);
  const int64_t channels = output_channels(dataset);
  return image.channels == channels ? image : convert_channels(image, channels);
}

Image ImagePipeline::augment(const Image& image, int64_t index, int64_t epoch, uint64_t seed) const {
  const ImagePipelineOptions& o = options_;
  const int64_t s = o.image_size;
  if (!o.train) {
    const int64_t scale_size = int64_t(std::floor(double(s) / o.crop_pct));
    return center_crop(resize_shorter(image, scale_size, o.interpolation), s);
  }
  SampleRandom random(seed, kAugmentStream, index, epoch);
  Image out = o.random_resized_crop ? random_resized_crop(image, s, o.crop, o.interpolation, random)
              : (image.height == s && image.width == s) ? image
                                                         : resize(image, s, s, o.interpolation);
  if (o.hflip > 0 && random.uniform() < o.hflip) out = hflip(out);
  if (use_rand_augment_) out = rand_augment(out, rand_augment_, random);
  if (use_color_jitter_) out = color_jitter(out, o.color_jitter, random);
  return out;
}

void ImagePipeline::sample(const ImageDataset& dataset, int64_t index, int64_t epoch, uint64_t seed,
                           float* out) const {
  const Image image = augment(prepare(dataset, index), index, epoch, seed);
  LSF_CHECK(int64_t(options_.mean.size()) == image.channels)
      << "ImagePipeline: mean/std have " << options_.mean.size() << " values but " << dataset.describe(index)
      << " gives " << image.channels << "-channel images (set mean/std per channel, or channels)";
  normalize_to_chw(image, options_.mean, options_.std, out);
  if (options_.train && options_.erasing.probability > 0) {
    // Erasing has its own stream, so augment() alone gives exactly the pixels sample() erases.
    SampleRandom erase_random(seed, kEraseStream, index, epoch);
    random_erasing(out, image.channels, image.height, image.width, options_.erasing, erase_random);
  }
}

ImageBatch ImagePipeline::batch(const ImageDataset& dataset, const std::vector<int64_t>& indices, int64_t epoch,
                                uint64_t seed, int64_t batch_index) const {
  LSF_CHECK(!indices.empty()) << "ImagePipeline::batch: no indices given";
  const int64_t b = int64_t(indices.size()), c = output_channels(dataset), s = options_.image_size;
  ImageBatch out;
  out.index = batch_index;
  out.images = empty({b, c, s, s}, kF32);
  out.labels = empty({b}, kI64);
  float* images = out.images.data_ptr<float>();
  int64_t* labels = out.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    const int64_t index = indices[size_t(i)];
    check_image_index(dataset, index);
    sample(dataset, index, epoch, seed, images + i * c * s * s);
    labels[i] = dataset.label(index);
    LSF_CHECK(labels[i] >= 0 && labels[i] < num_classes_)
        << "ImagePipeline: " << dataset.describe(index) << " has label " << labels[i] << " outside [0, "
        << num_classes_ << ")";
  }
  if (mixing()) {
    SampleRandom random(seed, kMixStream, batch_index, 0);
    out.mix = mix_batch(out.images, options_.mixup, random);
    out.soft_targets = mixup_targets(out.labels, num_classes_, out.mix.lambda, options_.mixup.label_smoothing);
  }
  return out;
}

}  // namespace lsf::data
