// Char-LM data: enwik8 / text8 / split-directory corpora (plain files and zips built here with
// libzip), gzip / dictd reading, the Debian GCIDE corpus (a synthetic file in its format, then the
// installed package), truncated-BPTT training batches against an independent index computation,
// the one-pass evaluation iterator's coverage, and the unigram / bigram baselines against
// hand-computed values. Every malformed input must give an error naming the file.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "lsformer/data/bptt.h"
#include "lsformer/data/char_corpus.h"
#include "lsformer/data/compressed_file.h"
#include "lsformer/data/debian_corpus.h"
#include "lsformer/data/lm_baselines.h"
#include "helpers.h"
#include "run_helpers.h"

using namespace lsf;
using namespace lsf::data;

namespace {

// A fresh directory under the system's temp dir, removed with everything in it at scope end.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name)
      : path((std::filesystem::temp_directory_path() / ("lsf_test_lm_" + std::to_string(getpid()) + "_" + name))
                 .string()) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}

// n bytes covering every value 0..255 (newline and NUL included), no two neighbours equal.
std::string byte_text(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char((i * 37 + 11) % 256);
  return s;
}

std::vector<uint8_t> ids_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

// A byte corpus whose train split is `train` (dev / test are 2 filler tokens each).
std::shared_ptr<const CharCorpus> train_corpus(std::vector<uint8_t> train) {
  auto c = std::make_shared<CharCorpus>();
  c->name = "toy";
  c->train = std::move(train);
  c->dev = {1, 2};
  c->test = {3, 4};
  return c;
}

// Tokens 1 + i mod 250: never 0, so an input 0 can only be padding.
std::vector<uint8_t> nonzero_tokens(int64_t n) {
  std::vector<uint8_t> t(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = uint8_t(1 + (i * 7) % 250);
  return t;
}

constexpr SplitSizes kTiny{90, 5, 5};

}  // namespace

