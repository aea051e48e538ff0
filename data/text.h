// Byte-level text classification (LRA "Text", IMDb): readers for a `label<TAB>text` TSV and for
// the Stanford aclImdb folder layout. Spec: docs/data-formats.md §1.4.2.
//
// Encoding as tfds ByteTextEncoder: each UTF-8 byte b becomes id b + 1 (0 stays the padding id),
// vocab_size 257; a text is truncated to its first max_length bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lsformer/data/dataset.h"

namespace lsf::data {

constexpr int64_t kByteVocabSize = 257;  // 256 byte values + the padding id 0

// Ids byte + 1 of the first max_length bytes of `text`.
std::vector<int32_t> encode_bytes(std::string_view text, int64_t max_length);

// One example per line: `label<TAB>text`, label a non-negative integer; the text is everything
// after the first tab (so it may contain further tabs); a trailing "\r" is dropped. No header.
// num_classes = max(2, largest label + 1). Empty texts and bad labels are errors naming file
// and line.
Dataset read_text_tsv(const std::string& path, int64_t max_length);

// root = the aclImdb directory: reads root/<split>/neg/*.txt (label 0), then root/<split>/pos/*.txt
// (label 1), each folder in sorted file-name order so the dataset is the same on every machine.
// split: "train" or "test" ("val" and "dev" also read "test": LRA validates on the test set).
Dataset read_imdb_folder(const std::string& root, const std::string& split, int64_t max_length);

}  // namespace lsf::data
