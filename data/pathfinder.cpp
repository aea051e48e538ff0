// Pathfinder reader: metadata listing, libpng decoding, seeded 80/10/10 split (data/pathfinder.h).
#include "lsformer/data/pathfinder.h"

#include <png.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "lsformer/data/file_util.h"
#include "lsformer/data/random_stream.h"
#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {

constexpr uint64_t kPathfinderStream = 0x5061746846696e64ull;  // "PathFind": the split's stream

struct Sample {
  std::string image;  // path of the PNG
  int32_t label = 0;
};

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Metadata files in a stable order: numeric stems by value (2 < 10), others by name.
bool metadata_before(const std::filesystem::path& a, const std::filesystem::path& b) {
  const std::string sa = a.stem().string(), sb = b.stem().string();
  if (all_digits(sa) && all_digits(sb) && sa.size() != sb.size()) return sa.size() < sb.size();
  return sa != sb ? sa < sb : a.filename() < b.filename();
}

// Every listed sample whose PNG is not empty, in metadata order.
std::vector<Sample> list_samples(const std::filesystem::path& root) {
  const std::filesystem::path metadata = root / "metadata";
  std::error_code ec;
  LSF_CHECK(std::filesystem::is_directory(metadata, ec))
      << "read_pathfinder: directory '" << metadata.string()
      << "' does not exist (expected <root>/metadata/*.npy and <root>/imgs/)";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(metadata))
    if (entry.is_regular_file() && entry.path().extension() == ".npy") files.push_back(entry.path());
  LSF_CHECK(!files.empty()) << "read_pathfinder: no metadata files (*.npy) in '"
                            << metadata.string() << "'";
  std::sort(files.begin(), files.end(), metadata_before);

  std::vector<Sample> samples;
  for (const auto& file : files) {
    std::ifstream in = open_input(file.string(), "read_pathfinder");
    std::string line;
    int64_t line_no = 0;
    while (read_line(in, line)) {
      ++line_no;
      std::istringstream fields_in(line);
      std::vector<std::string> fields;
      for (std::string f; fields_in >> f;) fields.push_back(f);
      if (fields.empty()) continue;  // blank line (e.g. a trailing one)
      const std::string where = "read_pathfinder: " + file_line(file.string(), line_no);
      LSF_CHECK(fields.size() >= 4)
          << where << ": expected at least 4 space-separated fields (imgs/<batch> sample_<i>.png "
          << "<x> <label>), got " << fields.size();
      LSF_CHECK(fields[3] == "0" || fields[3] == "1")
          << where << ": bad label '" << fields[3] << "' (expected 0 or 1)";
      const std::filesystem::path image = root / fields[0] / fields[1];
      const auto size = std::filesystem::file_size(image, ec);
      LSF_CHECK(!ec) << where << ": image '" << image.string() << "' cannot be read: " << ec.message();
      if (size == 0) continue;  // empty PNGs in the release: skipped, as in LRA
      samples.push_back(Sample{image.string(), fields[3] == "1" ? 1 : 0});
    }
  }
  return samples;
}

}  // namespace

std::vector<uint8_t> read_gray_png(const std::string& path, int64_t* height, int64_t* width) {
  std::error_code ec;
  LSF_CHECK(std::filesystem::is_regular_file(path, ec))
      << "read_gray_png: file '" << path << "' does not exist";
  // libpng's simplified API reports errors through image.message instead of longjmp.
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str())) {
    const std::string message = image.message;
    png_image_free(&image);
    LSF_FAIL() << "read_gray_png: '" << path << "' is not a readable PNG: " << message;
  }
  const png_uint_32 format = image.format;
  if (format & (PNG_FORMAT_FLAG_COLOR | PNG_FORMAT_FLAG_ALPHA | PNG_FORMAT_FLAG_LINEAR)) {
    png_image_free(&image);
    LSF_FAIL() << "read_gray_png: '" << path << "' is a "
               << ((format & PNG_FORMAT_FLAG_LINEAR) ? "16-bit " : "")
               << ((format & PNG_FORMAT_FLAG_COLOR) ? "colour " : "gray ")
               << ((format & PNG_FORMAT_FLAG_ALPHA) ? "with alpha " : "")
               << "PNG; Pathfinder expects 8-bit grayscale without alpha";
  }
  image.format = PNG_FORMAT_GRAY;  // expands 1/2/4-bit gray and gray palettes to 8 bits
  std::vector<uint8_t> pixels(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, /*background=*/nullptr, pixels.data(), /*row_stride=*/0,
                             /*colormap=*/nullptr)) {
    const std::string message = image.message;
    png_image_free(&image);
    LSF_FAIL() << "read_gray_png: '" << path << "' is corrupt: " << message;
  }
  *height = image.height;
  *width = image.width;
  return pixels;
}

void write_gray_png(const std::string& path, const std::vector<uint8_t>& pixels, int64_t height, int64_t width) {
  LSF_CHECK(height > 0 && width > 0 && int64_t(pixels.size()) == height * width)
      << "write_gray_png: '" << path << "': " << pixels.size() << " pixels for " << height << "×" << width;
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = png_uint_32(width);
  image.height = png_uint_32(height);
  image.format = PNG_FORMAT_GRAY;
  const std::string tmp = path + ".tmp";
  if (!png_image_write_to_file(&image, tmp.c_str(), /*convert_to_8bit=*/0, pixels.data(), /*row_stride=*/0,
                               /*colormap=*/nullptr)) {
    const std::string message = image.message;
    png_image_free(&image);
    LSF_FAIL() << "write_gray_png: cannot write '" << path << "': " << message;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  LSF_CHECK(!ec) << "write_gray_png: cannot rename '" << tmp << "' to '" << path << "': " << ec.message();
}

Dataset read_pathfinder(const std::string& root, const std::string& split, uint64_t seed) {
  LSF_CHECK(split == "train" || split == "val" || split == "test")
      << "read_pathfinder: split must be \"train\", \"val\" or \"test\", got \"" << split << "\"";
  std::vector<Sample> samples = list_samples(std::filesystem::path(root));
  const int64_t n = int64_t(samples.size());
  LSF_CHECK(n > 0) << "read_pathfinder: no non-empty images listed under '" << root << "'";
  PhiloxStream rng(seed, kPathfinderStream);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(samples[size_t(i)], samples[size_t(rng.below(uint32_t(i + 1)))]);
  const int64_t n_train = n * 8 / 10, n_val = n / 10;
  const int64_t begin = split == "train" ? 0 : split == "val" ? n_train : n_train + n_val;
  const int64_t end = split == "train" ? n_train : split == "val" ? n_train + n_val : n;

  Dataset dataset;
  dataset.name = "pathfinder";
  dataset.vocab_size = 256;
  dataset.num_classes = 2;
  int64_t height0 = -1, width0 = -1;
  std::string first;
  for (int64_t i = begin; i < end; ++i) {
    int64_t height = 0, width = 0;
    const std::vector<uint8_t> pixels = read_gray_png(samples[size_t(i)].image, &height, &width);
    if (height0 < 0) {
      height0 = height;
      width0 = width;
      first = samples[size_t(i)].image;
    }
    LSF_CHECK(height == height0 && width == width0)
        << "read_pathfinder: '" << samples[size_t(i)].image << "' is " << height << "×" << width
        << " but '" << first << "' is " << height0 << "×" << width0
        << "; all images must have one size";
    Example example;
    example.tokens.assign(pixels.begin(), pixels.end());
    example.label = samples[size_t(i)].label;
    dataset.examples.push_back(std::move(example));
  }
  return dataset;
}

}  // namespace lsf::data
