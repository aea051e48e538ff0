// ImageFolderDataset: listing root/<class>/**/<image> the way torchvision does (data/image_folder.h).
#include "lsformer/data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>
#include <utility>

#include "lsformer/data/image_decode.h"
#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool has_extension(const std::string& name, const std::vector<std::string>& extensions) {
  const std::string l = lower(name);
  for (const std::string& e : extensions)
    if (l.size() >= e.size() && l.compare(l.size() - e.size(), e.size(), e) == 0) return true;
  return false;
}

// The images under one class folder, ordered by (directory, file name).
std::vector<std::string> list_class_images(const fs::path& folder, const std::vector<std::string>& extensions) {
  std::vector<std::pair<std::string, std::string>> found;  // (directory, file name)
  std::error_code ec;
  fs::recursive_directory_iterator it(folder, fs::directory_options::follow_directory_symlink, ec);
  LSF_CHECK(!ec) << "ImageFolderDataset: cannot list '" << folder.string() << "': " << ec.message();
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    LSF_CHECK(!ec) << "ImageFolderDataset: cannot list '" << folder.string() << "': " << ec.message();
    const fs::directory_entry& entry = *it;
    if (entry.is_directory(ec)) continue;
    const std::string name = entry.path().filename().string();
    if (has_extension(name, extensions)) found.emplace_back(entry.path().parent_path().string(), name);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  paths.reserve(found.size());
  for (const auto& [dir, name] : found) paths.push_back((fs::path(dir) / name).string());
  return paths;
}

}  // namespace

ImageFolderDataset::ImageFolderDataset(const std::string& root, const ImageFolderOptions& options)
    : root_(root) {
  name_ = "image folder '" + root + "'";
  channels_ = options.channels;
  LSF_CHECK(options.channels == 1 || options.channels == 3)
      << "ImageFolderDataset: channels must be 1 or 3, got " << options.channels;
  LSF_CHECK(!options.extensions.empty()) << "ImageFolderDataset: no file extensions given";
  std::vector<std::string> extensions;
  for (const std::string& e : options.extensions) extensions.push_back(lower(e));
  std::error_code ec;
  LSF_CHECK(fs::is_directory(root, ec))
      << "ImageFolderDataset: '" << root << "' is not a directory (expected root/<class>/<image>)";
  for (const fs::directory_entry& entry : fs::directory_iterator(root, ec))
    if (entry.is_directory()) class_names_.push_back(entry.path().filename().string());
  LSF_CHECK(!ec) << "ImageFolderDataset: cannot list '" << root << "': " << ec.message();
  LSF_CHECK(!class_names_.empty())
      << "ImageFolderDataset: '" << root << "' has no class folders (expected root/<class>/<image>)";
  std::sort(class_names_.begin(), class_names_.end());
  for (size_t c = 0; c < class_names_.size(); ++c) {
    const fs::path folder = fs::path(root) / class_names_[c];
    std::vector<std::string> images = list_class_images(folder, extensions);
    if (images.empty()) {
      std::string listed;
      for (const std::string& e : extensions) listed += (listed.empty() ? "" : ", ") + e;
      LSF_FAIL() << "ImageFolderDataset: class folder '" << folder.string() << "' holds no image file ("
                 << listed << ")";
    }
    for (std::string& p : images) {
      paths_.push_back(std::move(p));
      labels_.push_back(int32_t(c));
    }
  }
}

const std::string& ImageFolderDataset::path(int64_t index) const {
  check_image_index(*this, index);
  return paths_[size_t(index)];
}

Image ImageFolderDataset::image(int64_t index) const { return decode_image_file(path(index), channels_); }

int32_t ImageFolderDataset::label(int64_t index) const {
  check_image_index(*this, index);
  return labels_[size_t(index)];
}

std::string ImageFolderDataset::describe(int64_t index) const {
  return index >= 0 && index < size() ? "'" + paths_[size_t(index)] + "'" : name_ + " sample " + std::to_string(index);
}

}  // namespace lsf::data
