// Char-LM corpora: enwik8 / text8 readers, fractional splits, split directories (data/char_corpus.h).
#include "lsformer/data/char_corpus.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "lsformer/data/compressed_file.h"
#include "lsformer/data/debian_corpus.h"
#include "lsformer/data/file_util.h"
#include "lsformer/engine/error.h"
#include "lsformer/engine/safetensors.h"

namespace lsf::data {
namespace {

constexpr int64_t kMinSplitTokens = 2;  // one input and its next-token target

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The bytes of a corpus file given as the file itself or as the zip that holds `entry`; `source`
// is set to how errors should name it ("path" or "path:entry").
std::string read_file_or_zip(const std::string& path, const std::string& entry, const char* who,
                             std::string* source) {
  if (ends_with(path, ".zip")) {
    *source = path + ":" + entry;
    return read_zip_entry(path, entry, who);
  }
  *source = path;
  return read_file_bytes(path, who);
}

void check_total(const std::string& bytes, const SplitSizes& sizes, const std::string& source,
                 const char* who, const char* what) {
  LSF_CHECK(sizes.train >= kMinSplitTokens && sizes.dev >= kMinSplitTokens && sizes.test >= kMinSplitTokens)
      << who << ": split sizes " << sizes.train << " / " << sizes.dev << " / " << sizes.test
      << " must each be ≥ " << kMinSplitTokens;
  LSF_CHECK(int64_t(bytes.size()) == sizes.total())
      << who << ": '" << source << "' holds " << bytes.size() << " bytes, expected exactly " << sizes.total()
      << " (" << sizes.train << " train + " << sizes.dev << " dev + " << sizes.test << " test) for " << what
      << (int64_t(bytes.size()) < sizes.total() ? ": the file is too short (truncated download?)" : "");
}

// Maps bytes [begin, begin + count) of `text` to ids, naming the first byte outside the alphabet.
std::vector<uint8_t> encode_range(std::string_view text, int64_t begin, int64_t count, const CharVocab& vocab,
                                  const std::string& source) {
  std::vector<uint8_t> ids(static_cast<size_t>(count));
  if (vocab.alphabet == CharAlphabet::kBytes) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(text.data()) + begin;
    std::copy(bytes, bytes + count, ids.begin());
    return ids;
  }
  for (int64_t i = 0; i < count; ++i) {
    const auto byte = static_cast<uint8_t>(text[size_t(begin + i)]);
    const int32_t id = vocab.id_of(byte);
    LSF_CHECK(id >= 0) << "'" << source << "': byte " << int(byte) << " at offset " << begin + i
                       << " is not in the " << vocab.name() << " alphabet (a-z and space)";
    ids[size_t(i)] = uint8_t(id);
  }
  return ids;
}

std::vector<uint8_t>& split_slot(CharCorpus& corpus, LmSplit split) {
  return split == LmSplit::kTrain ? corpus.train : split == LmSplit::kDev ? corpus.dev : corpus.test;
}

}  // namespace

int32_t CharVocab::id_of(uint8_t byte) const {
  if (alphabet == CharAlphabet::kBytes) return byte;
  if (byte >= 'a' && byte <= 'z') return byte - 'a';
  return byte == ' ' ? 26 : -1;
}

uint8_t CharVocab::byte_of(int32_t id) const {
  LSF_CHECK(id >= 0 && id < size()) << "CharVocab: id " << id << " is outside the " << name() << " vocabulary [0, "
                                    << size() << ")";
  if (alphabet == CharAlphabet::kBytes) return uint8_t(id);
  return id == 26 ? uint8_t(' ') : uint8_t('a' + id);
}

const char* lm_split_name(LmSplit split) {
  switch (split) {
    case LmSplit::kTrain: return "train";
    case LmSplit::kDev: return "dev";
    case LmSplit::kTest: return "test";
  }
  return "?";
}

LmSplit parse_lm_split(const std::string& name) {
  if (name == "train") return LmSplit::kTrain;
  if (name == "dev" || name == "valid" || name == "val") return LmSplit::kDev;
  if (name == "test") return LmSplit::kTest;
  LSF_FAIL() << "unknown split '" << name << "' (expected train, dev (or valid/val) or test)";
}

const std::vector<uint8_t>& CharCorpus::split(LmSplit which) const {
  switch (which) {
    case LmSplit::kTrain: return train;
    case LmSplit::kDev: return dev;
    case LmSplit::kTest: return test;
  }
  LSF_FAIL() << "CharCorpus::split: bad split value " << int(which);
}

SplitSizes fractional_split_sizes(int64_t total, const std::string& source) {
  SplitSizes sizes;
  sizes.dev = sizes.test = total / 20;
  sizes.train = total - sizes.dev - sizes.test;
  LSF_CHECK(sizes.dev >= kMinSplitTokens)
      << "'" << source << "' holds " << total << " bytes; the 90/5/5 split needs at least "
      << 20 * kMinSplitTokens << " so that dev and test hold " << kMinSplitTokens << " tokens each";
  return sizes;
}

CharCorpus split_corpus(std::string name, std::string_view text, const SplitSizes& sizes, CharAlphabet alphabet,
                        const std::string& source) {
  LSF_CHECK(int64_t(text.size()) == sizes.total())
      << "split_corpus: '" << source << "' holds " << text.size() << " bytes but the split sizes add up to "
      << sizes.total();
  CharCorpus corpus;
  corpus.name = std::move(name);
  corpus.vocab.alphabet = alphabet;
  corpus.train = encode_range(text, 0, sizes.train, corpus.vocab, source);
  corpus.dev = encode_range(text, sizes.train, sizes.dev, corpus.vocab, source);
  corpus.test = encode_range(text, sizes.train + sizes.dev, sizes.test, corpus.vocab, source);
  return corpus;
}

