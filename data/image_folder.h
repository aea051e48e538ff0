// Image folders in ImageNet's layout (torchvision's ImageFolder): root/<class>/**/<file>.
//
// Classes are the sub-directories of root sorted by name (byte order, as Python sorts str), and
// a class's index is its position in that list, exactly as torchvision assigns labels. Each
// class folder is walked recursively (symlinks followed); files whose lower-cased name ends in
// one of the extensions are its samples, ordered by directory path and then by file name (the
// order of torchvision's sorted(os.walk(...))). Files directly under root are ignored.
//
// Only paths are kept; image(i) reads and decodes the file on demand (data/image_decode.h), so
// a folder of ImageNet's size costs ~100 bytes per sample, not its decoded size. Decoding errors
// (unreadable, corrupt, truncated, not an image) surface when the sample is read and name the
// file. A missing root, a root without class folders and a class folder without a single image
// are errors at construction (torchvision raises on empty classes too), naming the folder.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lsformer/data/image_dataset.h"

namespace lsf::data {

struct ImageFolderOptions {
  int64_t channels = 3;  // every image converted to 1 (gray) or 3 (RGB) channels
  std::vector<std::string> extensions = {".jpg", ".jpeg", ".png"};  // matched case-insensitively
};

class ImageFolderDataset : public ImageDataset {
 public:
  ImageFolderDataset(const std::string& root, const ImageFolderOptions& options = {});
  int64_t size() const override { return int64_t(paths_.size()); }
  Image image(int64_t index) const override;  // decodes the file
  int32_t label(int64_t index) const override;
  std::string describe(int64_t index) const override;  // the path
  const std::string& path(int64_t index) const;
  const std::string& root() const { return root_; }

 private:
  std::string root_;
  std::vector<std::string> paths_;
  std::vector<int32_t> labels_;
};

}  // namespace lsf::data
