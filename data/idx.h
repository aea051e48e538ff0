// IDX files (MNIST, Fashion-MNIST), plain or gzip-compressed, and the Debian copy of Fashion-MNIST.
// Format: data-formats.md §1.6 and §1.7.
//
// Header: magic 00 00 <type> <ndims>, then ndims big-endian uint32 sizes, then the row-major
// data. Only type 0x08 (uint8) is read here — what every MNIST-family file uses. Files are read
// through zlib's gzread, which decompresses .gz files and passes plain files through, so
// `train-images-idx3-ubyte` and `train-images-idx3-ubyte.gz` both work. Errors name the file:
// missing, bad gzip stream, wrong magic (first two bytes not 0, type not uint8, wrong number of
// dimensions), truncated data, trailing bytes, image/label counts that differ, labels ≥ classes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lsformer/data/image_dataset.h"

namespace lsf::data {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28}
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

// Reads a uint8 IDX file with `ndims` dimensions (3 for images, 1 for labels).
IdxArray read_idx_u8(const std::string& path, int64_t ndims);

// MNIST-layout images + labels → 1-channel images; labels must be < class_names.size().
std::shared_ptr<InMemoryImageDataset> read_mnist_idx(const std::string& images_path, const std::string& labels_path,
                                                     std::string name, std::vector<std::string> class_names);

// The four files under `dir`, by their standard names (with or without .gz):
// split "train" → train-{images-idx3,labels-idx1}-ubyte, "test" → t10k-….
std::shared_ptr<InMemoryImageDataset> read_mnist(const std::string& dir, const std::string& split);
std::shared_ptr<InMemoryImageDataset> read_fashion_mnist(const std::string& dir, const std::string& split);

// Where Debian's dataset-fashion-mnist package puts its files.
constexpr const char* kDebianFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// kDebianFashionMnistDir when its four files are there; else an lsf::Error telling the user to
// run scripts/install-deps.sh (which installs the package).
std::string find_fashion_mnist();
// Whether find_fashion_mnist() would succeed.
bool fashion_mnist_installed();

// Fashion-MNIST's ten class names (label 0 = "T-shirt/top" … 9 = "Ankle boot").
const std::vector<std::string>& fashion_mnist_classes();

}  // namespace lsf::data
