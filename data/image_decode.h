// Decoding (and, for tests, tools and inspection, encoding) JPEG and PNG files into Images.
//
// JPEG through libjpeg-turbo's libjpeg API (Debian libjpeg62-turbo-dev), PNG through libpng.
// Neither library may end the process: libjpeg's default error_exit calls exit() and libpng's
// default error handler aborts when no jump buffer is set, so both get handlers that longjmp
// back into a C-style function holding no C++ objects, which then throws an lsf::Error naming
// the file and the library's message. The format is taken from the file's signature, never
// from its extension (ImageNet holds a PNG named .JPEG).
//
// Conversion to the requested channel count (1 or 3), the same as PIL's convert("L") /
// convert("RGB") that torchvision's ImageFolder loader applies:
//   gray → RGB     the value replicated
//   RGB  → gray    ITU-R 601-2 luma in PIL's fixed point: (19595·R + 38470·G + 7471·B + 2^15) >> 16
//   alpha          dropped, never composited (PIL's RGBA → RGB), also tRNS transparency
//   palette        expanded to its RGB entries (gray palettes too; then luma when 1 channel)
//   1/2/4-bit      gray expanded to 8 bits (0 → 0, max → 255)
//   16-bit         the high byte of each sample (PIL's "RGB;16B" unpacking)
//   JPEG CMYK      to RGB as PIL: R = (255 − K) − (C·(255 − K))/255 (rounded), values of Adobe
//                  files un-inverted first; YCCK likewise after libjpeg's YCC → RGB
//
// JPEG errors: a libjpeg error (not a JPEG, unsupported, corrupt headers or data) and the
// warnings that mean the data is damaged — premature end of file (truncation), premature end of
// a data segment, bad Huffman code — are lsf::Errors. Other warnings (e.g. extraneous bytes
// before a marker, present in a few ImageNet files that every decoder reads fine) are ignored,
// as PIL ignores them. PNG errors: every libpng error (bad signature, CRC error in a critical
// chunk, truncated data, bad sizes); warnings are ignored, as PIL ignores ancillary chunks.
#pragma once

#include <cstdint>
#include <string>

#include "lsformer/data/image_dataset.h"

namespace lsf::data {

enum class ImageFormat { Jpeg, Png, Unknown };

// The format announced by the first bytes (JPEG: FF D8 FF; PNG: the 8-byte PNG signature).
ImageFormat sniff_image_format(const uint8_t* data, size_t size);

// Decodes a whole JPEG or PNG file into `channels` channels (1 or 3). Errors name the path:
// missing, unreadable, empty, neither JPEG nor PNG, corrupt or truncated.
Image decode_image_file(const std::string& path, int64_t channels);

// The same from bytes already in memory; `what` names them in errors (usually the path).
Image decode_image(const uint8_t* data, size_t size, const std::string& what, int64_t channels);
Image decode_jpeg(const uint8_t* data, size_t size, const std::string& what, int64_t channels);
Image decode_png(const uint8_t* data, size_t size, const std::string& what, int64_t channels);

// 1 ↔ 3 channels by the rules above (a copy when already `channels`).
Image convert_channels(const Image& image, int64_t channels);
// PIL's convert("L") luma of one pixel.
uint8_t luma_601(uint8_t r, uint8_t g, uint8_t b);

// Writers for 8-bit gray or RGB images (tests, benchmarks, dumping augmented samples).
// JPEG: baseline, 4:2:0 chroma subsampling for RGB (libjpeg's defaults), quality 1..100.
// Both write straight to `path` (not atomically); errors name the path.
void write_png(const std::string& path, const Image& image);
void write_jpeg(const std::string& path, const Image& image, int quality = 90);

}  // namespace lsf::data
