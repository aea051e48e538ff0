// safetensors I/O: the upstream test vector, round trips of every dtype, layout rules, atomic
// writes, and one clear error for each kind of malformed file.
#include <filesystem>
#include <fstream>

#include "helpers.h"
#include "run_helpers.h"

using namespace lsf;


TEST_CASE("the upstream unit-test vector loads as one I32 2x2 zero tensor", "[safetensors]") {
  std::string json = R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})";
  REQUIRE(json.size() == 0x3c);
  auto c = parse_safetensors(testing::safetensors_bytes(json, std::string(16, '\0')));
  REQUIRE(c.tensors.size() == 1);
  test::check_equal<int32_t>(c.tensors.at("test"), {2, 2}, {0, 0, 0, 0});
  CHECK(c.metadata.empty());
}

TEST_CASE("every dtype round-trips bit-exactly with metadata", "[safetensors]") {
  manual_seed(3);
  NamedTensors in = {
      {"w.f32", randn({3, 4})},
      {"w.f64", randn({2}, kF64)},
      {"w.bf16", randn({5}).to(kBF16)},
      {"w.f16", randn({2, 3}).to(kF16)},
      {"n.i32", tensor(std::vector<int32_t>{-1, 7})},
      {"n.i64", scalar_tensor(42, kI64)},  // 0-rank
      {"n.u8", tensor(std::vector<uint8_t>{0, 255})},
      {"n.bool", tensor(std::vector<bool>{true, false, true})},
      {"empty", zeros({0, 4})},
      {"view", arange(0.0, 12.0, 1.0).view({3, 4}).t()},  // non-contiguous: saved as its values
  };
  std::string bytes = serialize_safetensors(in, {{"format", "pt"}, {"step", "10"}});
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);  // the data buffer starts 8-byte aligned
  auto out = parse_safetensors(bytes);
  CHECK(out.metadata == Metadata{{"format", "pt"}, {"step", "10"}});
  REQUIRE(out.tensors.size() == in.size());
  for (const auto& [name, t] : in) {
    INFO(name);
    const Tensor& u = out.tensors.at(name);
    CHECK(u.dtype() == t.dtype());
    CHECK(u.shape() == t.shape());
    Tensor tc = t.contiguous();
    CHECK(std::memcmp(u.raw_data(), tc.raw_data(), tc.nbytes()) == 0);
  }
  // Alignment order: 8-byte dtypes first, then 4, 2, 1; names sorted within a size.
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  CHECK(header["n.i64"]["data_offsets"][0] == 0);
  CHECK(header["w.f64"]["data_offsets"][0] == 8);
  CHECK(header["__metadata__"]["format"] == "pt");
}

TEST_CASE("saving is atomic and refuses bad names", "[safetensors]") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("lsf_st_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string path = (dir / "model.safetensors").string();
  save_safetensors(path, {{"a", ones({2})}});
  save_safetensors(path, {{"a", zeros({3})}});  // replaces the old file in one rename
  auto c = load_safetensors(path);
  test::check_equal<float>(c.tensors.at("a"), {3}, {0, 0, 0});
  size_t files = 0;
  for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 1);  // no temporary left behind
  CHECK_THROWS_WITH(save_safetensors(path, {{"a", ones({1})}, {"a", ones({1})}}), Catch::Contains("duplicate"));
  CHECK_THROWS_WITH(save_safetensors(path, {{"__metadata__", ones({1})}}), Catch::Contains("reserved"));
  CHECK_THROWS_WITH(save_safetensors((dir / "no/such/dir/x").string(), {{"a", ones({1})}}), Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(load_safetensors((dir / "missing.safetensors").string()), Catch::Contains("no such file"));
  fs::remove_all(dir);
}