TEST_CASE("lm corpus: enwik8 splits from the plain file and the zip are the same bytes", "[data][lm]") {
  const TempDir temp("enwik8");
  const std::string& dir = temp.path;
  const std::string text = byte_text(100);
  write_bytes(dir + "/enwik8", text);
  write_zip(dir + "/enwik8.zip", {{"enwik8", text}}, "test");

  const CharCorpus plain = read_enwik8(dir + "/enwik8", kTiny);
  CHECK(plain.name == "enwik8");
  CHECK(plain.vocab.size() == 256);
  CHECK(plain.train == ids_of(text.substr(0, 90)));   // the first 90
  CHECK(plain.dev == ids_of(text.substr(90, 5)));     // the next 5
  CHECK(plain.test == ids_of(text.substr(95, 5)));    // the last 5
  const CharCorpus zipped = read_enwik8(dir + "/enwik8.zip", kTiny);
  CHECK(zipped.train == plain.train);
  CHECK(zipped.dev == plain.dev);
  CHECK(zipped.test == plain.test);
  CHECK(kHutterSplitSizes.train == 90'000'000);
  CHECK(kHutterSplitSizes.total() == 100'000'000);

  // Too short / too long for the split, missing file, missing entry.
  write_bytes(dir + "/short", text.substr(0, 99));
  CHECK_THROWS_WITH(read_enwik8(dir + "/short", kTiny),
                    Catch::Contains("short'") && Catch::Contains("holds 99 bytes, expected exactly 100") &&
                        Catch::Contains("too short"));
  CHECK_THROWS_WITH(read_enwik8(dir + "/enwik8"),  // the 10^8-byte standard split
                    Catch::Contains("expected exactly 100000000 (90000000 train + 5000000 dev + 5000000 test)"));
  CHECK_THROWS_WITH(read_enwik8(dir + "/nothere"), Catch::Contains("nothere") && Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(read_enwik8(dir + "/nothere.zip"),
                    Catch::Contains("nothere.zip") && Catch::Contains("does not exist"));
  write_zip(dir + "/other.zip", {{"enwik9", text}}, "test");
  CHECK_THROWS_WITH(read_enwik8(dir + "/other.zip", kTiny),
                    Catch::Contains("other.zip' has no entry 'enwik8'") && Catch::Contains("'enwik9'"));
  CHECK_THROWS_WITH(read_enwik8(dir + "/enwik8", SplitSizes{1, 5, 5}), Catch::Contains("must each be ≥ 2"));
}

TEST_CASE("lm corpus: corrupt and truncated zips are errors naming the archive", "[data][lm]") {
  const TempDir temp("badzip");
  const std::string& dir = temp.path;
  const std::string text = byte_text(100);
  write_zip(dir + "/enwik8.zip", {{"enwik8", text}}, "test");
  const std::string zip = testing::read_file(dir + "/enwik8.zip");

  // Cut off the central directory: no longer a zip archive.
  write_bytes(dir + "/cut.zip", zip.substr(0, zip.size() / 2));
  CHECK_THROWS_WITH(read_enwik8(dir + "/cut.zip", kTiny),
                    Catch::Contains("cut.zip") && Catch::Contains("as a zip archive"));
  // Damage the compressed data (local header 30 bytes + the 6-byte name precede it): the
  // inflater or the CRC-32 check must catch it.
  std::string damaged = zip;
  for (size_t i = 40; i < 60 && i < damaged.size(); ++i) damaged[i] = char(damaged[i] ^ 0x5A);
  write_bytes(dir + "/damaged.zip", damaged);
  CHECK_THROWS_WITH(read_enwik8(dir + "/damaged.zip", kTiny),
                    Catch::Contains("entry 'enwik8' of '") && Catch::Contains("damaged.zip' is damaged"));
  // A wrong CRC-32 in the central directory: the bytes no longer match what was stored.
  std::string bad_crc = zip;
  const size_t central = zip.find(std::string("PK\x01\x02", 4));
  REQUIRE(central != std::string::npos);
  bad_crc[central + 16] = char(bad_crc[central + 16] ^ 1);  // the CRC field of the entry
  write_bytes(dir + "/crc.zip", bad_crc);
  CHECK_THROWS_WITH(read_enwik8(dir + "/crc.zip", kTiny),
                    Catch::Contains("entry 'enwik8' of '") && Catch::Contains("crc.zip' is damaged: CRC error"));
  // Not a zip at all.
  write_bytes(dir + "/text.zip", text);
  CHECK_THROWS_WITH(read_enwik8(dir + "/text.zip", kTiny),
                    Catch::Contains("text.zip") && Catch::Contains("as a zip archive"));
}

TEST_CASE("lm corpus: text8 alphabet, ids and the error naming file and offset", "[data][lm]") {
  const TempDir temp("text8");
  const std::string& dir = temp.path;
  std::string text;
  for (int i = 0; i < 100; ++i) text += i % 6 == 0 ? ' ' : char('a' + i % 26);
  write_bytes(dir + "/text8", text);
  const CharCorpus corpus = read_text8(dir + "/text8", kTiny);
  CHECK(corpus.name == "text8");
  CHECK(corpus.vocab.size() == 27);
  REQUIRE(corpus.train.size() == 90);
  CHECK(corpus.train[0] == 26);  // ' '
  CHECK(corpus.train[1] == 1);   // 'b'
  CHECK(corpus.test[4] == uint8_t(text[99] - 'a'));
  for (int i = 0; i < 100; ++i) {
    const uint8_t id = i < 90 ? corpus.train[size_t(i)] : i < 95 ? corpus.dev[size_t(i - 90)] : corpus.test[size_t(i - 95)];
    REQUIRE(corpus.vocab.byte_of(id) == uint8_t(text[size_t(i)]));
  }
  CHECK(corpus.vocab.id_of('z') == 25);
  CHECK(corpus.vocab.id_of('A') == -1);
  CHECK_THROWS_WITH(corpus.vocab.byte_of(27), Catch::Contains("outside the text8 vocabulary"));

  std::string bad = text;
  bad[93] = 'Q';
  write_bytes(dir + "/bad8", bad);
  CHECK_THROWS_WITH(read_text8(dir + "/bad8", kTiny),
                    Catch::Contains("read_text8") && Catch::Contains("bad8'") && Catch::Contains("byte 81 at offset 93") &&
                        Catch::Contains("a-z and space"));
  write_zip(dir + "/text8.zip", {{"text8", bad}}, "test");
  CHECK_THROWS_WITH(read_text8(dir + "/text8.zip", kTiny),
                    Catch::Contains("text8.zip:text8'") && Catch::Contains("offset 93"));
  write_zip(dir + "/good8.zip", {{"text8", text}}, "test");
  CHECK(read_text8(dir + "/good8.zip", kTiny).dev == corpus.dev);
}

TEST_CASE("lm corpus: fractional splits, split directories and text sources", "[data][lm]") {
  const SplitSizes hutter = fractional_split_sizes(100'000'000, "x");
  CHECK((hutter.train == 90'000'000 && hutter.dev == 5'000'000 && hutter.test == 5'000'000));
  const SplitSizes odd = fractional_split_sizes(1019, "x");  // floor(1019 / 20) = 50
  CHECK((odd.train == 919 && odd.dev == 50 && odd.test == 50));
  CHECK_THROWS_WITH(fractional_split_sizes(39, "tiny.txt"), Catch::Contains("tiny.txt") && Catch::Contains("at least 40"));

  const TempDir temp("splits");
  const std::string& dir = temp.path;
  const std::string text = byte_text(1019);
  const CharCorpus corpus = split_corpus("doc", text, odd, CharAlphabet::kBytes, "doc");
  write_corpus_splits(dir + "/out", corpus);
  CHECK(testing::read_file(dir + "/out/train.txt") == text.substr(0, 919));
  CHECK(testing::read_file(dir + "/out/dev.txt") == text.substr(919, 50));
  CHECK(testing::read_file(dir + "/out/test.txt") == text.substr(969, 50));
  const CharCorpus back = read_corpus_splits(dir + "/out");
  CHECK(back.name == "out");
  CHECK(back.train == corpus.train);
  CHECK(back.dev == corpus.dev);
  CHECK(back.test == corpus.test);
  CHECK(load_char_corpus("splits", dir + "/out").test == corpus.test);

  // A text8 corpus round-trips through its letters.
  const std::string letters = "the quick brown fox jumps over the lazy dog and on and on";
  const CharCorpus t8 = split_corpus("t8", letters, fractional_split_sizes(int64_t(letters.size()), "t8"),
                                     CharAlphabet::kText8, "t8");
  write_corpus_splits(dir + "/t8", t8);
  CHECK(testing::read_file(dir + "/t8/train.txt") + testing::read_file(dir + "/t8/dev.txt") + testing::read_file(dir + "/t8/test.txt") ==
        letters);
  CHECK(read_corpus_splits(dir + "/t8", CharAlphabet::kText8).train == t8.train);
  CHECK_THROWS_WITH(read_corpus_splits(dir + "/out", CharAlphabet::kText8),
                    Catch::Contains("out/train.txt'") && Catch::Contains("offset 0"));

  std::filesystem::remove(dir + "/out/test.txt");
  CHECK_THROWS_WITH(read_corpus_splits(dir + "/out"), Catch::Contains("out/test.txt") && Catch::Contains("does not exist"));
  write_bytes(dir + "/out/test.txt", "x");
  CHECK_THROWS_WITH(read_corpus_splits(dir + "/out"), Catch::Contains("out/test.txt' holds 1 bytes"));
  CHECK_THROWS_WITH(read_corpus_splits(dir + "/none"), Catch::Contains("none' is not a directory"));

  // Text sources: plain, one-entry zip, gzip; a zip with two entries is ambiguous.
  write_bytes(dir + "/doc.txt", text);
  write_zip(dir + "/doc.zip", {{"doc.txt", text}}, "test");
  write_gzip_file(dir + "/doc.txt.gz", text, "test");
  CHECK(read_text_source(dir + "/doc.txt", "t") == text);
  CHECK(read_text_source(dir + "/doc.zip", "t") == text);
  CHECK(read_text_source(dir + "/doc.txt.gz", "t") == text);
  // The extension in any case, or none: recognised by the first bytes (they were split as text).
  write_gzip_file(dir + "/DOC.GZ", text, "test");
  write_gzip_file(dir + "/doc_gzip", text, "test");
  write_zip(dir + "/doc_zip", {{"doc.txt", text}}, "test");
  CHECK(read_text_source(dir + "/DOC.GZ", "t") == text);
  CHECK(read_text_source(dir + "/doc_gzip", "t") == text);
  CHECK(read_text_source(dir + "/doc_zip", "t") == text);
  // A FIFO is refused before it is opened (opening one waits for a writer: lsf data text hung).
  REQUIRE(::mkfifo((dir + "/fifo").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(read_text_source(dir + "/fifo", "t"), Catch::Contains("fifo': it is a FIFO (named pipe), not a regular file"));
  write_zip(dir + "/two.zip", {{"a.txt", text}, {"b.txt", text}}, "test");
  CHECK_THROWS_WITH(read_text_source(dir + "/two.zip", "t"),
                    Catch::Contains("two.zip' holds 2 entries") && Catch::Contains("'a.txt', 'b.txt'"));
  const CharCorpus loaded = load_char_corpus("text", dir + "/doc.zip");
  CHECK(loaded.name == "doc.zip");
  CHECK(loaded.train == corpus.train);
  CHECK_THROWS_WITH(load_char_corpus("wiki", "x"), Catch::Contains("unknown format 'wiki'"));
  CHECK(parse_lm_split("valid") == LmSplit::kDev);
  CHECK_THROWS_WITH(parse_lm_split("validation"), Catch::Contains("unknown split 'validation'"));
}

TEST_CASE("gzip: dictd files decompress, truncated, damaged and non-gzip files are errors", "[data][lm]") {
  const TempDir temp("gzip");
  const std::string& dir = temp.path;
  const std::string text = byte_text(5000);
  write_gzip_file(dir + "/x.dict.dz", text, "test");
  CHECK(read_gzip_file(dir + "/x.dict.dz", "t") == text);
  CHECK(read_dictd_text(dir + "/x.dict.dz") == text);
  write_bytes(dir + "/x.dict", text);
  CHECK(read_dictd_text(dir + "/x.dict") == text);  // uncompressed .dict: read as it is

  const std::string gz = testing::read_file(dir + "/x.dict.dz");
  write_bytes(dir + "/cut.dz", gz.substr(0, gz.size() - 12));
  CHECK_THROWS_WITH(read_gzip_file(dir + "/cut.dz", "t"), Catch::Contains("cut.dz' is truncated or damaged"));
  std::string bad_crc = gz;
  bad_crc[gz.size() - 6] = char(bad_crc[gz.size() - 6] ^ 1);  // inside the CRC-32 trailer
  write_bytes(dir + "/crc.dz", bad_crc);
  CHECK_THROWS_WITH(read_gzip_file(dir + "/crc.dz", "t"),
                    Catch::Contains("crc.dz' (truncated or damaged gzip data)") && Catch::Contains("incorrect data check"));
  CHECK_THROWS_WITH(read_gzip_file(dir + "/x.dict", "t"), Catch::Contains("x.dict' is not gzip-compressed"));
  write_bytes(dir + "/empty.dz", "");
  CHECK_THROWS_WITH(read_gzip_file(dir + "/empty.dz", "t"), Catch::Contains("empty.dz' is not gzip-compressed"));
  CHECK_THROWS_WITH(read_gzip_file(dir + "/none.dz", "t"), Catch::Contains("none.dz' does not exist"));
}

TEST_CASE("debian corpus: a dictd-format GCIDE file becomes a 90/5/5 byte corpus", "[data][lm]") {
  const TempDir temp("gcide");
  const std::string& dir = temp.path;
  // The shape of the real file: dictd headers, then entries in the package's text notation.
  std::string text = "\n\n00-database-url\n   ftp://ftp.gnu.org/gnu/gcide\n\n";
  for (int i = 0; i < 20; ++i)
    text += "Largess \\Lar\"gess\\, n. [F. largesse, fr. large. See {Large}, a.]\n   1. Liberality; generosity.\n"
            "      [1913 Webster]\n\n";
  write_gzip_file(dir + "/gcide.dict.dz", text, "test");
  const CharCorpus corpus = read_gcide_corpus(dir + "/gcide.dict.dz");
  const int64_t n = int64_t(text.size());
  CHECK(corpus.name == "gcide");
  CHECK(corpus.vocab.size() == 256);
  CHECK(int64_t(corpus.dev.size()) == n / 20);
  CHECK(int64_t(corpus.test.size()) == n / 20);
  CHECK(corpus.train == ids_of(text.substr(0, size_t(n - 2 * (n / 20)))));
  CHECK(corpus.test == ids_of(text.substr(size_t(n - n / 20))));

  CHECK(find_gcide({dir + "/none.dz", dir + "/gcide.dict.dz"}) == dir + "/gcide.dict.dz");
  CHECK_THROWS_WITH(find_gcide({dir + "/none.dz"}),
                    Catch::Contains("dict-gcide") && Catch::Contains("scripts/install-deps.sh") &&
                        Catch::Contains("none.dz"));
}

// The installed package itself (scripts/install-deps.sh installs dict-gcide, and CI runs it), so
// a missing package fails here with the instruction rather than passing silently.
TEST_CASE("debian corpus: the installed dict-gcide package gives the documented corpus", "[data][lm][gcide]") {
  std::string path;
  try {
    path = find_gcide();
  } catch (const Error& e) {
    FAIL("the offline corpus is missing: " << e.what());
  }
  const CharCorpus corpus = default_offline_corpus();
  CHECK(corpus.name == "gcide");
  // Sizes documented in data/debian_corpus.h for dict-gcide 0.48.5+nmu2 (Debian 12).
  CHECK(corpus.train.size() == 35'957'089);
  CHECK(corpus.dev.size() == 1'997'616);
  CHECK(corpus.test.size() == 1'997'616);
  const std::string head(corpus.train.begin(), corpus.train.begin() + 60);
  CHECK(head.find("00-database-url") != std::string::npos);
  const std::string dev_head(corpus.dev.begin(), corpus.dev.begin() + 200);
  CHECK(dev_head.find("Ticpolonga") != std::string::npos);
}

TEST_CASE("bptt: a hand-worked layout (N = 12, B = 2, M = 3)", "[data][lm]") {
  std::vector<uint8_t> t(12);
  for (int i = 0; i < 12; ++i) t[size_t(i)] = uint8_t(i);
  auto corpus = train_corpus(t);
  BpttLoader loader(corpus, LmSplit::kTrain, {.batch_size = 2, .block_len = 3});
  REQUIRE(loader.batches_per_epoch() == 2);  // 4 blocks dealt into 2 streams of 2
  CHECK(loader.stream_begin(1) == 6);
  const LmBatch b0 = loader.batch(0);
  test::check_equal<int64_t>(b0.inputs, {2, 3}, {0, 1, 2, 6, 7, 8});
  test::check_equal<int64_t>(b0.targets, {2, 3}, {1, 2, kLmIgnoreIndex, 7, 8, kLmIgnoreIndex});
  CHECK(b0.resets_memory);
  CHECK(b0.num_targets == 4);
  CHECK(b0.num_tokens == 6);
  const LmBatch b1 = loader.batch(1);
  test::check_equal<int64_t>(b1.inputs, {2, 3}, {3, 4, 5, 9, 10, 11});
  test::check_equal<int64_t>(b1.targets, {2, 3}, {4, 5, kLmIgnoreIndex, 10, 11, kLmIgnoreIndex});
  CHECK_FALSE(b1.resets_memory);
  const LmBatch b2 = loader.batch(2);  // epoch 1 starts over
  CHECK(b2.epoch == 1);
  CHECK(b2.resets_memory);
  CHECK(b2.inputs.to_vector<int64_t>() == b0.inputs.to_vector<int64_t>());

  // block_end_targets: the last position predicts the split's next token, where there is one.
  BpttLoader full(corpus, LmSplit::kTrain, {.batch_size = 2, .block_len = 3, .block_end_targets = true});
  test::check_equal<int64_t>(full.batch(0).targets, {2, 3}, {1, 2, 3, 7, 8, 9});
  test::check_equal<int64_t>(full.batch(1).targets, {2, 3}, {4, 5, 6, 10, 11, kLmIgnoreIndex});
  CHECK(full.batch(1).num_targets == 5);
}

TEST_CASE("bptt: training batches follow fairseq's block streams for many shapes", "[data][lm]") {
  // Independent reference: token (b, j, t) of the batch is block (b·P + j) of the split.
  for (const auto& [n, batch, block] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {103, 3, 10}, {95, 2, 10}, {7, 1, 10}, {64, 4, 4}, {65, 4, 4}, {1000, 5, 17}, {50, 1, 50}}) {
    INFO("N = " << n << ", B = " << batch << ", M = " << block);
    auto corpus = train_corpus(nonzero_tokens(n));
    const std::vector<uint8_t>& t = corpus->train;
    BpttLoader loader(corpus, LmSplit::kTrain, {.batch_size = batch, .block_len = block});
    const int64_t num_blocks = (n + block - 1) / block;
    const int64_t per_stream = num_blocks / batch;
    REQUIRE(loader.batches_per_epoch() == per_stream);
    CHECK(loader.tokens_per_epoch() == std::min(n, batch * per_stream * block));
    std::map<int64_t, int> seen;  // split offset → times it appeared as an input this epoch
    for (int64_t j = 0; j < per_stream; ++j) {
      const LmBatch lb = loader.batch(j);
      const int64_t width = lb.inputs.size(1);
      REQUIRE(lb.inputs.size(0) == batch);
      CHECK(lb.resets_memory == (j == 0));
      const auto in = lb.inputs.to_vector<int64_t>();
      const auto tg = lb.targets.to_vector<int64_t>();
      int64_t targets = 0;
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t begin = (b * per_stream + j) * block;
        const int64_t length = std::min(block, n - begin);
        REQUIRE(width >= length);
        for (int64_t i = 0; i < width; ++i) {
          const int64_t x = in[size_t(b * width + i)], y = tg[size_t(b * width + i)];
          if (i < length) {
            REQUIRE(x == t[size_t(begin + i)]);
            ++seen[begin + i];
            REQUIRE(y == (i + 1 < length ? int64_t(t[size_t(begin + i + 1)]) : kLmIgnoreIndex));
          } else {
            REQUIRE(x == 0);
            REQUIRE(y == kLmIgnoreIndex);
          }
          targets += y != kLmIgnoreIndex;
        }
      }
      CHECK(lb.num_targets == targets);
    }
    // Streams are contiguous and disjoint: an epoch shows each kept token once, in order.
    CHECK(int64_t(seen.size()) == loader.tokens_per_epoch());
    CHECK(seen.rbegin()->first == loader.tokens_per_epoch() - 1);
    for (const auto& [offset, count] : seen) REQUIRE(count == 1);
  }
}

TEST_CASE("bptt: the split's short final block is padded, and batches are pure functions of k", "[data][lm]") {
  auto corpus = train_corpus(nonzero_tokens(95));  // 10 blocks of 10, the last holding 5
  BpttLoader loader(corpus, LmSplit::kTrain, {.batch_size = 2, .block_len = 10});
  REQUIRE(loader.batches_per_epoch() == 5);
  const LmBatch last = loader.batch(4);  // row 1 = block 9 = tokens 90..94
  const auto in = last.inputs.to_vector<int64_t>();
  const auto tg = last.targets.to_vector<int64_t>();
  CHECK(last.inputs.shape() == Shape{2, 10});
  CHECK(in[10 + 4] == corpus->train[94]);
  CHECK(tg[10 + 3] == corpus->train[94]);
  CHECK(tg[10 + 4] == kLmIgnoreIndex);  // the last real position: no successor in the block
  for (int i = 5; i < 10; ++i) CHECK((in[size_t(10 + i)] == 0 && tg[size_t(10 + i)] == kLmIgnoreIndex));
  CHECK(last.num_tokens == 15);
  CHECK(last.num_targets == 9 + 4);

  // Determinism: the same k gives the same batch from any loader, in any order, in any epoch.
  BpttLoader other(corpus, LmSplit::kTrain, {.batch_size = 2, .block_len = 10});
  for (int64_t k : {7, 3, 0, 12, 3}) {
    const LmBatch a = loader.batch(k), b = other.batch(k), c = loader.batch(k % 5);
    CHECK(a.inputs.to_vector<int64_t>() == b.inputs.to_vector<int64_t>());
    CHECK(a.targets.to_vector<int64_t>() == c.targets.to_vector<int64_t>());
    CHECK(a.epoch == k / 5);
    CHECK(a.resets_memory == (k % 5 == 0));
  }

  CHECK_THROWS_WITH(BpttLoader(corpus, LmSplit::kTrain, {.batch_size = 11, .block_len = 10}),
                    Catch::Contains("10 blocks of 10, fewer than the 11 streams"));
  CHECK_THROWS_WITH(BpttLoader(corpus, LmSplit::kTrain, {.batch_size = 1, .block_len = 0}),
                    Catch::Contains("block_len must be ≥ 1"));
  CHECK_THROWS_WITH(BpttLoader(nullptr, LmSplit::kTrain, {.batch_size = 1, .block_len = 4}),
                    Catch::Contains("no corpus"));
  CHECK_THROWS_WITH(loader.batch(-1), Catch::Contains("batch index must be ≥ 0"));
}

TEST_CASE("bptt evaluation: every token is an input exactly once, targets as documented", "[data][lm]") {
  for (const auto& [n, streams, block] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {25, 1, 10}, {25, 3, 10}, {9, 4, 3}, {100, 1, 256}, {1, 1, 5}, {257, 2, 16}}) {
    for (bool block_end_targets : {false, true}) {
      INFO("N = " << n << ", S = " << streams << ", M = " << block << ", block_end_targets " << block_end_targets);
      auto corpus = train_corpus(nonzero_tokens(n));
      const std::vector<uint8_t>& t = corpus->train;
      LmEvalLoader loader(corpus, LmSplit::kTrain,
                          {.batch_size = streams, .block_len = block, .block_end_targets = block_end_targets});
      const int64_t ls = (n + streams - 1) / streams;
      REQUIRE(loader.stream_length() == ls);
      REQUIRE(loader.num_batches() == (ls + block - 1) / block);
      std::vector<int> input_count(size_t(n), 0), target_count(size_t(n), 0);
      int64_t targets = 0;
      for (int64_t j = 0; j < loader.num_batches(); ++j) {
        const LmBatch lb = loader.batch(j);
        const int64_t width = lb.inputs.size(1);
        CHECK(width == std::min(block, ls - j * block));  // only the tail is shorter than M
        CHECK(lb.resets_memory == (j == 0));
        const auto in = lb.inputs.to_vector<int64_t>();
        const auto tg = lb.targets.to_vector<int64_t>();
        for (int64_t s = 0; s < streams; ++s) {
          const int64_t stream_end = std::min(n, (s + 1) * ls);
          for (int64_t i = 0; i < width; ++i) {
            const int64_t pos = s * ls + j * block + i;  // split offset of this cell
            const int64_t x = in[size_t(s * width + i)], y = tg[size_t(s * width + i)];
            if (pos >= stream_end) {  // past the stream: padding
              REQUIRE(x == 0);
              REQUIRE(y == kLmIgnoreIndex);
              continue;
            }
            REQUIRE(x == t[size_t(pos)]);
            ++input_count[size_t(pos)];
            const bool row_end = i == width - 1 || pos + 1 == stream_end;
            const bool scored = pos + 1 < n && (!row_end || block_end_targets);
            REQUIRE(y == (scored ? int64_t(t[size_t(pos + 1)]) : kLmIgnoreIndex));
            if (scored) ++target_count[size_t(pos + 1)];
          }
        }
        targets += lb.num_targets;
      }
      for (int64_t p = 0; p < n; ++p) REQUIRE(input_count[size_t(p)] == 1);
      CHECK(loader.total_targets() == targets);
      if (block_end_targets) {  // every token but the first is predicted exactly once
        CHECK(targets == n - 1);
        for (int64_t p = 1; p < n; ++p) REQUIRE(target_count[size_t(p)] == 1);
      }
    }
  }
  // The official protocol: batch 1, M = 256 → each block of 256 scores 255 tokens.
  auto corpus = train_corpus(nonzero_tokens(1000));
  CHECK(LmEvalLoader(corpus, LmSplit::kTrain, {.batch_size = 1, .block_len = 256}).total_targets() ==
        3 * 255 + (1000 - 768 - 1));
  LmEvalLoader small(corpus, LmSplit::kDev, {.batch_size = 1, .block_len = 4});
  CHECK_THROWS_WITH(small.batch(1), Catch::Contains("batch 1 outside [0, 1)"));
}

