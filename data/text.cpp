// Byte-level text readers: `label<TAB>text` TSV and the aclImdb folder layout (data/text.h).
#include "lsformer/data/text.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "lsformer/data/file_util.h"
#include "lsformer/engine/error.h"

namespace lsf::data {

std::vector<int32_t> encode_bytes(std::string_view text, int64_t max_length) {
  const size_t n = std::min(text.size(), size_t(std::max<int64_t>(max_length, 0)));
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = int32_t(static_cast<unsigned char>(text[i])) + 1;
  return ids;
}

namespace {

Dataset empty_text_dataset() {
  Dataset dataset;
  dataset.name = "text";
  dataset.vocab_size = kByteVocabSize;
  dataset.num_classes = 2;
  return dataset;
}

void check_max_length(const char* who, int64_t max_length) {
  LSF_CHECK(max_length >= 1) << who << ": max_length must be ≥ 1, got " << max_length;
}

}  // namespace

Dataset read_text_tsv(const std::string& path, int64_t max_length) {
  check_max_length("read_text_tsv", max_length);
  std::ifstream in = open_input(path, "read_text_tsv");
  Dataset dataset = empty_text_dataset();
  std::string line;
  int64_t line_no = 0;
  int64_t largest_label = 0;
  while (read_line(in, line)) {
    ++line_no;
    const size_t tab = line.find('\t');
    LSF_CHECK(tab != std::string::npos)
        << "read_text_tsv: " << file_line(path, line_no)
        << ": expected `label<TAB>text`, found no tab";
    const std::string_view label_text(line.data(), tab);
    int64_t label = -1;
    const auto [end, ec] =
        std::from_chars(label_text.data(), label_text.data() + label_text.size(), label);
    LSF_CHECK(ec == std::errc() && end == label_text.data() + label_text.size() && label >= 0 &&
              label < (int64_t(1) << 31))
        << "read_text_tsv: " << file_line(path, line_no) << ": bad label '" << label_text
        << "' (expected a non-negative integer)";
    const std::string_view text(line.data() + tab + 1, line.size() - tab - 1);
    LSF_CHECK(!text.empty()) << "read_text_tsv: " << file_line(path, line_no) << ": empty text";
    Example example;
    example.tokens = encode_bytes(text, max_length);
    example.label = int32_t(label);
    largest_label = std::max(largest_label, label);
    dataset.examples.push_back(std::move(example));
  }
  dataset.num_classes = std::max<int64_t>(2, largest_label + 1);
  return dataset;
}

Dataset read_imdb_folder(const std::string& root, const std::string& split, int64_t max_length) {
  check_max_length("read_imdb_folder", max_length);
  LSF_CHECK(split == "train" || split == "test" || split == "val" || split == "dev")
      << "read_imdb_folder: split must be \"train\" or \"test\" (\"val\"/\"dev\" read \"test\"), got \""
      << split << "\"";
  const std::string folder = split == "train" ? "train" : "test";
  Dataset dataset = empty_text_dataset();
  for (const auto& [name, label] : {std::pair{"neg", 0}, std::pair{"pos", 1}}) {
    const std::filesystem::path dir = std::filesystem::path(root) / folder / name;
    std::error_code ec;
    LSF_CHECK(std::filesystem::is_directory(dir, ec))
        << "read_imdb_folder: directory '" << dir.string()
        << "' does not exist (expected the aclImdb layout <root>/{train,test}/{neg,pos}/*.txt)";
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.is_regular_file() && entry.path().extension() == ".txt") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      const std::string bytes = read_file_bytes(file.string(), "read_imdb_folder");
      LSF_CHECK(!bytes.empty()) << "read_imdb_folder: '" << file.string() << "' is empty";
      Example example;
      example.tokens = encode_bytes(bytes, max_length);
      example.label = label;
      dataset.examples.push_back(std::move(example));
    }
  }
  LSF_CHECK(!dataset.examples.empty())
      << "read_imdb_folder: no .txt files under '" << root << "/" << folder << "/{neg,pos}'";
  return dataset;
}

}  // namespace lsf::data
