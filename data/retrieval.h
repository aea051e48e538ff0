// Byte-level document matching (LRA "Retrieval", AAN): the 5-column TSV
// `label<TAB>id1<TAB>id2<TAB>text1<TAB>text2`, no header. Spec: docs/data-formats.md §1.4.3.
//
// As LRA: the label is parsed as a float and must be 0 or 1; quotes are literal; each text is
// cut to its first 10,000 bytes, then to max_length, and encoded as byte + 1 (vocab 257). Both
// documents go to one Example (tokens, tokens2); the dataset is paired with 2 classes.
#pragma once

#include <cstdint>
#include <string>

#include "lsformer/data/dataset.h"

namespace lsf::data {

constexpr int64_t kRetrievalTextBytes = 10000;  // LRA keeps the first 10,000 bytes of a text

Dataset read_retrieval_tsv(const std::string& path, int64_t max_length);  // 5 columns label id1 id2 text1 text2

}  // namespace lsf::data