TEST_CASE("lm baselines: add-one unigram and bigram bits per character by hand", "[data][lm]") {
  // text8 vocabulary (V = 27); train "aab", dev "aba", test "ab".
  const CharCorpus c = split_corpus("hand", "aababaab", {3, 3, 2}, CharAlphabet::kText8, "hand");
  // Unigram: p(a) = (2 + 1) / (3 + 27) = 1/10, p(b) = (1 + 1) / 30 = 1/15.
  // dev scores positions 1..2 ("b", "a"): (log2 15 + log2 10) / 2.
  const BaselineBpc uni_dev = unigram_bpc(c, LmSplit::kDev);
  CHECK(uni_dev.scored == 2);
  CHECK(uni_dev.bits_per_char == Approx((std::log2(15.0) + std::log2(10.0)) / 2).epsilon(1e-12));
  // test = "ab" (bytes 6..7): scores "b" → log2 15.
  CHECK(unigram_bpc(c, LmSplit::kTest).bits_per_char == Approx(std::log2(15.0)).epsilon(1e-12));
  // Bigram: train pairs "aa", "ab" → count(a·) = 2, count(b·) = 0.
  // p(b|a) = (1 + 1) / (2 + 27) = 2/29, p(a|b) = (0 + 1) / (0 + 27) = 1/27.
  const BaselineBpc bi_dev = bigram_bpc(c, LmSplit::kDev);  // "ab", "ba"
  CHECK(bi_dev.scored == 2);
  CHECK(bi_dev.bits_per_char == Approx((std::log2(29.0 / 2) + std::log2(27.0)) / 2).epsilon(1e-12));
  // train itself: "aa" → p(a|a) = (1 + 1) / 29, "ab" → 2/29.
  CHECK(bigram_bpc(c, LmSplit::kTrain).bits_per_char == Approx(std::log2(29.0 / 2)).epsilon(1e-12));

  // On real-looking text the bigram beats the unigram, and both beat the uniform 8 bits.
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the cat sat on the mat and the dog sat on the log. ";
  const CharCorpus bytes = split_corpus("cats", text, fractional_split_sizes(int64_t(text.size()), "cats"),
                                        CharAlphabet::kBytes, "cats");
  const double uni = unigram_bpc(bytes, LmSplit::kTest).bits_per_char;
  const double bi = bigram_bpc(bytes, LmSplit::kTest).bits_per_char;
  CHECK(bi < uni);
  CHECK(uni < 8.0);

  CharCorpus tiny = c;
  tiny.test = {0};
  CHECK_THROWS_WITH(bigram_bpc(tiny, LmSplit::kTest), Catch::Contains("test split of 'hand' has 1 tokens"));
}
