// Add-one unigram and bigram bits per character (data/lm_baselines.h).
//
// Both work on count tables (V and V² entries): the scored split's own counts are multiplied by
// each cell's cost, so a 100M-token split costs one pass plus V² logarithms. Sums are in double:
// 10^8 terms of at most ~30 bits each lose < 1e-7 relative precision.
#include "lsformer/data/lm_baselines.h"

#include <cmath>
#include <vector>

#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {

void check_sizes(const char* who, const CharCorpus& corpus, LmSplit split) {
  LSF_CHECK(corpus.train.size() >= 2) << who << ": the train split of '" << corpus.name << "' has "
                                      << corpus.train.size() << " tokens; at least 2 are needed";
  LSF_CHECK(corpus.split(split).size() >= 2) << who << ": the " << lm_split_name(split) << " split of '"
                                             << corpus.name << "' has " << corpus.split(split).size()
                                             << " tokens; at least 2 are needed";
}

void check_ids(const char* who, const CharCorpus& corpus, const std::vector<uint8_t>& tokens) {
  const int64_t v = corpus.vocab.size();
  if (v >= 256) return;  // every byte is an id
  for (uint8_t id : tokens)
    LSF_CHECK(id < v) << who << ": corpus '" << corpus.name << "' has token id " << int(id) << " outside its "
                      << corpus.vocab.name() << " vocabulary of " << v;
}

std::vector<int64_t> pair_counts(const std::vector<uint8_t>& tokens, int64_t v) {
  std::vector<int64_t> counts(size_t(v * v), 0);
  for (size_t i = 1; i < tokens.size(); ++i) ++counts[size_t(tokens[i - 1]) * size_t(v) + tokens[i]];
  return counts;
}

}  // namespace

BaselineBpc unigram_bpc(const CharCorpus& corpus, LmSplit split) {
  check_sizes("unigram_bpc", corpus, split);
  const std::vector<uint8_t>& scored = corpus.split(split);
  check_ids("unigram_bpc", corpus, corpus.train);
  check_ids("unigram_bpc", corpus, scored);
  const int64_t v = corpus.vocab.size();
  std::vector<int64_t> train_counts(size_t(v), 0), scored_counts(size_t(v), 0);
  for (uint8_t id : corpus.train) ++train_counts[id];
  for (size_t i = 1; i < scored.size(); ++i) ++scored_counts[scored[i]];
  const double denominator = double(corpus.train.size()) + double(v);
  double bits = 0;
  for (int64_t c = 0; c < v; ++c)
    if (scored_counts[size_t(c)] > 0)
      bits -= double(scored_counts[size_t(c)]) * std::log2((double(train_counts[size_t(c)]) + 1) / denominator);
  const int64_t n = int64_t(scored.size()) - 1;
  return {bits / double(n), n};
}

BaselineBpc bigram_bpc(const CharCorpus& corpus, LmSplit split) {
  check_sizes("bigram_bpc", corpus, split);
  const std::vector<uint8_t>& scored = corpus.split(split);
  check_ids("bigram_bpc", corpus, corpus.train);
  check_ids("bigram_bpc", corpus, scored);
  const int64_t v = corpus.vocab.size();
  const std::vector<int64_t> train_pairs = pair_counts(corpus.train, v);
  const std::vector<int64_t> scored_pairs = pair_counts(scored, v);
  double bits = 0;
  for (int64_t a = 0; a < v; ++a) {
    int64_t row_total = 0;  // count(a ·) in train
    for (int64_t c = 0; c < v; ++c) row_total += train_pairs[size_t(a * v + c)];
    for (int64_t c = 0; c < v; ++c) {
      const int64_t k = scored_pairs[size_t(a * v + c)];
      if (k == 0) continue;
      const double p = (double(train_pairs[size_t(a * v + c)]) + 1) / (double(row_total) + double(v));
      bits -= double(k) * std::log2(p);
    }
  }
  const int64_t n = int64_t(scored.size()) - 1;
  return {bits / double(n), n};
}

}  // namespace lsf::data
