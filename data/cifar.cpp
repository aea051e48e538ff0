// CIFAR-10 / CIFAR-100 binary readers into RGB images (data/cifar.h).
#include "lsformer/data/cifar.h"

#include <filesystem>

#include "lsformer/data/file_util.h"
#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {

constexpr int64_t kSide = 32, kPlane = kSide * kSide;

// Names from `file` beside `first_batch`, one per non-empty line, when it exists and has
// exactly `count` of them; else `fallback`.
std::vector<std::string> label_names(const std::string& first_batch, const char* file, int64_t count,
                                     std::vector<std::string> fallback) {
  const std::filesystem::path path = std::filesystem::path(first_batch).parent_path() / file;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return fallback;
  std::ifstream in = open_input(path.string(), "read_cifar");
  std::vector<std::string> names;
  for (std::string line; read_line(in, line);)
    if (!line.empty()) names.push_back(line);
  LSF_CHECK(int64_t(names.size()) == count)
      << "read_cifar: '" << path.string() << "' lists " << names.size() << " class names, expected " << count;
  return names;
}

std::vector<std::string> numbered(int64_t count) {
  std::vector<std::string> names;
  for (int64_t i = 0; i < count; ++i) names.push_back(std::to_string(i));
  return names;
}

// Reads records of `label_bytes` label bytes + 3072 pixels; label byte `which` is the label,
// checked against `classes`.
std::shared_ptr<InMemoryImageDataset> read_records(const std::vector<std::string>& files, const char* who,
                                                   int64_t label_bytes, int64_t which, int64_t classes,
                                                   std::string name, std::vector<std::string> class_names) {
  LSF_CHECK(!files.empty()) << who << ": no batch files given";
  const int64_t record_bytes = label_bytes + 3 * kPlane;
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  std::vector<InMemoryImageDataset::SourceRange> sources;
  for (const std::string& path : files) {
    const std::string bytes = read_file_bytes(path, who);
    LSF_CHECK(!bytes.empty() && int64_t(bytes.size()) % record_bytes == 0)
        << who << ": '" << path << "' has " << bytes.size() << " bytes, not a positive multiple of the "
        << record_bytes << "-byte record (" << label_bytes << " label byte" << (label_bytes > 1 ? "s" : "")
        << " + 3072 pixels)";
    const int64_t records = int64_t(bytes.size()) / record_bytes;
    sources.push_back({int64_t(labels.size()), path});
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    const size_t base = pixels.size();
    pixels.resize(base + size_t(records * 3 * kPlane));
    for (int64_t r = 0; r < records; ++r) {
      const uint8_t* record = data + r * record_bytes;
      LSF_CHECK(record[which] < classes)
          << who << ": '" << path << "' record " << r << " (byte offset " << r * record_bytes
          << "): label " << int(record[which]) << " is outside 0.." << classes - 1;
      labels.push_back(record[which]);
      const uint8_t* planes = record + label_bytes;
      uint8_t* out = pixels.data() + base + size_t(r * 3 * kPlane);
      for (int64_t p = 0; p < kPlane; ++p)
        for (int64_t c = 0; c < 3; ++c) out[p * 3 + c] = planes[c * kPlane + p];  // CHW → HWC
    }
  }
  return std::make_shared<InMemoryImageDataset>(std::move(name), kSide, kSide, 3, std::move(pixels),
                                                std::move(labels), std::move(class_names), std::move(sources));
}

}  // namespace

std::shared_ptr<InMemoryImageDataset> read_cifar10(const std::vector<std::string>& batch_files) {
  LSF_CHECK(!batch_files.empty()) << "read_cifar10: no batch files given";
  auto names = label_names(batch_files[0], "batches.meta.txt", 10,
                           {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                            "ship", "truck"});
  return read_records(batch_files, "read_cifar10", 1, 0, 10, "cifar10", std::move(names));
}

std::shared_ptr<InMemoryImageDataset> read_cifar100(const std::vector<std::string>& files, Cifar100Labels labels) {
  LSF_CHECK(!files.empty()) << "read_cifar100: no batch files given";
  const bool fine = labels == Cifar100Labels::Fine;
  const int64_t classes = fine ? 100 : 20;
  auto names = label_names(files[0], fine ? "fine_label_names.txt" : "coarse_label_names.txt", classes,
                           numbered(classes));
  return read_records(files, "read_cifar100", 2, fine ? 1 : 0, classes,
                      fine ? "cifar100" : "cifar100-coarse", std::move(names));
}

}  // namespace lsf::data
