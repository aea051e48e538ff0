// LRA readers on small fixture files in each exact format (written by
// tests/fixtures/data/gen_data_fixtures.py) and on malformed variants: Text (TSV and the aclImdb
// folders), Retrieval (5-column TSV), Image (CIFAR-10 binary → grayscale) and Pathfinder (PNG +
// metadata). Every error must name the file, and the line or record when a row is at fault.
#include <fstream>
#include <set>
#include <sstream>

#include "lsformer/data/image.h"
#include "lsformer/data/pathfinder.h"
#include "lsformer/data/retrieval.h"
#include "lsformer/data/text.h"
#include "helpers.h"

using namespace lsf;
using namespace lsf::data;

namespace {

const std::string kFixtures = std::string(LSF_FIXTURE_DIR) + "/data";

std::vector<int32_t> bytes_plus_one(const std::string& s) {
  std::vector<int32_t> ids;
  for (unsigned char c : s) ids.push_back(int32_t(c) + 1);
  return ids;
}

// Sample id → pixels of the fixture PNG (see gen_data_fixtures.py: pathfinder_pixels).
std::vector<int32_t> pathfinder_pixels(int32_t sid) {
  std::vector<int32_t> px{sid};
  for (int32_t k = 1; k < 16; ++k) px.push_back((37 * sid + 11 * k) % 256);
  return px;
}

}  // namespace

