// Reliability regressions (issue #15): hostile inputs found by probing the engine as an outside
// user would — overflowing shapes and byte counts, files that are not regular files, silent
// wrong values, messages that hide what is wrong. Each case names the defect it pins down.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "helpers.h"
#include "run_helpers.h"
#include "lsformer/data/listops.h"
#include "lsformer/engine/file_read.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/lra_task.h"

using namespace lsf;
using Catch::Matchers::Contains;

namespace {

// A fresh, empty directory under the system's temporary directory.
std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("lsf_reliability_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}
}  // namespace

TEST_CASE("shape products and byte counts are checked for overflow in every factory", "[reliability][memory]") {
  const int64_t big = int64_t(1) << 31;
  // 2^62 elements of f32 are 2^64 bytes: the unchecked product wrapped to 0 bytes.
  REQUIRE_THROWS_WITH(zeros({big, big}), Contains("{2147483648, 2147483648}") && Contains("limit"));
  REQUIRE_THROWS_WITH(empty({big, big}, kF64), Contains("{2147483648, 2147483648}"));
  REQUIRE_THROWS_WITH(ones({int64_t(1) << 40, int64_t(1) << 40}), Contains("more elements than a 64-bit count"));
  REQUIRE_THROWS_WITH(full({big, big, 4}, 1.0), Contains("more elements than a 64-bit count"));
  REQUIRE_THROWS_WITH(randn({big, big}), Contains("limit"));
  REQUIRE_THROWS_WITH(rand({big, big}), Contains("limit"));
  REQUIRE_THROWS_WITH(empty({2, -3}), Contains("negative dimension"));
  REQUIRE_THROWS_WITH(arange(0.0, 1e30, 1.0), Contains("arange") && Contains("more than one tensor can hold"));
  // The checked helpers themselves.
  CHECK(shape_numel({3, 0, int64_t(1) << 62}) == 0);
  CHECK(checked_nbytes({2, 3}, kF64, "t") == 48);
  REQUIRE_THROWS_WITH(checked_nbytes({int64_t(1) << 61}, kF32, "probe"), Contains("probe") && Contains("limit"));
  REQUIRE_THROWS_WITH(shape_numel({int64_t(1) << 32, int64_t(1) << 32}), Contains("{4294967296, 4294967296}"));
  // Small and empty shapes still work.
  CHECK(zeros({0, big}).numel() == 0);
  CHECK(zeros({2, 3}).nbytes() == 24);
}

TEST_CASE("safetensors headers with overflowing or huge shapes are errors, not allocations", "[reliability][memory]") {
  // F32 [2^31, 2^31] needs 2^64 bytes; with the wrapped product it passed as 0 bytes with no data.
  REQUIRE_THROWS_WITH(parse_safetensors(testing::safetensors_bytes(R"({"w":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,0]}})", ""), "x.safetensors"),
                      Contains("x.safetensors") && Contains("'w'") && Contains("{2147483648, 2147483648}"));
  // 2^60 one-byte elements: representable, but the file cannot hold them; refused before any
  // allocation (the tiling check runs first, so the test does not need 1 EiB to fail).
  REQUIRE_THROWS_WITH(parse_safetensors(testing::safetensors_bytes(R"({"w":{"dtype":"U8","shape":[1152921504606846976],"data_offsets":[0,1152921504606846976]}})", "")),
                      Contains("truncated file"));
  REQUIRE_THROWS_WITH(parse_safetensors(testing::safetensors_bytes(R"({"w":{"dtype":"U8","shape":[1152921504606846976],"data_offsets":[0,0]}})", "")),
                      Contains("needs 1152921504606846976"));
  // A dimension beyond int64.
  REQUIRE_THROWS_WITH(parse_safetensors(testing::safetensors_bytes(R"({"w":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,0]}})", "")),
                      Contains("beyond the 64-bit signed range"));
  // Products that overflow int64 across dimensions.
  REQUIRE_THROWS_WITH(parse_safetensors(testing::safetensors_bytes(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296,4],"data_offsets":[0,0]}})", "")),
                      Contains("more elements than a 64-bit count"));
}

