// InMemoryImageDataset: the small datasets (CIFAR, MNIST) decoded into one buffer.
#include "lsformer/data/image_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lsformer/engine/error.h"

namespace lsf::data {

void check_image_index(const ImageDataset& dataset, int64_t index) {
  LSF_CHECK(index >= 0 && index < dataset.size())
      << "image dataset '" << dataset.name() << "': index " << index << " is outside [0, "
      << dataset.size() << ")";
}

InMemoryImageDataset::InMemoryImageDataset(std::string name, int64_t height, int64_t width,
                                           int64_t channels, std::vector<uint8_t> pixels,
                                           std::vector<int32_t> labels,
                                           std::vector<std::string> class_names,
                                           std::vector<SourceRange> sources)
    : height_(height), width_(width), pixels_(std::move(pixels)), labels_(std::move(labels)),
      sources_(std::move(sources)) {
  name_ = std::move(name);
  class_names_ = std::move(class_names);
  channels_ = channels;
  LSF_CHECK(height > 0 && width > 0 && (channels == 1 || channels == 3))
      << "image dataset '" << name_ << "': bad image shape " << height << "×" << width << "×"
      << channels << " (channels must be 1 or 3)";
  const int64_t n = int64_t(labels_.size());
  LSF_CHECK(int64_t(pixels_.size()) == n * height * width * channels)
      << "image dataset '" << name_ << "': " << pixels_.size() << " pixel bytes for " << n
      << " images of " << height << "×" << width << "×" << channels;
  for (size_t s = 0; s < sources_.size(); ++s)
    LSF_CHECK(s == 0 ? sources_[s].first == 0 : sources_[s].first >= sources_[s - 1].first)
        << "image dataset '" << name_ << "': source ranges must start at 0 and increase";
  LSF_CHECK(!class_names_.empty()) << "image dataset '" << name_ << "': no class names";
  for (int64_t i = 0; i < n; ++i)
    LSF_CHECK(labels_[size_t(i)] >= 0 && labels_[size_t(i)] < num_classes())
        << "image dataset '" << name_ << "': " << describe(i) << " has label " << labels_[size_t(i)]
        << " outside [0, " << num_classes() << ")";
}

const uint8_t* InMemoryImageDataset::pixels(int64_t index) const {
  check_image_index(*this, index);
  return pixels_.data() + size_t(index * height_ * width_ * channels_);
}

Image InMemoryImageDataset::image(int64_t index) const {
  const uint8_t* src = pixels(index);
  Image out(height_, width_, channels_);
  std::memcpy(out.pixels.data(), src, out.pixels.size());
  return out;
}

int32_t InMemoryImageDataset::label(int64_t index) const {
  check_image_index(*this, index);
  return labels_[size_t(index)];
}

std::string InMemoryImageDataset::describe(int64_t index) const {
  if (sources_.empty() || index < 0) return name_ + " sample " + std::to_string(index);
  auto it = std::upper_bound(sources_.begin(), sources_.end(), index,
                             [](int64_t i, const SourceRange& r) { return i < r.first; });
  --it;  // the last range starting at or before index (the first starts at 0)
  return "'" + it->path + "' record " + std::to_string(index - it->first);
}

ChannelStats channel_stats(const ImageDataset& dataset, int64_t max_samples) {
  const int64_t n = max_samples > 0 ? std::min(max_samples, dataset.size()) : dataset.size();
  LSF_CHECK(n > 0) << "channel_stats: image dataset '" << dataset.name() << "' is empty";
  const int64_t cc = dataset.channels();
  std::vector<double> sum(size_t(cc), 0.0), sum_sq(size_t(cc), 0.0);
  double count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Image image = dataset.image(i);
    LSF_CHECK(image.channels == cc) << "channel_stats: " << dataset.describe(i) << " has " << image.channels
                                    << " channels, the dataset " << cc;
    for (size_t p = 0; p < image.pixels.size(); ++p) {
      const double v = image.pixels[p] / 255.0;
      sum[p % size_t(cc)] += v;
      sum_sq[p % size_t(cc)] += v * v;
    }
    count += double(image.height * image.width);
  }
  ChannelStats stats;
  for (int64_t c = 0; c < cc; ++c) {
    const double mean = sum[size_t(c)] / count;
    stats.mean.push_back(float(mean));
    stats.std.push_back(float(std::sqrt(std::max(0.0, sum_sq[size_t(c)] / count - mean * mean))));
  }
  return stats;
}

ImageSubset::ImageSubset(std::shared_ptr<const ImageDataset> base, int64_t begin, int64_t end, std::string name)
    : base_(std::move(base)), begin_(begin), end_(end) {
  LSF_CHECK(base_ != nullptr) << "ImageSubset '" << name << "': no base dataset";
  LSF_CHECK(0 <= begin && begin < end && end <= base_->size())
      << "ImageSubset '" << name << "': samples [" << begin << ", " << end << ") are not a non-empty range of '"
      << base_->name() << "' (" << base_->size() << " samples)";
  name_ = std::move(name);
  class_names_ = base_->class_names();
  channels_ = base_->channels();
}

Image ImageSubset::image(int64_t index) const {
  check_image_index(*this, index);
  return base_->image(begin_ + index);
}

int32_t ImageSubset::label(int64_t index) const {
  check_image_index(*this, index);
  return base_->label(begin_ + index);
}

std::string ImageSubset::describe(int64_t index) const { return base_->describe(begin_ + index); }

}  // namespace lsf::data
