// Every input of the fuzzers' corpora (tests/fuzz/corpus/<harness>/: the seeds and the
// regression-* inputs that once crashed a parser) run through the same harness code in the
// ordinary test build, so a fixed crash that comes back fails CI even without clang and the
// sanitizers (scripts/fuzz.sh runs the fuzzers themselves). The config harness is left out: it
// registers a toy family under "listops", which the library's LRA family already serves here.
#include <filesystem>
#include <fstream>
#include <iterator>

#include "helpers.h"
#include "run_helpers.h"

#define LLVMFuzzerTestOneInput fuzz_safetensors_one
#include "fuzz/fuzz_safetensors.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_lra_tsv_one
#include "fuzz/fuzz_lra_tsv.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_cifar_one
#include "fuzz/fuzz_cifar.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_idx_one
#include "fuzz/fuzz_idx.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_image_one
#include "fuzz/fuzz_image.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_corpus_one
#include "fuzz/fuzz_corpus.cpp"
#undef LLVMFuzzerTestOneInput

namespace fs = std::filesystem;

namespace {

const fs::path kCorpus = fs::path(LSF_FIXTURE_DIR) / ".." / "fuzz" / "corpus";

// Runs every file of corpus/<harness> through `one`; returns how many there were.
int run_corpus(const std::string& harness, int (*one)(const uint8_t*, size_t)) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(kCorpus / harness)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(entry.path().string());
    CHECK(one(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
    ++files;
  }
  return files;
}

}  // namespace

TEST_CASE("the fuzz corpora (seeds and crash regressions) parse or fail with lsf::Error", "[fuzz][reliability]") {
  CHECK(run_corpus("fuzz_safetensors", fuzz_safetensors_one) >= 2);
  CHECK(run_corpus("fuzz_lra_tsv", fuzz_lra_tsv_one) >= 3);
  CHECK(run_corpus("fuzz_cifar", fuzz_cifar_one) >= 2);
  CHECK(run_corpus("fuzz_idx", fuzz_idx_one) >= 5);  // with the two regressions fuzzing found
  CHECK(run_corpus("fuzz_image", fuzz_image_one) >= 4);
  CHECK(run_corpus("fuzz_corpus", fuzz_corpus_one) >= 5);
}

TEST_CASE("IDX headers that declare more than the file holds are errors, not allocations", "[fuzz][data]") {
  // The two inputs fuzzing found: 0x0801-typed size 0xE1000003 (3.7 GB) in a 12-byte file, and
  // four sizes whose product overflows int64.
  const fs::path dir = fs::temp_directory_path() / ("lsf_test_idx_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string big = std::string("\0\0\x08\x01\xe1\0\0\x03\x01\x02\x09", 11);
  std::ofstream(dir / "big.idx", std::ios::binary) << big;
  { std::ofstream("/proc/self/clear_refs") << "5"; }  // VmHWM restarts from the current RSS
  const double before = lsf::testing::rss_bytes();
  CHECK_THROWS_WITH(lsf::data::read_idx_u8((dir / "big.idx").string(), 1), Catch::Contains("is truncated"));
  CHECK(lsf::testing::rss_peak_bytes() - before < 64.0 * (1 << 20));  // not the 3.7 GB declared (16 MiB chunks)
  const std::string overflow = std::string("\0\0\x08\x04", 4) + std::string(16, '\xff');
  std::ofstream(dir / "overflow.idx", std::ios::binary) << overflow;
  CHECK_THROWS_WITH(lsf::data::read_idx_u8((dir / "overflow.idx").string(), 4), Catch::Contains("absurd size"));
  fs::remove_all(dir);
}

namespace {
std::string corpus_file(const std::string& harness, const std::string& name) {
  std::ifstream in(kCorpus / harness / name, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
}  // namespace

TEST_CASE("a JPEG header declaring gigabytes of pixels is refused before any allocation", "[fuzz][data]") {
  // Found by fuzzing: 186 bytes declaring 65,280 × 46,600 pixels (3 GB decoded).
  const std::string jpeg = corpus_file("fuzz_image", "regression-oom-jpeg-header-size").substr(1);
  CHECK_THROWS_WITH(lsf::data::decode_jpeg(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), "crafted.jpg", 1),
                    Catch::Contains("crafted.jpg") && Catch::Contains("exceed the 512 MiB a decoded image may take"));
}

TEST_CASE("a zip entry recording more bytes than it holds is an error, not an allocation", "[fuzz][data]") {
  // Found by fuzzing: a 462-byte archive whose entry 'enwik8' records 1.6 GB.
  const std::string file = corpus_file("fuzz_corpus", "regression-oom-zip-recorded-size");
  const fs::path zip = fs::temp_directory_path() / ("lsf_test_zip_" + std::to_string(::getpid()) + ".zip");
  std::ofstream(zip, std::ios::binary) << file.substr(2);
  { std::ofstream("/proc/self/clear_refs") << "5"; }
  const double before = lsf::testing::rss_bytes();
  CHECK_THROWS_AS(lsf::data::read_zip_entry(zip.string(), "enwik8", "enwik8"), lsf::Error);
  CHECK(lsf::testing::rss_peak_bytes() - before < 64.0 * (1 << 20));
  fs::remove(zip);
}