TEST_CASE("only regular files are read: devices, FIFOs and directories are named errors", "[reliability][files]") {
  // /dev/zero never ends: it used to be read until memory ran out.
  REQUIRE_THROWS_WITH(load_safetensors("/dev/zero"), Contains("'/dev/zero': it is a character device, not a regular file"));
  const auto dir = scratch_dir("files");
  REQUIRE_THROWS_WITH(load_safetensors(dir.string()), Contains("'" + dir.string() + "': it is a directory"));
  // A FIFO with no writer: opening it for reading blocked forever.
  const std::string fifo = (dir / "pipe").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE_THROWS_WITH(load_safetensors(fifo), Contains("it is a FIFO"));
  REQUIRE_THROWS_WITH(read_regular_file(fifo, 1024, "cannot read config file"), Contains("cannot read config file '" + fifo + "': it is a FIFO"));
  REQUIRE_THROWS_WITH(load_safetensors((dir / "missing").string()), Contains("no such file"));
  // Header first: a large file that is not safetensors is refused from its first 8 bytes.
  const std::string junk = (dir / "junk.safetensors").string();
  { std::ofstream(junk, std::ios::binary) << std::string(64, '\xff'); }
  REQUIRE_THROWS_WITH(load_safetensors(junk), Contains("exceeds the") && Contains("not a safetensors file"));
  // The size cap of read_regular_file.
  REQUIRE_THROWS_WITH(read_regular_file(junk, 16, "config file"), Contains("it holds 64 bytes, more than the 16-byte limit"));
  CHECK(read_regular_file(junk, 64, "config file").size() == 64);
  // A valid file still loads through the new path.
  const std::string ok = (dir / "ok.safetensors").string();
  save_safetensors(ok, {{"a", ones({2})}});
  CHECK(load_safetensors(ok).tensors.at("a").numel() == 2);
  std::filesystem::remove_all(dir);
}

namespace {
// A tiny in-memory ListOps config (no file needed).
const std::string kGenerated = R"({
  "data": {"task": "listops", "generate": {"enabled": true, "train": 20, "dev": 4, "test": 4,
                                           "min_length": 4, "max_length": 20, "max_depth": 3, "max_args": 4}},
  "model": {"vocab_size": 16, "max_seq_len": 32, "dim": 16, "heads": 2, "ffn_dim": 32, "window": 4, "rank": 4},
  "schedule": {"name": "constant"},
  "train": {"steps": 10, "batch_size": 4}
})";

// True when `s` holds no control byte but newline and tab, and is valid UTF-8 (what a terminal
// can show).
bool printable(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 && c != '\n' && c != '\t') return false;
    if (c == 0x7f) return false;
    if (c >= 0x80) {
      size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
      if (n == 0 || i + n > s.size()) return false;
      for (size_t k = 1; k < n; ++k)
        if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
      i += n - 1;
    }
  }
  return true;
}
}  // namespace

TEST_CASE("integers beyond int64 in a config are range errors, never negative numbers", "[reliability][values]") {
  REQUIRE_THROWS_WITH(train::parse_config(kGenerated, {"train.steps=9223372036854775808"}),
                      Contains("'train.steps' = 9223372036854775808 is out of range"));
  std::string text = kGenerated;
  text.replace(text.find("\"steps\": 10"), 11, "\"steps\": 18446744073709551615");
  REQUIRE_THROWS_WITH(train::parse_config(text, {}, "x.json"),
                      Contains("x.json: 'train.steps' = 18446744073709551615 is out of range") && !Contains("-"));
  CHECK(train::parse_config(kGenerated, {"train.steps=9223372036854775807", "train.eval_every=0"}).train.steps ==
        std::numeric_limits<int64_t>::max());
}

TEST_CASE("config: --set of a whole section merges, and a data path beside generation is an error", "[reliability][values]") {
  // Replacing a section dropped the file's values (and earlier --set's) for the defaults; the
  // object is now merged key by key.
  const train::RunConfig kept = train::parse_config(kGenerated, {"train.steps=5", "train={}"});
  CHECK(kept.train.steps == 5);
  CHECK(kept.train.batch_size == 4);  // the file's value, not the default 32
  const train::RunConfig merged = train::parse_config(kGenerated, {"data.generate={\"train\": 3}", "train={\"log_every\": 2}"});
  const auto& generate = train::lra_sections(merged).data.generate;
  CHECK((generate.enabled && generate.train == 3 && generate.dev == 4 && generate.max_length == 20));
  CHECK((merged.train.log_every == 2 && merged.train.steps == 10 && merged.train.batch_size == 4));
  REQUIRE_THROWS_WITH(train::parse_config(kGenerated, {"train=5"}),
                      Contains("'train' is a section: its value must be a JSON object of its keys, got '5'"));
  REQUIRE_THROWS_WITH(train::parse_config(kGenerated, {"train={\"stps\": 5}"}), Contains("unknown key 'train.stps'"));
  REQUIRE_THROWS_WITH(train::parse_config(kGenerated, {"train={\"steps\": null}"}), Contains("'train.steps' must be an integer"));
  // With generation on, data.path used to be ignored without a word.
  REQUIRE_THROWS_WITH(train::parse_config(kGenerated, {"data.path=/data/listops-1000"}),
                      Contains("'data.path' is \"/data/listops-1000\"") && Contains("'data.generate.enabled' is true"));
  REQUIRE_THROWS_WITH(train::parse_config(kGenerated, {"data.files.dev=dev.tsv"}), Contains("'data.files.dev'"));
  CHECK(train::parse_config(kGenerated, {"data.path=/data/listops-1000", "data.generate.enabled=false"}).task == "listops");
}

