// Synthetic byte-level stand-ins for LRA Text and Retrieval: tiny tasks with a learnable rule in
// long byte strings, so the whole Text path (one document, byte + 1 ids, vocab 257) and the whole
// Retrieval path (two documents through the dual encoder) can be trained end to end without the
// IMDb / AAN files. They test the pipeline; they are not the benchmark. Spec:
// docs/data-formats.md §1.4.7.
//
// Text ("text", 2 classes): filler words of random lowercase letters other than 'g' and 'w',
// with a keyword planted 1 + L/256 times at random word boundaries: "great" in label 1, "awful" in
// label 0. So the label is whether the bytes 'g' / 'w' occur anywhere in the document.
//
// Retrieval ("retrieval", 2 classes, paired): each document has a hidden key k ∈ 0..3 (its
// "topic"); every byte is a space with probability 0.15, else a letter of the key's own three
// (k = 0: "bcd", 1: "fgh", 2: "jkl", 3: "npq") with probability 0.3, else any lowercase letter.
// Label 1 (the documents "cite" each other): both documents share the key; label 0: two different
// keys. The model must summarise each document's letter statistics and compare them.
//
// Lengths: each document has L bytes, L uniform in (min_length, max_length) (strict, as ListOps).
// Example i has label i % 2 (balanced sets) and is a pure function of (seed, i), so a split made of
// indices [first, first + count) never overlaps another range.
#pragma once

#include <cstdint>

#include "lsformer/data/dataset.h"

namespace lsf::data {

struct SyntheticTextOptions {
  int64_t min_length = 500, max_length = 2000;  // strict bounds on each document's bytes
  uint64_t seed = 0;
};

// Examples [first, first + count) of the synthetic Text task (name "text", vocab 257).
Dataset synthetic_text(const SyntheticTextOptions& options, int64_t first, int64_t count);

// Examples [first, first + count) of the synthetic Retrieval task (name "retrieval", paired).
Dataset synthetic_retrieval(const SyntheticTextOptions& options, int64_t first, int64_t count);

}  // namespace lsf::data
