// CRC-32C (see crc32c.h): the crc32 instruction where the CPU has SSE4.2, a 256-entry table
// built at first use otherwise.
#include "lsformer/engine/crc32c.h"

#include <array>
#include <cstring>

namespace lsf {
namespace {

// table[b] = the CRC of byte b alone (reflected polynomial, no initial value or final xor).
std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    table[b] = crc;
  }
  return table;
}

// The running CRC (no initial value or final xor) over the bytes, byte by byte.
uint32_t table_update(uint32_t crc, const unsigned char* bytes, size_t size) {
  static const std::array<uint32_t, 256> table = make_table();
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xFFu] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same update with the crc32 instruction (it computes exactly this reflected CRC-32C step):
// eight bytes per instruction, the few bytes before and after byte by byte.
[[gnu::target("sse4.2")]] uint32_t hardware_update(uint32_t crc, const unsigned char* bytes, size_t size) {
  uint64_t c = crc;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    c = __builtin_ia32_crc32di(c, word);
  }
  uint32_t c32 = uint32_t(c);
  for (; i < size; ++i) c32 = __builtin_ia32_crc32qi(c32, bytes[i]);
  return c32;
}
bool has_hardware_crc() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
#if defined(__x86_64__) && defined(__GNUC__)
  if (has_hardware_crc()) return hardware_update(0xFFFFFFFFu, bytes, size) ^ 0xFFFFFFFFu;
#endif
  return table_update(0xFFFFFFFFu, bytes, size) ^ 0xFFFFFFFFu;
}

namespace detail {
uint32_t crc32c_table(const void* data, size_t size) {
  return table_update(0xFFFFFFFFu, static_cast<const unsigned char*>(data), size) ^ 0xFFFFFFFFu;
}
}  // namespace detail

}  // namespace lsf
