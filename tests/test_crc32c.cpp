// CRC-32C (engine/crc32c.h): the published check values, and the crc32-instruction path equal to
// the table at every length and alignment.
#include <string>
#include <vector>

#include "helpers.h"
#include "lsformer/engine/crc32c.h"

using namespace lsf;

TEST_CASE("crc32c matches the published check values", "[crc32c]") {
  for (auto crc : {+[](std::string_view s) { return crc32c(s); },
                   +[](std::string_view s) { return detail::crc32c_table(s.data(), s.size()); }}) {
    CHECK(crc("") == 0x00000000u);
    CHECK(crc("123456789") == 0xE3069283u);  // the CRC catalogue's check value
    CHECK(crc("a") == 0xC1D04330u);
    // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, of 0xFF, and ascending 0..31.
    const std::string zeros(32, '\0'), ones(32, '\xFF');
    std::string ascending;
    for (int i = 0; i < 32; ++i) ascending += char(i);
    CHECK(crc(zeros) == 0x8A9136AAu);
    CHECK(crc(ones) == 0x62A8AB43u);
    CHECK(crc(ascending) == 0x46DD794Eu);
  }
}

TEST_CASE("crc32c: the fast path equals the table for every length and alignment", "[crc32c]") {
  // Lengths 0 … 40 at offsets 0 … 7 (the eight-byte steps, their head and tail), and 1 MiB.
  Generator g(5);
  const std::vector<double> noise = rand({(1 << 20) + 8}, kF64, &g).to_vector<double>();
  std::vector<unsigned char> bytes(noise.size());
  for (size_t i = 0; i < noise.size(); ++i) bytes[i] = static_cast<unsigned char>(noise[i] * 256);
  for (size_t offset = 0; offset < 8; ++offset)
    for (size_t length = 0; length <= 40; ++length) {
      INFO("offset " << offset << ", length " << length);
      CHECK(crc32c(bytes.data() + offset, length) == detail::crc32c_table(bytes.data() + offset, length));
    }
  CHECK(crc32c(bytes.data() + 3, 1 << 20) == detail::crc32c_table(bytes.data() + 3, 1 << 20));
  // One changed bit changes the CRC (a CRC detects every single-bit error).
  const uint32_t before = crc32c(bytes.data(), 4096);
  bytes[1234] ^= 0x10;
  CHECK(crc32c(bytes.data(), 4096) != before);
}
