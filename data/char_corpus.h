// Character-level language-modelling corpora (enwik8, text8, any text): a vocabulary plus the
// token ids of the contiguous train / dev / test splits. Spec: data-formats.md §1.1–1.3;
// transformer-ls.md §3.4 item 7 and §3.6 (batching is data/bptt.h).
//
// Storage: one byte per token (both vocabularies have ≤ 256 ids), so enwik8's 10^8 tokens take
// 100 MB; there are no per-token objects.
//
// Splits (the prep scripts the official code runs: awd-lstm-lm prep_enwik8.py, Transformer-XL
// prep_text8.py): train = data[:-10M], dev = data[-10M:-5M], test = data[-5M:]. For the 10^8-byte
// files that is the first 90,000,000 bytes, the next 5,000,000 and the last 5,000,000; the
// readers require exactly train + dev + test bytes, so a truncated download is an error, not a
// smaller corpus. Any other text is split the same way by fractions: dev = test = floor(N/20),
// train = the rest (N = 10^8 gives 90M / 5M / 5M, the same as enwik8).
//
// Vocabulary (ours; no char-LM checkpoint of the paper was released, so id compatibility with
// the official runs is not needed and not provided):
//   bytes  id = byte value, 256 ids (enwik8, `lsf data text` splits, the Debian offline corpus).
//          Every byte is a token, newline (10) included: data-formats.md §1.3 recommends scoring
//          every byte.
//   text8  27 ids: 'a'..'z' → 0..25, ' ' → 26. Any other byte is an error naming file and offset.
// No special ids: padding positions get input id 0 and the ignore target (data/bptt.h), so the
// model needs no <pad>/<eos> rows.
// How the official code differs: `fairseq-preprocess --only-source` builds a fairseq Dictionary
// from the prep scripts' output, where each byte is written as its decimal value ("60 109 ...")
// and each newline byte ends a line. Ids are then <s>=0, <pad>=1, </s>=2, <unk>=3, followed by the
// symbols sorted by descending train-split frequency (ties in symbol-string order), padded with
// "madeupwordNNNN" entries to a multiple of 8. Every newline becomes </s> (id 2), and a line
// that does not end in a newline (the last one of a split) also gets a </s>, so a split has one
// more token than bytes when it does not end in "\n". text8's prep script also strips the
// leading/trailing space of each split and writes ' ' as '_'; its one line gets one </s>. We
// keep the raw bytes (no strip, no </s>): the token streams differ only at the ends of a split
// (by at most one token for enwik8, three for text8) and the ids by a relabelling.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lsf::data {

enum class CharAlphabet { kBytes, kText8 };

// The id ↔ byte map of a corpus.
struct CharVocab {
  CharAlphabet alphabet = CharAlphabet::kBytes;

  int64_t size() const { return alphabet == CharAlphabet::kBytes ? 256 : 27; }
  const char* name() const { return alphabet == CharAlphabet::kBytes ? "bytes" : "text8"; }
  // The id of `byte`, or −1 when the alphabet has no such symbol.
  int32_t id_of(uint8_t byte) const;
  // The byte of `id`; throws for an id outside [0, size()).
  uint8_t byte_of(int32_t id) const;
};

enum class LmSplit { kTrain, kDev, kTest };
const char* lm_split_name(LmSplit split);  // "train", "dev", "test"
// "train"; "dev", "valid" or "val"; "test". Throws naming the accepted names otherwise.
LmSplit parse_lm_split(const std::string& name);

struct SplitSizes {
  int64_t train = 0, dev = 0, test = 0;
  int64_t total() const { return train + dev + test; }
};
// enwik8 and text8: 90,000,000 / 5,000,000 / 5,000,000.
inline constexpr SplitSizes kHutterSplitSizes{90'000'000, 5'000'000, 5'000'000};

// The fractional split of any text of `total` bytes: dev = test = floor(total / 20), train the
// rest. Throws when a split would hold fewer than 2 tokens (no next-token target), i.e. total < 40.
SplitSizes fractional_split_sizes(int64_t total, const std::string& source);

struct CharCorpus {
  std::string name;              // "enwik8", "text8", "gcide", or the source file's name
  CharVocab vocab;
  std::vector<uint8_t> train;    // [N_train] token ids, each < vocab.size()
  std::vector<uint8_t> dev;      // [N_dev]
  std::vector<uint8_t> test;     // [N_test]

  const std::vector<uint8_t>& split(LmSplit which) const;
};

// enwik8 from the raw `enwik8` file or from the Hutter-prize `enwik8.zip` (its entry "enwik8");
// a path ending in ".zip" is read as the archive. Byte vocabulary. The data must hold exactly
// sizes.total() bytes (tests pass small sizes; the default is the standard split).
CharCorpus read_enwik8(const std::string& path, const SplitSizes& sizes = kHutterSplitSizes);

// text8 from `text8` or `text8.zip` (entry "text8"); the text8 vocabulary. Exactly sizes.total()
// bytes, every one of them 'a'..'z' or ' ': the first other byte is an error naming the file and
// its offset.
CharCorpus read_text8(const std::string& path, const SplitSizes& sizes = kHutterSplitSizes);

// Splits `text` contiguously into `sizes` (which must add up to text.size()), mapping bytes to
// ids of `alphabet`. `source` names the text in errors (a path, or "path:entry").
CharCorpus split_corpus(std::string name, std::string_view text, const SplitSizes& sizes,
                        CharAlphabet alphabet, const std::string& source);

// The bytes of a text source for `lsf data text`: a plain file, a ".zip" with exactly one entry
// (more are an error listing them), or a gzip file (".gz", ".dz"); extensions in any case, and a
// file without one of them is recognised by its first bytes (gzip 1f 8b, zip "PK" 3 4).
std::string read_text_source(const std::string& path, const char* who);

// A split directory, as `lsf data text --out DIR` writes it: DIR/train.txt, DIR/dev.txt and
// DIR/test.txt, each the raw bytes of its split (for a text8 corpus, its letters and spaces), so
// they can be inspected with any text tool. Written atomically (temporary file + rename); the
// directory is created.
void write_corpus_splits(const std::string& dir, const CharCorpus& corpus);
// Reads a split directory back; `alphabet` says how to map its bytes (text8 validates them).
// The corpus is named after the directory. Missing files and splits with fewer than 2 tokens
// are errors naming the file.
CharCorpus read_corpus_splits(const std::string& dir, CharAlphabet alphabet = CharAlphabet::kBytes);

// One entry point for configs: format "enwik8" | "text8" (path = file or .zip), "splits"
// (path = a split directory, byte vocabulary), "text" (path = any text source, split by
// fractions), "gcide" (Debian's dictionary, data/debian_corpus.h; path empty = the installed one).
CharCorpus load_char_corpus(const std::string& format, const std::string& path);

}  // namespace lsf::data
