// Example and Dataset: what every LRA reader and the ListOps generator hand to the BatchLoader.
//
// A Dataset is plain host data (token ids as int32 vectors), independent of tensors and devices;
// data/batch.h turns a batch of examples into padded tensors. Token id 0 is the padding id.
//
// Token conventions per task (docs/data-formats.md §1.4):
//   listops     fixed vocabulary of 16 ids (data/listops.h), 10 classes
//   text        byte + 1 (vocab 257), 2 classes for IMDb
//   retrieval   byte + 1 (vocab 257) for both documents, 2 classes, paired
//   image       grayscale pixel value 0..255 (vocab 256, no +1 offset, as LRA), 10 classes
//   pathfinder  grayscale pixel value 0..255 (vocab 256, no +1 offset, as LRA), 2 classes
// For image and pathfinder a black pixel is token 0 even though 0 is also the padding id: LRA
// keeps raw pixel values, and their sequences are never padded (every image has the same size).
// So the mask must come from the example's length, never from `token != 0` — BatchLoader builds
// it that way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lsf::data {

struct Example {
  std::vector<int32_t> tokens;   // [L] token ids, each in [0, vocab_size)
  std::vector<int32_t> tokens2;  // [L2] second document (Retrieval only), else empty
  int32_t label = 0;             // class index in [0, num_classes)
};

struct Dataset {
  std::string name;              // "listops", "text", "retrieval", "image" or "pathfinder"
  std::vector<Example> examples;
  int64_t vocab_size = 0;        // ids are < vocab_size (0 = pad)
  int64_t num_classes = 0;
  bool paired = false;           // Retrieval: tokens2 used
};

}  // namespace lsf::data
