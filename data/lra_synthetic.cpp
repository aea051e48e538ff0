// Synthetic Text and Retrieval tasks (data/lra_synthetic.h).
#include "lsformer/data/lra_synthetic.h"

#include <algorithm>
#include <string>

#include "lsformer/data/random_stream.h"
#include "lsformer/data/text.h"
#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {

constexpr uint64_t kTextStream = 0x5359547800000000ull;       // "SYTx": example i uses stream + i
constexpr uint64_t kRetrievalStream = 0x5359527400000000ull;  // "SYRt"
constexpr const char* kTopicLetters[4] = {"bcd", "fgh", "jkl", "npq"};

void check(const SyntheticTextOptions& o, int64_t first, int64_t count, const char* who) {
  LSF_CHECK(o.min_length >= 0 && o.max_length > o.min_length + 1)
      << who << ": lengths must satisfy 0 ≤ min_length < max_length − 1 (strict bounds), got (" << o.min_length << ", "
      << o.max_length << ")";
  LSF_CHECK(first >= 0 && count >= 0) << who << ": bad example range [" << first << ", " << first << " + " << count << ")";
}

int64_t draw_length(const SyntheticTextOptions& o, PhiloxStream& rng) {
  return o.min_length + 1 + int64_t(rng.below(uint32_t(o.max_length - o.min_length - 1)));
}

// A filler word of 2..8 lowercase letters, never 'g' or 'w' (the keywords' own letters).
std::string filler_word(PhiloxStream& rng) {
  static const std::string letters = "abcdefhijklmnopqrstuvxyz";  // a–z without g and w
  std::string w(size_t(2 + rng.below(7)), ' ');
  for (char& c : w) c = letters[rng.below(uint32_t(letters.size()))];
  return w;
}

std::string text_document(int32_t label, int64_t length, PhiloxStream& rng) {
  const std::string keyword = label == 1 ? "great" : "awful";
  const int64_t plants = 1 + length / 256;
  // Filler of exactly length − plants·6 bytes, then the keywords (with their space) inserted at
  // word boundaries: the document has exactly `length` bytes.
  const int64_t filler_bytes = std::max<int64_t>(0, length - plants * int64_t(keyword.size() + 1));
  std::string filler;
  while (int64_t(filler.size()) < filler_bytes) {
    if (!filler.empty()) filler += ' ';
    filler += filler_word(rng);
  }
  filler.resize(size_t(filler_bytes));
  std::string doc = filler;
  for (int64_t k = 0; k < plants; ++k) {
    // a boundary: the start, the end, or just after a space
    size_t at = size_t(rng.below(uint32_t(doc.size() + 1)));
    while (at > 0 && at < doc.size() && doc[at - 1] != ' ') --at;
    doc.insert(at, at == doc.size() ? " " + keyword : keyword + " ");
  }
  doc.resize(size_t(length), ' ');
  return doc;
}

std::string topic_document(int topic, int64_t length, PhiloxStream& rng) {
  std::string doc(size_t(length), ' ');
  for (char& c : doc) {
    const double u = rng.uniform();
    if (u < 0.15) continue;  // a space
    c = u < 0.15 + 0.85 * 0.3 ? kTopicLetters[topic][rng.below(3)] : char('a' + rng.below(26));
  }
  return doc;
}

Dataset byte_dataset(const char* name, bool paired) {
  Dataset d;
  d.name = name;
  d.vocab_size = kByteVocabSize;
  d.num_classes = 2;
  d.paired = paired;
  return d;
}

}  // namespace

Dataset synthetic_text(const SyntheticTextOptions& options, int64_t first, int64_t count) {
  check(options, first, count, "synthetic_text");
  Dataset d = byte_dataset("text", false);
  for (int64_t i = first; i < first + count; ++i) {
    PhiloxStream rng(options.seed, kTextStream + uint64_t(i));
    Example e;
    e.label = int32_t(i % 2);
    const std::string doc = text_document(e.label, draw_length(options, rng), rng);
    e.tokens = encode_bytes(doc, int64_t(doc.size()));
    d.examples.push_back(std::move(e));
  }
  return d;
}

Dataset synthetic_retrieval(const SyntheticTextOptions& options, int64_t first, int64_t count) {
  check(options, first, count, "synthetic_retrieval");
  Dataset d = byte_dataset("retrieval", true);
  for (int64_t i = first; i < first + count; ++i) {
    PhiloxStream rng(options.seed, kRetrievalStream + uint64_t(i));
    Example e;
    e.label = int32_t(i % 2);
    const int key1 = int(rng.below(4));
    const int key2 = e.label == 1 ? key1 : (key1 + 1 + int(rng.below(3))) % 4;
    const std::string doc1 = topic_document(key1, draw_length(options, rng), rng);
    const std::string doc2 = topic_document(key2, draw_length(options, rng), rng);
    e.tokens = encode_bytes(doc1, int64_t(doc1.size()));
    e.tokens2 = encode_bytes(doc2, int64_t(doc2.size()));
    d.examples.push_back(std::move(e));
  }
  return d;
}

}  // namespace lsf::data
