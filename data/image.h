// CIFAR-10 (LRA "Image"): the binary batches turned into grayscale pixel sequences; and
// Fashion-MNIST as its offline stand-in (read_fashion_mnist_lra, below).
// Spec: docs/data-formats.md §1.4.4 and §1.5.
//
// File format: records of 1 + 3072 bytes: a label byte 0..9, then 1024 R, 1024 G and 1024 B
// bytes, each channel a row-major 32×32 plane. A file's size must be a multiple of 3073.
// Each image becomes 1024 tokens, the grayscale value of each pixel in row-major order, with
// vocab 256 (no +1 offset, as LRA: normalize=False) and 10 classes.
//
// Grayscale exactly as LRA's tf.image.rgb_to_grayscale on a uint8 image, in float32:
//   convert_image_dtype(uint8 → f32):  x = float(v) · float(1/255)        (cast, then scale)
//   tensordot with [0.2989, 0.5870, 0.1140]: g = xR·0.2989f + xG·0.5870f + xB·0.1140f
//   convert_image_dtype(f32 → uint8):  u = int(g · 255.5f)               (scale, then truncate)
// TF multiplies by dtype.max + 0.5 = 255.5 and casts (truncation toward zero) — "to avoid
// rounding problems in the cast". With the luma E = 0.2989·R + 0.5870·G + 0.1140·B (0..254.97)
// that is u = ⌊255.5·E/255⌋ = ⌊E + E/510⌋: nearly ⌊E⌋, but pulled up to the next integer when
// E lies less than E/510 below it — so neutral grays R = G = B = v (E = 0.9999·v) map back to v.
// It is neither round(E) nor ⌊E⌋: (R,G,B) = (0,1,0) has E = 0.587 → u = 0 (round gives 1), and
// (1,1,1) has E = 0.9999 → u = 1 (floor gives 0); the tests check both. We follow TF, since
// LRA's reported numbers were obtained with it. u ≤ 255 because the weights sum to 0.9999.
// The float32 sum is taken left to right; TF's Eigen contraction may order it differently or
// use FMA, which changes u only when 255.5·g lies within a few float32 ulps of an integer:
// over all 2^24 RGB triples, 31 differ under FMA evaluation and 47 under the order R + (G + B).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lsformer/data/dataset.h"

namespace lsf::data {

constexpr int64_t kCifarRecordBytes = 1 + 3 * 1024;  // label + R, G, B planes of 32×32

// The grayscale byte of one pixel, as LRA's TensorFlow pipeline computes it (see above).
uint8_t cifar_gray(uint8_t r, uint8_t g, uint8_t b);

// Reads every record of every file, in order. Errors name the file (missing, size not a
// multiple of 3073, empty list) and the record (label byte > 9).
Dataset read_cifar10_gray(const std::vector<std::string>& batch_files);  // 1024 tokens, vocab 256, 10 classes

// Fashion-MNIST (IDX files under `dir`, plain or .gz: data/idx.h) as LRA Image sequences: each
// 28×28 image padded with 2 black pixels on every side to 32×32 (no resampling, so pixel values
// stay exact), 1024 tokens row-major, vocab 256, 10 classes — the shape of LRA's grayscale
// CIFAR-10, and the same token convention (raw pixel values, black = 0). split "train" (60,000)
// or "test" (10,000). Errors name the file (missing, truncated, corrupt: read_idx_u8's).
Dataset read_fashion_mnist_lra(const std::string& dir, const std::string& split);

}  // namespace lsf::data