TEST_CASE("ListOps rows with unbalanced or missing brackets are rejected naming file and line", "[reliability][values]") {
  using data::check_listops_expression;
  CHECK_NOTHROW(check_listops_expression("( ( ( ( [MAX 1 ) 7 ) 2 ) ] )", "x"));
  CHECK_NOTHROW(check_listops_expression("( ( ( [SM ( ( ( [MIN 3 ) 4 ) ] ) ) 5 ) X )", "x"));
  CHECK_NOTHROW(check_listops_expression("7", "x"));
  CHECK_THROWS_WITH(check_listops_expression("] ] ] ) ) )", "f.tsv:4"), Contains("f.tsv:4: ']' (token 1) closes no operator"));
  CHECK_THROWS_WITH(check_listops_expression("( ( [MAX 1 2", "f.tsv:5"),
                    Contains("f.tsv:5: operator [MAX (token 3) is never closed"));
  CHECK_THROWS_WITH(check_listops_expression("1 2 3", "f.tsv:6"), Contains("f.tsv:6: token 2 starts a second expression"));
  CHECK_THROWS_WITH(check_listops_expression("( [MAX 1 ] ) )", "r"), Contains("')' (token 6) closes nothing"));
  CHECK_THROWS_WITH(check_listops_expression("( ( [MAX 1 ] )", "r"), Contains("1 '(' never closed"));
  CHECK_THROWS_WITH(check_listops_expression("[MAX ]", "r"), Contains("[MAX (token 1) has no arguments"));
  CHECK_THROWS_WITH(check_listops_expression("( )", "r"), Contains("empty ListOps expression"));
  CHECK_THROWS_WITH(data::listops_dataset({{"[MIN 1 ]", 1}, {"1 2 3", 2}}), Contains("row 1: token 2 starts a second"));

  const auto dir = scratch_dir("listops");
  const std::string path = (dir / "basic_train.tsv").string();
  { std::ofstream(path) << "Source\tTarget\n( ( ( [MAX 1 ) 2 ) ] )\t2\n] ] ] ) ) )\t1\n"; }
  CHECK_THROWS_WITH(data::read_listops_tsv(path), Contains(path + ":3: ']' (token 1) closes no operator"));
  { std::ofstream(path) << "Source\tTarget\n( ( [MAX 1 2\t2\n"; }
  CHECK_THROWS_WITH(data::read_listops_tsv(path), Contains(path + ":2: operator [MAX"));
  { std::ofstream(path) << "Source\tTarget\n( ( ( [MAX 1 ) 2 ) ] )\t2\n"; }
  CHECK(data::read_listops_tsv(path).examples.size() == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("odd --set keys, invalid UTF-8 and directories give lsf::Error naming the key or path", "[reliability][messages]") {
  // These reached nlohmann's own exceptions ("[json.exception.parse_error.108] ...").
  for (const char* key : {"train.st~eps=1", "train/steps=1", "~=1", "train.steps.x=1", "a~1b.c=2"})
    CHECK_THROWS_AS(train::parse_config(kGenerated, {key}), Error);
  CHECK_THROWS_WITH(train::parse_config(kGenerated, {"train.st~eps=1"}), Contains("unknown key 'train.st~eps'"));
  CHECK_THROWS_WITH(train::parse_config(kGenerated, {"train/steps=1"}), Contains("unknown key 'train/steps'"));
  // Invalid UTF-8 in a string value: nlohmann threw type_error 316 when writing config.json.
  const std::string bad = "description=caf\xe9 \xff";
  CHECK_THROWS_WITH(train::parse_config(kGenerated, {bad}),
                    Contains("--set: the value of 'description' is not valid UTF-8: 'caf\\xe9 \\xff'"));
  // ... and in the file itself.
  std::string text = kGenerated;
  text.insert(1, "\"description\": \"\xc3\x28\",");
  CHECK_THROWS_WITH(train::parse_config(text, {}, "u.json"), Contains("u.json: not valid JSON"));
  // A directory as --config: was "not valid JSON".
  const auto dir = scratch_dir("config_dir");
  CHECK_THROWS_WITH(train::load_config(dir.string()),
                    Contains("cannot read config file '" + dir.string() + "': it is a directory"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("NUL and binary bytes in messages are escaped, never echoed raw or cutting the message", "[reliability][messages]") {
  try {
    LSF_FAIL() << "before " << std::string("a\0b", 3) << " after \x01\x7f caf\xc3\xa9 \xff\xfe";
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Contains("before a\\x00b after \\x01\\x7f caf\xc3\xa9 \\xff\\xfe"));
    CHECK(printable(what));
  }
  // A binary header: the parse error quoted its bytes raw.
  const std::string junk = testing::safetensors_bytes(std::string("{\"a\xff\x00\x01\x80\"", 8), "");
  try {
    parse_safetensors(junk, "bin.safetensors");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Contains("bin.safetensors"));
    CHECK(printable(e.what()));
  }
  // A multi-line message keeps its lines.
  CHECK_THROWS_WITH([] { LSF_FAIL() << "one\ntwo\tthree"; }(), Contains("one\ntwo\tthree"));
}
