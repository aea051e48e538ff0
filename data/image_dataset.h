// Image datasets for the vision family: decoded 8-bit images, their labels and class names.
//
// Layout: an Image is interleaved H×W×C uint8 (row-major rows, channels innermost), the layout
// libjpeg, libpng and PIL produce, so every augmentation (data/image_ops.h, image_enhance.h)
// works on it directly; the pipeline (data/image_pipeline.h) writes the final [C, H, W] f32.
// C is 1 (gray) or 3 (RGB) everywhere in data/.
//
// An ImageDataset hands out image(i) on demand and must be safe to call from several threads at
// once (the loader's workers do). Two kinds exist:
//   InMemoryImageDataset   every image decoded up front in one buffer (CIFAR, MNIST: small)
//   image folders          paths only, each file decoded when asked (data/image_folder.h), since
//                          ImageNet decoded would need ~200 GB
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lsf::data {

struct Image {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;         // 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;  // [H, W, C] row-major, channels innermost

  Image() = default;
  Image(int64_t h, int64_t w, int64_t c, uint8_t fill = 0)
      : height(h), width(w), channels(c), pixels(size_t(h * w * c), fill) {}
  uint8_t& at(int64_t y, int64_t x, int64_t c) { return pixels[size_t((y * width + x) * channels + c)]; }
  uint8_t at(int64_t y, int64_t x, int64_t c) const { return pixels[size_t((y * width + x) * channels + c)]; }
};

class ImageDataset {
 public:
  virtual ~ImageDataset() = default;
  virtual int64_t size() const = 0;
  // The decoded image i (0 ≤ i < size()); thread-safe. Errors name the file (and record).
  virtual Image image(int64_t index) const = 0;
  virtual int32_t label(int64_t index) const = 0;
  // Where sample i comes from, for messages: a path, or "file record N".
  virtual std::string describe(int64_t index) const = 0;

  const std::string& name() const { return name_; }
  int64_t num_classes() const { return int64_t(class_names_.size()); }
  const std::vector<std::string>& class_names() const { return class_names_; }
  int64_t channels() const { return channels_; }  // of every image: 1 or 3

 protected:
  std::string name_;
  std::vector<std::string> class_names_;  // index = label
  int64_t channels_ = 0;
};

// Every image the same size, held in one contiguous buffer.
class InMemoryImageDataset : public ImageDataset {
 public:
  // Samples [first, next range's first) came from `path`, record 0, 1, ... of it.
  struct SourceRange {
    int64_t first = 0;
    std::string path;
  };
  // pixels [N, H, W, C]; labels [N], each in [0, class_names.size()); sources in increasing
  // `first` order, the first one at 0 (may be empty: describe() then says "<name> sample i").
  // Checks all of it.
  InMemoryImageDataset(std::string name, int64_t height, int64_t width, int64_t channels,
                       std::vector<uint8_t> pixels, std::vector<int32_t> labels,
                       std::vector<std::string> class_names, std::vector<SourceRange> sources = {});
  int64_t size() const override { return int64_t(labels_.size()); }
  Image image(int64_t index) const override;
  int32_t label(int64_t index) const override;
  std::string describe(int64_t index) const override;
  int64_t height() const { return height_; }
  int64_t width() const { return width_; }
  // The pixels of sample i without a copy: [H, W, C].
  const uint8_t* pixels(int64_t index) const;

 private:
  int64_t height_, width_;
  std::vector<uint8_t> pixels_;
  std::vector<int32_t> labels_;
  std::vector<SourceRange> sources_;
};

// Samples [begin, end) of another dataset as a dataset of their own (a dev split cut from a
// training set): sample i is base sample begin + i, with the base's labels, class names and
// channels; describe() names the base sample. Holds the base alive.
class ImageSubset : public ImageDataset {
 public:
  // 0 ≤ begin < end ≤ base->size(), checked.
  ImageSubset(std::shared_ptr<const ImageDataset> base, int64_t begin, int64_t end, std::string name);
  int64_t size() const override { return end_ - begin_; }
  Image image(int64_t index) const override;
  int32_t label(int64_t index) const override;
  std::string describe(int64_t index) const override;
  int64_t begin() const { return begin_; }

 private:
  std::shared_ptr<const ImageDataset> base_;
  int64_t begin_, end_;
};

// Checks 0 ≤ index < dataset.size(), naming the dataset.
void check_image_index(const ImageDataset& dataset, int64_t index);

// Per-channel statistics of v / 255 over every pixel of the first `max_samples` samples (all
// when ≤ 0): the mean and the population standard deviation, accumulated in double — the
// "per-dataset" normalisation constants (Fashion-MNIST train: 0.2860, 0.3530).
struct ChannelStats {
  std::vector<float> mean;  // [C]
  std::vector<float> std;   // [C]
};
ChannelStats channel_stats(const ImageDataset& dataset, int64_t max_samples = 0);

}  // namespace lsf::data
