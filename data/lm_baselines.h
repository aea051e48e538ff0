// Count-based baselines printed next to a char-LM's bits per character: unigram and bigram
// models estimated on the train split and scored on any split.
//
// Smoothing: add-one (Laplace) over the corpus vocabulary V (256 for bytes, 27 for text8), so an
// unseen symbol or pair still has a finite cost:
//   unigram  p(c)     = (count(c) + 1) / (N_train + V)
//   bigram   p(c | a) = (count(a c) + 1) / (count(a ·) + V)
// where count(a ·) counts the train bigrams whose first symbol is a (N_train − 1 in all).
// Scored tokens: positions 1 … N−1 of the split, each with −log2 p given its predecessor — the
// tokens a next-token model predicts (data/bptt.h with block_end_targets), so the numbers are
// comparable with its BPC. bits_per_char = (Σ −log2 p) / (N − 1).
#pragma once

#include <cstdint>

#include "lsformer/data/char_corpus.h"

namespace lsf::data {

struct BaselineBpc {
  double bits_per_char = 0;  // mean −log2 p over the scored tokens
  int64_t scored = 0;        // N − 1
};

// Throws when the train split has fewer than 2 tokens or the scored split fewer than 2.
BaselineBpc unigram_bpc(const CharCorpus& corpus, LmSplit split);
BaselineBpc bigram_bpc(const CharCorpus& corpus, LmSplit split);

}  // namespace lsf::data
