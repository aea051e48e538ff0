// Pathfinder (LRA "Path"/"Path-X"): grayscale PNG images listed by plain-text metadata files.
// Spec: docs/data-formats.md §1.4.5.
//
// Layout under `root` (e.g. lra_release/pathfinder32/curv_contour_length_14):
//   metadata/<batch>.npy   despite the extension plain text, one image per line, space separated:
//                          field 0 "imgs/<batch>", field 1 "sample_<i>.png", field 3 the label 0/1
//   imgs/<batch>/sample_<i>.png   8-bit grayscale PNG (32×32 for Path, 128×128 for Path-X)
// Zero-byte PNGs (present in the release) are skipped, as every LRA loader does. Low-bit-depth
// and gray-palette PNGs are expanded to 8-bit gray; colour, alpha and 16-bit PNGs are refused.
// Each image becomes H·W tokens, its pixel values in row-major order (vocab 256, no +1 offset).
//
// Split: the valid samples, in metadata order (metadata files sorted by name, numerically when
// the names are numbers), are shuffled by a Fisher–Yates permutation from PhiloxStream(seed);
// then train = the first ⌊0.8·N⌋, val = the next ⌊0.1·N⌋, test = the rest. Only the requested
// split's images are decoded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lsformer/data/dataset.h"

namespace lsf::data {

// Pixels of an 8-bit grayscale PNG, row-major; *height and *width receive its size. Errors
// name the file (missing, not a PNG, colour/alpha/16-bit, corrupt).
std::vector<uint8_t> read_gray_png(const std::string& path, int64_t* height, int64_t* width);

// Writes an 8-bit grayscale PNG of `height`×`width` pixels (row-major), through a temporary file
// renamed into place; errors name the file. The Pathfinder generator and its contact sheet use it.
void write_gray_png(const std::string& path, const std::vector<uint8_t>& pixels, int64_t height, int64_t width);

// split "train"|"val"|"test": 80/10/10 of the shuffled (seed) valid samples
Dataset read_pathfinder(const std::string& root, const std::string& split, uint64_t seed);

}  // namespace lsf::data