TEST_CASE("malformed files each give their own error", "[safetensors]") {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data(8, '\0');
  auto fails = [](const std::string& bytes, const std::string& expect) {
    INFO("expecting: " << expect);
    CHECK_THROWS_WITH(parse_safetensors(bytes), Catch::Contains(expect));
  };
  REQUIRE_NOTHROW(parse_safetensors(testing::safetensors_bytes(ok, data)));
  fails(std::string(5, '\0'), "truncated");
  fails(testing::safetensors_bytes(ok, data).substr(0, 20), "runs past the end");
  std::string huge(8, '\0');
  uint64_t big = 200'000'000;
  std::memcpy(huge.data(), &big, 8);
  fails(huge, "exceeds the");
  fails(testing::safetensors_bytes(R"(["a"])", ""), "must start with '{'");
  fails(testing::safetensors_bytes(R"({"a":)", ""), "not valid JSON");
  fails(testing::safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data), "duplicate entry 'a'");
  fails(testing::safetensors_bytes(R"({"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", data), "unknown dtype 'Q7'");
  fails(testing::safetensors_bytes(R"({"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", data), "does not support");
  fails(testing::safetensors_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data), "needs 12");
  fails(testing::safetensors_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data), "non-negative integer");
  fails(testing::safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data), "begin after end");
  fails(testing::safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", data), "unknown field 'x'");
  fails(testing::safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2]}})", data), "data_offsets");
  fails(testing::safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data), "starts at byte 4");
  fails(testing::safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, '\0')), "expected 8");
  fails(testing::safetensors_bytes(ok, data + "xx"), "trailing bytes");
  fails(testing::safetensors_bytes(ok, data.substr(0, 4)), "truncated file");
  fails(testing::safetensors_bytes(R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data), "not a string");
  fails(testing::safetensors_bytes(R"({"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", std::string(1, '\x07')), "only 0 and 1");
}

TEST_CASE("random corruptions of a valid file never crash", "[safetensors]") {
  std::string good = serialize_safetensors({{"x", randn({4, 4})}, {"y", arange(3)}}, {{"k", "v"}});
  Generator g(11);
  Tensor picks = rand({2000}, kF64, &g);
  auto p = picks.to_vector<double>();
  int errors = 0;
  for (size_t i = 0; i + 1 < p.size(); i += 2) {
    std::string bad = good;
    size_t at = size_t(p[i] * double(bad.size()));
    bad[at] = char(int(p[i + 1] * 256));
    try {
      parse_safetensors(bad);
    } catch (const Error&) {
      ++errors;
    }
  }
  // Each truncation is an error, too.
  for (size_t len = 0; len < good.size(); len += 7) CHECK_THROWS_AS(parse_safetensors(good.substr(0, len)), Error);
  CHECK(errors > 0);
}

TEST_CASE("checksums: a changed byte in a tensor or in the header is an error naming it", "[safetensors]") {
  manual_seed(4);
  const NamedTensors in = {{"w", randn({3, 4})}, {"b", randn({4})}, {"n", tensor(std::vector<int32_t>{1, 2, 3})}};
  const std::string good = serialize_safetensors(in, {{"step", "10"}});
  uint64_t n;
  std::memcpy(&n, good.data(), 8);
  const auto header = nlohmann::json::parse(good.substr(8, n));
  // The key holds the header's and every tensor's CRC; loading returns the caller's metadata only.
  const std::string sums = header["__metadata__"][kSafetensorsChecksumKey].get<std::string>();
  CHECK(nlohmann::json::parse(sums)["tensors"].size() == 3);
  CHECK(parse_safetensors(good).metadata == Metadata{{"step", "10"}});

  // Each tensor: one flipped bit in its bytes.
  for (const char* name : {"w", "b", "n"}) {
    INFO(name);
    const uint64_t begin = header[name]["data_offsets"][0].get<uint64_t>();
    const uint64_t end = header[name]["data_offsets"][1].get<uint64_t>();
    for (uint64_t at : {begin, (begin + end) / 2, end - 1}) {
      std::string bad = good;
      bad[8 + n + at] ^= 0x04;
      CHECK_THROWS_WITH(parse_safetensors(bad), Catch::Contains(std::string("tensor '") + name + "' fails its CRC-32C"));
    }
  }
  // The header: a metadata value, a dtype of the same width (F32 → I32 still tiles the buffer)
  // and a shape of the same size, each changed in place and still valid JSON.
  auto replaced = [&](const std::string& from, const std::string& to) {
    REQUIRE(from.size() == to.size());
    std::string bad = good;
    const size_t at = bad.find(from, 8);
    REQUIRE(at != std::string::npos);
    REQUIRE(at < 8 + n);
    bad.replace(at, from.size(), to);
    return bad;
  };
  CHECK_THROWS_WITH(parse_safetensors(replaced(R"("step":"10")", R"("step":"11")")), Catch::Contains("header's CRC-32C"));
  CHECK_THROWS_WITH(parse_safetensors(replaced(R"("dtype":"F32","shape":[3,4])", R"("dtype":"I32","shape":[3,4])")),
                    Catch::Contains("header's CRC-32C"));
  CHECK_THROWS_WITH(parse_safetensors(replaced(R"("shape":[3,4])", R"("shape":[4,3])")), Catch::Contains("header's CRC-32C"));
  // The checksum entry itself damaged.
  const std::string crc_w = nlohmann::json::parse(sums)["tensors"]["w"].get<std::string>();
  std::string other = crc_w;
  other[0] = other[0] == '0' ? '1' : '0';
  CHECK_THROWS_WITH(parse_safetensors(replaced(crc_w, other)), Catch::Contains("tensor 'w' fails its CRC-32C"));
  CHECK_THROWS_WITH(parse_safetensors(replaced(R"(\"tensors\")", R"(\"tensorz\")")), Catch::Contains("malformed"));

  // Without checksums the same flip loads: nothing can tell (files of other tools are read so).
  const std::string unchecked = serialize_safetensors(in, {{"step", "10"}}, /*checksums=*/false);
  CHECK(unchecked.find(kSafetensorsChecksumKey) == std::string::npos);
  std::string flipped = unchecked;
  flipped[flipped.size() - 1] ^= 0x04;
  CHECK_NOTHROW(parse_safetensors(flipped));
  // The key is the file's own.
  CHECK_THROWS_WITH(serialize_safetensors(in, {{kSafetensorsChecksumKey, "x"}}), Catch::Contains("reserved"));
}

TEST_CASE("checksums: a file checksummed from the documented definition alone loads", "[safetensors]") {
  // tests/fuzz/make_seeds.py computes this seed's checksums in Python from docs/data-formats.md
  // §2.1, independently of engine/safetensors.cpp.
  const std::string path = std::string(LSF_FIXTURE_DIR) + "/../fuzz/corpus/fuzz_safetensors/checksummed";
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.find(kSafetensorsChecksumKey) != std::string::npos);
  const SafetensorsContents c = parse_safetensors(bytes, path);
  CHECK(c.metadata == Metadata{{"format", "pt"}, {"lsformer.step", "3"}});
  test::check_equal<float>(c.tensors.at("w"), {2, 2}, {1, 2, 3, 4});
  test::check_equal<int64_t>(c.tensors.at("i"), {1}, {7});
  std::string flipped = bytes;
  flipped.back() ^= 0x01;  // i = 6
  CHECK_THROWS_WITH(parse_safetensors(flipped), Catch::Contains("tensor 'i' fails its CRC-32C"));
}