CharCorpus read_enwik8(const std::string& path, const SplitSizes& sizes) {
  std::string source;
  const std::string bytes = read_file_or_zip(path, "enwik8", "read_enwik8", &source);
  check_total(bytes, sizes, source, "read_enwik8", "enwik8");
  return split_corpus("enwik8", bytes, sizes, CharAlphabet::kBytes, source);
}

CharCorpus read_text8(const std::string& path, const SplitSizes& sizes) {
  std::string source;
  const std::string bytes = read_file_or_zip(path, "text8", "read_text8", &source);
  check_total(bytes, sizes, source, "read_text8", "text8");
  try {
    return split_corpus("text8", bytes, sizes, CharAlphabet::kText8, source);
  } catch (const Error& e) {
    throw Error(std::string("read_text8: ") + e.what());
  }
}

namespace {

// The container of a text source: by its extension (any case), else by its first bytes, so
// that a gzip or zip file not named so (C.GZ, a download without its suffix) is not split as text.
enum class TextContainer { kPlain, kZip, kGzip };
TextContainer text_container(const std::string& path, const char* who) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (ext == ".zip") return TextContainer::kZip;
  if (ext == ".gz" || ext == ".dz") return TextContainer::kGzip;
  std::ifstream in = open_input(path, who);
  char magic[4] = {};
  in.read(magic, 4);
  const std::string head(magic, size_t(in.gcount()));
  if (head.rfind("\x1f\x8b", 0) == 0) return TextContainer::kGzip;
  if (head == std::string("PK\x03\x04", 4)) return TextContainer::kZip;
  return TextContainer::kPlain;
}

}  // namespace

std::string read_text_source(const std::string& path, const char* who) {
  const TextContainer container = text_container(path, who);
  if (container == TextContainer::kZip) {
    const std::vector<std::string> names = zip_entry_names(path, who);
    if (names.size() != 1) {
      std::string listed;
      for (const std::string& name : names) listed += (listed.empty() ? "'" : ", '") + name + "'";
      LSF_FAIL() << who << ": zip archive '" << path << "' holds " << names.size()
                 << " entries; expected exactly one text file" << (listed.empty() ? "" : " (it holds " + listed + ")");
    }
    return read_zip_entry(path, names[0], who);
  }
  if (container == TextContainer::kGzip) return read_gzip_file(path, who);
  return read_file_bytes(path, who);
}

void write_corpus_splits(const std::string& dir, const CharCorpus& corpus) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  LSF_CHECK(!ec) << "write_corpus_splits: cannot create directory '" << dir << "': " << ec.message();
  for (LmSplit split : {LmSplit::kTrain, LmSplit::kDev, LmSplit::kTest}) {
    const std::vector<uint8_t>& ids = corpus.split(split);
    std::string bytes(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) bytes[i] = char(corpus.vocab.byte_of(ids[i]));
    write_file_atomically((std::filesystem::path(dir) / (std::string(lm_split_name(split)) + ".txt")).string(),
                          bytes);
  }
}

CharCorpus read_corpus_splits(const std::string& dir, CharAlphabet alphabet) {
  std::error_code ec;
  LSF_CHECK(std::filesystem::is_directory(dir, ec))
      << "read_corpus_splits: '" << dir << "' is not a directory (expected train.txt, dev.txt and test.txt, as "
      << "`lsf data text --out DIR` writes them)";
  CharCorpus corpus;
  corpus.name = std::filesystem::path(dir).lexically_normal().filename().string();
  if (corpus.name.empty()) corpus.name = std::filesystem::path(dir).lexically_normal().parent_path().filename().string();
  corpus.vocab.alphabet = alphabet;
  for (LmSplit split : {LmSplit::kTrain, LmSplit::kDev, LmSplit::kTest}) {
    const std::string path = (std::filesystem::path(dir) / (std::string(lm_split_name(split)) + ".txt")).string();
    const std::string bytes = read_file_bytes(path, "read_corpus_splits");
    LSF_CHECK(int64_t(bytes.size()) >= kMinSplitTokens)
        << "read_corpus_splits: '" << path << "' holds " << bytes.size() << " bytes; a split needs at least "
        << kMinSplitTokens;
    std::vector<uint8_t> ids;
    try {
      ids = encode_range(bytes, 0, int64_t(bytes.size()), corpus.vocab, path);
    } catch (const Error& e) {
      throw Error(std::string("read_corpus_splits: ") + e.what());
    }
    split_slot(corpus, split) = std::move(ids);
  }
  return corpus;
}

CharCorpus load_char_corpus(const std::string& format, const std::string& path) {
  if (format == "gcide") return path.empty() ? default_offline_corpus() : read_gcide_corpus(path);
  LSF_CHECK(!path.empty()) << "load_char_corpus: format '" << format << "' needs a path";
  if (format == "enwik8") return read_enwik8(path);
  if (format == "text8") return read_text8(path);
  if (format == "splits") return read_corpus_splits(path);
  if (format == "text") {
    const std::string bytes = read_text_source(path, "load_char_corpus");
    return split_corpus(std::filesystem::path(path).filename().string(), bytes,
                        fractional_split_sizes(int64_t(bytes.size()), path), CharAlphabet::kBytes, path);
  }
  LSF_FAIL() << "load_char_corpus: unknown format '" << format
             << "' (expected enwik8, text8, splits, text or gcide)";
}

}  // namespace lsf::data
