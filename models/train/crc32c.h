// The masked CRC-32C that TFRecord files — TensorBoard's event files (models/train/tensorboard.h)
// — store beside each record's length and data; the CRC itself is the engine's
// (engine/crc32c.h).
#pragma once

#include <cstdint>

#include "lsformer/engine/crc32c.h"

namespace lsf::train {

using ::lsf::crc32c;

// TFRecord's mask: a CRC stored in a file can be CRC'd again without collapsing to a fixed
// point; ((crc >> 15) | (crc << 17)) + 0xa282ead8, in 32 bits.
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t unmask_crc32c(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace lsf::train
