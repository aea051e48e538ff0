// CRC-32C (Castagnoli, the iSCSI polynomial 0x1EDC6F41, reflected 0x82F63B78) and the masked
// form that TFRecord files — TensorBoard's event files (models/train/tensorboard.h) — store beside
// each record's length and data. A byte-at-a-time table: the event files are small, and the
// table keeps the code short enough to check by eye. crc32c("123456789") = 0xE3069283.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lsf::train {

// The CRC-32C of `size` bytes (initial value and final xor 0xFFFFFFFF, as every CRC-32C user).
uint32_t crc32c(const void* data, size_t size);
inline uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }

// TFRecord's mask: a CRC stored in a file can be CRC'd again without collapsing to a fixed
// point; ((crc >> 15) | (crc << 17)) + 0xa282ead8, in 32 bits.
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t unmask_crc32c(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace lsf::train
