// CRC-32C (Castagnoli: polynomial 0x1EDC6F41, reflected 0x82F63B78; initial value and final
// xor 0xFFFFFFFF, as every CRC-32C user). crc32c("123456789") = 0xE3069283, the CRC
// catalogue's check value. Used for the checksums of the safetensors files lsformer writes
// (engine/safetensors.h) and of TensorBoard's TFRecord events (models/train/tensorboard.h).
//
// x86-64 CPUs with SSE4.2 (every one since 2008) compute it with their crc32 instruction, eight
// bytes at a time (several GB/s: a checkpoint's weights are checked in milliseconds); elsewhere a
// byte-at-a-time table does, short enough to check by eye. Both give the same value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lsf {

// The CRC-32C of `size` bytes.
uint32_t crc32c(const void* data, size_t size);
inline uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }

namespace detail {
// The table form alone, whatever the CPU (tests compare it with crc32c above).
uint32_t crc32c_table(const void* data, size_t size);
}  // namespace detail

}  // namespace lsf