TEST_CASE("text: label<TAB>text TSV, byte + 1 ids, truncation and errors", "[data]") {
  const Dataset d = read_text_tsv(kFixtures + "/text.tsv", 100);
  CHECK(d.name == "text");
  CHECK(d.vocab_size == 257);
  CHECK(d.num_classes == 3);  // labels 0, 1, 2 seen
  CHECK_FALSE(d.paired);
  REQUIRE(d.examples.size() == 3);
  CHECK(d.examples[0].label == 1);
  CHECK(d.examples[0].tokens == bytes_plus_one("Great movie<br />"));
  CHECK(d.examples[1].tokens == bytes_plus_one("Bad\tfilm"));  // text after the first tab; "\r\n" end
  CHECK(d.examples[2].tokens == std::vector<int32_t>{'c' + 1, 'a' + 1, 'f' + 1, 0xC3 + 1, 0xA9 + 1});
  const Dataset cut = read_text_tsv(kFixtures + "/text.tsv", 5);
  CHECK(cut.examples[0].tokens == bytes_plus_one("Great"));
  CHECK(cut.examples[1].tokens == bytes_plus_one("Bad\tf"));

  CHECK_THROWS_WITH(read_text_tsv(kFixtures + "/text_bad_label.tsv", 10),
                    Catch::Contains("text_bad_label.tsv:2:") && Catch::Contains("bad label 'x'"));
  CHECK_THROWS_WITH(read_text_tsv(kFixtures + "/text_no_tab.tsv", 10),
                    Catch::Contains("text_no_tab.tsv:3:") && Catch::Contains("no tab"));
  CHECK_THROWS_WITH(read_text_tsv(kFixtures + "/missing.tsv", 10),
                    Catch::Contains("missing.tsv") && Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(read_text_tsv(kFixtures + "/text.tsv", 0), Catch::Contains("max_length"));
}

TEST_CASE("text: the aclImdb folder layout, neg then pos, files in sorted order", "[data]") {
  const Dataset train = read_imdb_folder(kFixtures + "/aclImdb", "train", 4);
  REQUIRE(train.examples.size() == 3);  // train/unsup is not read
  CHECK(train.examples[0].tokens == bytes_plus_one("dull"));  // neg/0_3.txt before neg/1_1.txt
  CHECK(train.examples[0].label == 0);
  CHECK(train.examples[1].tokens == bytes_plus_one("awfu"));  // truncated to 4 bytes
  CHECK(train.examples[1].label == 0);
  CHECK(train.examples[2].tokens == bytes_plus_one("supe"));
  CHECK(train.examples[2].label == 1);
  CHECK(train.num_classes == 2);
  CHECK(train.vocab_size == 257);
  const Dataset test = read_imdb_folder(kFixtures + "/aclImdb", "test", 100);
  REQUIRE(test.examples.size() == 3);
  CHECK(test.examples[1].tokens == bytes_plus_one("wow"));  // pos/0_10.txt before pos/1_8.txt
  CHECK(test.examples[2].tokens == bytes_plus_one("nice"));
  CHECK(read_imdb_folder(kFixtures + "/aclImdb", "val", 100).examples.size() == 3);  // = test
  CHECK_THROWS_WITH(read_imdb_folder(kFixtures + "/no_imdb", "train", 10),
                    Catch::Contains("no_imdb/train/neg") && Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(read_imdb_folder(kFixtures + "/aclImdb", "unsup", 10), Catch::Contains("split"));
}

TEST_CASE("retrieval: the 5-column AAN TSV", "[data]") {
  const Dataset d = read_retrieval_tsv(kFixtures + "/retrieval.tsv", 20000);
  CHECK(d.name == "retrieval");
  CHECK(d.paired);
  CHECK(d.vocab_size == 257);
  CHECK(d.num_classes == 2);
  REQUIRE(d.examples.size() == 3);
  CHECK(d.examples[0].label == 1);
  CHECK(d.examples[0].tokens == bytes_plus_one("first doc"));
  CHECK(d.examples[0].tokens2 == bytes_plus_one("second \"quoted\" doc"));  // quotes are literal
  CHECK(d.examples[1].label == 0);      // "0.0" parses as a float
  CHECK(d.examples[1].tokens.size() == 10000);  // the 10,005-byte text keeps its first 10,000
  CHECK(d.examples[1].tokens[9999] == int32_t('a' + 9999 % 26) + 1);
  CHECK(d.examples[2].label == 1);      // "1.0"
  const Dataset cut = read_retrieval_tsv(kFixtures + "/retrieval.tsv", 4);
  CHECK(cut.examples[0].tokens == bytes_plus_one("firs"));
  CHECK(cut.examples[0].tokens2 == bytes_plus_one("seco"));
  CHECK(cut.examples[1].tokens2 == bytes_plus_one("x"));
  CHECK_THROWS_WITH(read_retrieval_tsv(kFixtures + "/retrieval_bad_columns.tsv", 10),
                    Catch::Contains("retrieval_bad_columns.tsv:2:") && Catch::Contains("got 4"));
  CHECK_THROWS_WITH(read_retrieval_tsv(kFixtures + "/retrieval_bad_label.tsv", 10),
                    Catch::Contains("retrieval_bad_label.tsv:1:") && Catch::Contains("bad label '0.5'"));
  CHECK_THROWS_WITH(read_retrieval_tsv(kFixtures + "/nope.tsv", 10), Catch::Contains("nope.tsv"));
}

TEST_CASE("image: CIFAR-10 binary records to TensorFlow's grayscale bytes", "[data]") {
  // Hand-derived cases (see data/image.h): u = ⌊E + E/510⌋ with E the luma on the 0..255 scale.
  CHECK(int(cifar_gray(0, 0, 0)) == 0);
  CHECK(int(cifar_gray(255, 255, 255)) == 255);  // E = 254.97 → ⌊255.47⌋
  CHECK(int(cifar_gray(0, 1, 0)) == 0);          // E = 0.587: truncation, where round() gives 1
  CHECK(int(cifar_gray(1, 1, 1)) == 1);          // E = 0.9999 → ⌊1.0001⌋, where ⌊E⌋ gives 0
  CHECK(int(cifar_gray(255, 0, 0)) == 76);       // E = 76.22
  for (int v = 0; v < 256; ++v) REQUIRE(int(cifar_gray(uint8_t(v), uint8_t(v), uint8_t(v))) == v);

  const Dataset d = read_cifar10_gray({kFixtures + "/cifar_2.bin"});
  CHECK(d.name == "image");
  CHECK(d.vocab_size == 256);
  CHECK(d.num_classes == 10);
  REQUIRE(d.examples.size() == 2);
  CHECK(d.examples[0].label == 3);
  CHECK(d.examples[1].label == 9);
  // Expected bytes from the fixture script's emulated-float32 TensorFlow pipeline.
  std::ifstream expected_in(kFixtures + "/cifar_2_gray.txt");
  for (const Example& e : d.examples) {
    REQUIRE(e.tokens.size() == 1024);
    std::vector<int32_t> expected(1024);
    for (int32_t& v : expected) REQUIRE(expected_in >> v);
    CHECK(e.tokens == expected);
    CHECK(e.tokens[0] == 255);  // white
    CHECK(e.tokens[1] == 0);    // black stays token 0
  }
  // Several files are concatenated in order.
  CHECK(read_cifar10_gray({kFixtures + "/cifar_2.bin", kFixtures + "/cifar_2.bin"}).examples.size() == 4);

  CHECK_THROWS_WITH(read_cifar10_gray({kFixtures + "/cifar_bad_size.bin"}),
                    Catch::Contains("cifar_bad_size.bin") && Catch::Contains("3074 bytes") &&
                        Catch::Contains("3073"));
  CHECK_THROWS_WITH(read_cifar10_gray({kFixtures + "/cifar_2.bin", kFixtures + "/cifar_bad_label.bin"}),
                    Catch::Contains("cifar_bad_label.bin") && Catch::Contains("record 0") &&
                        Catch::Contains("label 10"));
  CHECK_THROWS_WITH(read_cifar10_gray({kFixtures + "/data_batch_9.bin"}),
                    Catch::Contains("data_batch_9.bin") && Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(read_cifar10_gray({}), Catch::Contains("no batch files"));
}

TEST_CASE("pathfinder: PNG decoding", "[data]") {
  int64_t h = 0, w = 0;
  const auto gray1 = read_gray_png(kFixtures + "/png/gray1.png", &h, &w);  // 1-bit, expanded
  CHECK(h == 1);
  CHECK(w == 8);
  CHECK(gray1 == std::vector<uint8_t>{255, 0, 255, 255, 0, 0, 0, 0});
  const auto px = read_gray_png(kFixtures + "/pathfinder/imgs/0/sample_3.png", &h, &w);
  CHECK(h == 4);
  CHECK(w == 4);
  const auto expected = pathfinder_pixels(3);
  CHECK(std::vector<int32_t>(px.begin(), px.end()) == expected);
  CHECK_THROWS_WITH(read_gray_png(kFixtures + "/png/rgb.png", &h, &w),
                    Catch::Contains("rgb.png") && Catch::Contains("colour") &&
                        Catch::Contains("8-bit grayscale"));
  CHECK_THROWS_WITH(read_gray_png(kFixtures + "/png/gray16.png", &h, &w),
                    Catch::Contains("gray16.png") && Catch::Contains("16-bit"));
  CHECK_THROWS_WITH(read_gray_png(kFixtures + "/png/not_a_png.png", &h, &w),
                    Catch::Contains("not_a_png.png") && Catch::Contains("not a readable PNG"));
  CHECK_THROWS_WITH(read_gray_png(kFixtures + "/png/absent.png", &h, &w),
                    Catch::Contains("absent.png") && Catch::Contains("does not exist"));
}

TEST_CASE("pathfinder: metadata, empty PNGs skipped, seeded 80/10/10 split", "[data]") {
  const std::string root = kFixtures + "/pathfinder";
  // 11 listed samples, 1 empty PNG → 10 valid: 8 train, 1 val, 1 test.
  std::set<int32_t> seen;
  for (const auto& [split, size] : {std::pair{"train", 8}, {"val", 1}, {"test", 1}}) {
    const Dataset d = read_pathfinder(root, split, /*seed=*/5);
    CHECK(d.name == "pathfinder");
    CHECK(d.vocab_size == 256);
    CHECK(d.num_classes == 2);
    REQUIRE(int64_t(d.examples.size()) == size);
    for (const Example& e : d.examples) {
      REQUIRE(e.tokens.size() == 16);
      const int32_t sid = e.tokens[0];  // the fixture writes the sample id into pixel 0
      CHECK(e.tokens == pathfinder_pixels(sid));
      CHECK(e.label == sid % 2);
      CHECK(seen.insert(sid).second);  // no sample in two splits
    }
  }
  CHECK(seen == std::set<int32_t>{0, 1, 2, 3, 4, 5, 10, 11, 13, 14});  // 12 is the empty PNG

  // Deterministic by seed; another seed gives another order.
  auto order = [&](uint64_t seed) {
    std::vector<int32_t> ids;
    for (const Example& e : read_pathfinder(root, "train", seed).examples) ids.push_back(e.tokens[0]);
    return ids;
  };
  CHECK(order(5) == order(5));
  CHECK(order(5) != order(6));

  CHECK_THROWS_WITH(read_pathfinder(kFixtures + "/pathfinder_bad", "train", 0),
                    Catch::Contains("0.npy:2:") && Catch::Contains("bad label '2'"));
  CHECK_THROWS_WITH(read_pathfinder(kFixtures + "/pathfinder_missing", "train", 0),
                    Catch::Contains("0.npy:1:") && Catch::Contains("imgs/0/sample_9.png"));
  CHECK_THROWS_WITH(read_pathfinder(kFixtures + "/nowhere", "train", 0),
                    Catch::Contains("nowhere/metadata") && Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(read_pathfinder(root, "dev", 0), Catch::Contains("split"));
}
