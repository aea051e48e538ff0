// IDX readers through zlib (data/idx.h).
#include "lsformer/data/idx.h"

#include <zlib.h>

#include <filesystem>
#include <system_error>

#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {

namespace fs = std::filesystem;

// A gzFile that closes itself.
struct GzFile {
  gzFile file = nullptr;
  ~GzFile() {
    if (file != nullptr) gzclose(file);
  }
};

// Reads up to n bytes; returns how many arrived. Throws on a zlib error (corrupt stream).
int64_t gz_read(GzFile& in, uint8_t* out, int64_t n, const std::string& path) {
  int64_t got = 0;
  while (got < n) {
    const unsigned chunk = unsigned(std::min<int64_t>(n - got, int64_t(1) << 30));
    const int r = gzread(in.file, out + got, chunk);
    if (r < 0) {
      int code = 0;
      const char* message = gzerror(in.file, &code);
      LSF_FAIL() << "read_idx: '" << path << "' cannot be decompressed: " << message;
    }
    if (r == 0) break;
    got += r;
  }
  if (got < n) {  // a gzip stream cut short reports its error only at the end
    int code = 0;
    const char* message = gzerror(in.file, &code);
    LSF_CHECK(code == Z_OK || code == Z_STREAM_END)
        << "read_idx: '" << path << "' cannot be decompressed: " << message;
  }
  return got;
}

std::string pick(const std::string& dir, const std::string& base) {
  std::error_code ec;
  const fs::path plain = fs::path(dir) / base;
  if (fs::is_regular_file(plain, ec)) return plain.string();
  const fs::path gz = fs::path(dir) / (base + ".gz");
  if (fs::is_regular_file(gz, ec)) return gz.string();
  LSF_FAIL() << "read_mnist: neither '" << plain.string() << "' nor '" << gz.string() << "' exists";
}

}  // namespace

IdxArray read_idx_u8(const std::string& path, int64_t ndims) {
  std::error_code ec;
  LSF_CHECK(fs::is_regular_file(path, ec)) << "read_idx: file '" << path << "' does not exist";
  GzFile in;
  in.file = gzopen(path.c_str(), "rb");
  LSF_CHECK(in.file != nullptr) << "read_idx: cannot open '" << path << "'";
  uint8_t magic[4];
  LSF_CHECK(gz_read(in, magic, 4, path) == 4) << "read_idx: '" << path << "' is shorter than the 4-byte IDX magic";
  LSF_CHECK(magic[0] == 0 && magic[1] == 0 && magic[2] == 0x08 && magic[3] == ndims)
      << "read_idx: '" << path << "' has magic " << std::hex << (uint32_t(magic[0]) << 24 | uint32_t(magic[1]) << 16 |
                                                              uint32_t(magic[2]) << 8 | magic[3])
      << std::dec << ", expected 0x0000080" << ndims << " (uint8 data, " << ndims << " dimension"
      << (ndims > 1 ? "s" : "") << ")";
  IdxArray out;
  int64_t total = 1;
  for (int64_t d = 0; d < ndims; ++d) {
    uint8_t b[4];
    LSF_CHECK(gz_read(in, b, 4, path) == 4) << "read_idx: '" << path << "' is truncated inside its header";
    const int64_t size = int64_t(uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3]);
    out.dims.push_back(size);
    // Checked before multiplying: four 32-bit sizes overflow int64 (found by fuzzing).
    LSF_CHECK(size == 0 || total <= (int64_t(1) << 40) / size)
        << "read_idx: '" << path << "' declares an absurd size (dimension " << d << " is " << size << ")";
    total *= size;
  }
  // Grown as the data arrives (16 MiB at a time): a header declaring more than the file holds
  // (found by fuzzing: 3.7 GB declared by a 12-byte file) is a truncation error, not an allocation.
  int64_t got = 0;
  while (got < total) {
    const int64_t chunk = std::min<int64_t>(total - got, int64_t(1) << 24);
    out.data.resize(size_t(got + chunk));
    const int64_t n = gz_read(in, out.data.data() + got, chunk, path);
    got += n;
    if (n < chunk) break;
  }
  LSF_CHECK(got == total) << "read_idx: '" << path << "' is truncated: its header declares " << total
                          << " data bytes but only " << got << " follow";
  uint8_t extra;
  LSF_CHECK(gz_read(in, &extra, 1, path) == 0)
      << "read_idx: '" << path << "' has bytes after the " << total << " data bytes its header declares";
  return out;
}

std::shared_ptr<InMemoryImageDataset> read_mnist_idx(const std::string& images_path, const std::string& labels_path,
                                                     std::string name, std::vector<std::string> class_names) {
  IdxArray images = read_idx_u8(images_path, 3);
  IdxArray labels = read_idx_u8(labels_path, 1);
  LSF_CHECK(images.dims[0] == labels.dims[0])
      << "read_mnist: '" << images_path << "' holds " << images.dims[0] << " images but '" << labels_path
      << "' holds " << labels.dims[0] << " labels";
  LSF_CHECK(images.dims[1] > 0 && images.dims[2] > 0)
      << "read_mnist: '" << images_path << "' has empty images (" << images.dims[1] << "×" << images.dims[2] << ")";
  std::vector<int32_t> label_values(labels.data.begin(), labels.data.end());
  for (size_t i = 0; i < label_values.size(); ++i)
    LSF_CHECK(label_values[i] < int64_t(class_names.size()))
        << "read_mnist: '" << labels_path << "' label " << i << " is " << label_values[i] << ", outside 0.."
        << class_names.size() - 1;
  return std::make_shared<InMemoryImageDataset>(
      std::move(name), images.dims[1], images.dims[2], 1, std::move(images.data), std::move(label_values),
      std::move(class_names), std::vector<InMemoryImageDataset::SourceRange>{{0, images_path}});
}

namespace {
std::shared_ptr<InMemoryImageDataset> read_mnist_named(const std::string& dir, const std::string& split,
                                                       std::string name, std::vector<std::string> classes) {
  LSF_CHECK(split == "train" || split == "test")
      << "read_mnist: split must be \"train\" or \"test\", got \"" << split << "\"";
  const std::string prefix = split == "train" ? "train" : "t10k";
  const std::string images = pick(dir, prefix + "-images-idx3-ubyte");  // images first: errors in order
  const std::string labels = pick(dir, prefix + "-labels-idx1-ubyte");
  return read_mnist_idx(images, labels, std::move(name), std::move(classes));
}
}  // namespace

std::shared_ptr<InMemoryImageDataset> read_mnist(const std::string& dir, const std::string& split) {
  return read_mnist_named(dir, split, "mnist-" + split, {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"});
}

std::shared_ptr<InMemoryImageDataset> read_fashion_mnist(const std::string& dir, const std::string& split) {
  return read_mnist_named(dir, split, "fashion-mnist-" + split, fashion_mnist_classes());
}

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

bool fashion_mnist_installed() {
  std::error_code ec;
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                        "t10k-labels-idx1-ubyte.gz"})
    if (!fs::is_regular_file(fs::path(kDebianFashionMnistDir) / f, ec)) return false;
  return true;
}

std::string find_fashion_mnist() {
  LSF_CHECK(fashion_mnist_installed())
      << "find_fashion_mnist: Fashion-MNIST is not installed: '" << kDebianFashionMnistDir
      << "' lacks its four *-idx*-ubyte.gz files. It comes from Debian's dataset-fashion-mnist "
      << "package: run scripts/install-deps.sh (or apt-get install dataset-fashion-mnist)";
  return kDebianFashionMnistDir;
}

}  // namespace lsf::data
