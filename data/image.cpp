// CIFAR-10 binary batches → grayscale pixel sequences (data/image.h has the derivation of the
// grayscale rounding).
#include "lsformer/data/image.h"

#include "lsformer/data/file_util.h"
#include "lsformer/data/idx.h"
#include "lsformer/engine/error.h"

namespace lsf::data {

uint8_t cifar_gray(uint8_t r, uint8_t g, uint8_t b) {
  // Each step rounds to float32 as TF's float32 tensors do. No fused multiply-add: the build is
  // ISO C++ (-std=c++20), where GCC does not contract a·b + c (-ffp-contract=off).
  const float scale_in = float(1.0 / 255.0);  // Python's 1./255 as a float32 constant
  const float xr = float(r) * scale_in, xg = float(g) * scale_in, xb = float(b) * scale_in;
  const float gray = xr * 0.2989f + xg * 0.5870f + xb * 0.1140f;
  const float scaled = gray * 255.5f;  // dtype.max + 0.5
  return uint8_t(int(scaled));         // cast truncates toward zero; scaled ∈ [0, 255.48]
}

Dataset read_cifar10_gray(const std::vector<std::string>& batch_files) {
  LSF_CHECK(!batch_files.empty()) << "read_cifar10_gray: no batch files given";
  Dataset dataset;
  dataset.name = "image";
  dataset.vocab_size = 256;
  dataset.num_classes = 10;
  constexpr int64_t kPixels = 1024;
  for (const std::string& path : batch_files) {
    const std::string bytes = read_file_bytes(path, "read_cifar10_gray");
    LSF_CHECK(!bytes.empty() && int64_t(bytes.size()) % kCifarRecordBytes == 0)
        << "read_cifar10_gray: '" << path << "' has " << bytes.size()
        << " bytes, not a positive multiple of the 3073-byte CIFAR-10 record (1 label + 3072 pixels)";
    const int64_t records = int64_t(bytes.size()) / kCifarRecordBytes;
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    for (int64_t i = 0; i < records; ++i) {
      const uint8_t* record = data + i * kCifarRecordBytes;
      LSF_CHECK(record[0] < 10) << "read_cifar10_gray: '" << path << "' record " << i
                                << " (byte offset " << i * kCifarRecordBytes << "): label "
                                << int(record[0]) << " is outside 0..9";
      const uint8_t* red = record + 1;
      const uint8_t* green = red + kPixels;
      const uint8_t* blue = green + kPixels;
      Example example;
      example.tokens.resize(size_t(kPixels));
      for (int64_t p = 0; p < kPixels; ++p) example.tokens[size_t(p)] = cifar_gray(red[p], green[p], blue[p]);
      example.label = record[0];
      dataset.examples.push_back(std::move(example));
    }
  }
  return dataset;
}

Dataset read_fashion_mnist_lra(const std::string& dir, const std::string& split) {
  const std::shared_ptr<InMemoryImageDataset> images = read_fashion_mnist(dir, split);
  constexpr int64_t kSide = 32;
  const int64_t h = images->height(), w = images->width();
  LSF_CHECK(h <= kSide && w <= kSide) << "read_fashion_mnist_lra: '" << dir << "' holds " << h << "×" << w
                                      << " images, larger than the 32×32 of LRA Image";
  const int64_t top = (kSide - h) / 2, left = (kSide - w) / 2;
  Dataset dataset;
  dataset.name = "lra_image";
  dataset.vocab_size = 256;
  dataset.num_classes = 10;
  dataset.examples.resize(size_t(images->size()));
  for (int64_t i = 0; i < images->size(); ++i) {
    Example& e = dataset.examples[size_t(i)];
    e.tokens.assign(size_t(kSide * kSide), 0);
    const uint8_t* pixels = images->pixels(i);
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) e.tokens[size_t((top + y) * kSide + left + x)] = pixels[y * w + x];
    e.label = images->label(i);
  }
  return dataset;
}

}  // namespace lsf::data
