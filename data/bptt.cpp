// Truncated-BPTT training batches and the one-pass evaluation iterator (data/bptt.h).
#include "lsformer/data/bptt.h"

#include <algorithm>
#include <vector>

#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {

// One row of a batch: the split's tokens [begin, begin + length); length may be 0 (a stream
// that has ended) and is at most the batch width T.
struct RowSpan {
  int64_t begin = 0;
  int64_t length = 0;
};

// Targets a row contributes: every position but the last predicts its successor inside the row;
// the last one predicts the split's next token only with block_end_targets and when it exists.
int64_t row_targets(const RowSpan& row, int64_t split_size, bool block_end_targets) {
  if (row.length == 0) return 0;
  const bool last_scored = block_end_targets && row.begin + row.length < split_size;
  return row.length - 1 + (last_scored ? 1 : 0);
}

// Builds inputs / targets [rows.size(), width] from the split's tokens.
LmBatch make_batch(const std::vector<uint8_t>& tokens, const std::vector<RowSpan>& rows, int64_t width,
                   bool block_end_targets) {
  const int64_t batch = int64_t(rows.size());
  const int64_t n = int64_t(tokens.size());
  LmBatch out;
  out.inputs = empty({batch, width}, kI64);
  out.targets = empty({batch, width}, kI64);
  int64_t* inputs = out.inputs.data_ptr<int64_t>();
  int64_t* targets = out.targets.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const RowSpan& row = rows[size_t(b)];
    int64_t* in = inputs + b * width;
    int64_t* tg = targets + b * width;
    for (int64_t t = 0; t < row.length; ++t) {
      in[t] = tokens[size_t(row.begin + t)];
      tg[t] = t + 1 < row.length ? int64_t(tokens[size_t(row.begin + t + 1)]) : kLmIgnoreIndex;
    }
    if (row.length > 0 && block_end_targets && row.begin + row.length < n)
      tg[row.length - 1] = tokens[size_t(row.begin + row.length)];
    std::fill(in + row.length, in + width, int64_t(0));
    std::fill(tg + row.length, tg + width, kLmIgnoreIndex);
    out.num_targets += row_targets(row, n, block_end_targets);
    out.num_tokens += row.length;
  }
  return out;
}

void check_options(const char* who, const std::shared_ptr<const CharCorpus>& corpus, const BpttOptions& options) {
  LSF_CHECK(corpus != nullptr) << who << ": no corpus given";
  LSF_CHECK(options.batch_size >= 1) << who << ": batch_size must be ≥ 1, got " << options.batch_size;
  LSF_CHECK(options.block_len >= 1) << who << ": block_len must be ≥ 1, got " << options.block_len;
}

}  // namespace

BpttLoader::BpttLoader(std::shared_ptr<const CharCorpus> corpus, LmSplit split, const BpttOptions& options)
    : corpus_(std::move(corpus)), split_(split), options_(options) {
  check_options("BpttLoader", corpus_, options_);
  const int64_t n = int64_t(corpus_->split(split_).size());
  num_blocks_ = (n + options_.block_len - 1) / options_.block_len;
  blocks_per_stream_ = num_blocks_ / options_.batch_size;
  LSF_CHECK(blocks_per_stream_ >= 1)
      << "BpttLoader: the " << lm_split_name(split_) << " split of corpus '" << corpus_->name << "' has " << n
      << " tokens = " << num_blocks_ << " blocks of " << options_.block_len << ", fewer than the "
      << options_.batch_size << " streams (batch_size) that need one block each";
}

int64_t BpttLoader::stream_begin(int64_t stream) const {
  LSF_CHECK(stream >= 0 && stream < options_.batch_size)
      << "BpttLoader: stream " << stream << " outside [0, " << options_.batch_size << ")";
  return stream * blocks_per_stream_ * options_.block_len;
}

int64_t BpttLoader::tokens_per_epoch() const {
  const int64_t n = int64_t(corpus_->split(split_).size());
  return std::min(n, options_.batch_size * blocks_per_stream_ * options_.block_len);
}

LmBatch BpttLoader::batch(int64_t index) const {
  LSF_CHECK(index >= 0) << "BpttLoader: batch index must be ≥ 0, got " << index;
  const std::vector<uint8_t>& tokens = corpus_->split(split_);
  const int64_t n = int64_t(tokens.size());
  const int64_t m = options_.block_len;
  const int64_t position = index % blocks_per_stream_;
  std::vector<RowSpan> rows(size_t(options_.batch_size));
  int64_t width = 0;
  for (int64_t b = 0; b < options_.batch_size; ++b) {
    const int64_t block = b * blocks_per_stream_ + position;
    const int64_t begin = block * m;
    rows[size_t(b)] = {begin, std::min(m, n - begin)};
    width = std::max(width, rows[size_t(b)].length);  // collate_tokens pads to the longest row
  }
  LmBatch out = make_batch(tokens, rows, width, options_.block_end_targets);
  out.index = index;
  out.epoch = index / blocks_per_stream_;
  out.resets_memory = position == 0;
  return out;
}

LmEvalLoader::LmEvalLoader(std::shared_ptr<const CharCorpus> corpus, LmSplit split, const BpttOptions& options)
    : corpus_(std::move(corpus)), split_(split), options_(options) {
  check_options("LmEvalLoader", corpus_, options_);
  const int64_t n = int64_t(corpus_->split(split_).size());
  LSF_CHECK(n >= 1) << "LmEvalLoader: the " << lm_split_name(split_) << " split of corpus '" << corpus_->name
                    << "' is empty";
  stream_length_ = (n + options_.batch_size - 1) / options_.batch_size;
  num_batches_ = (stream_length_ + options_.block_len - 1) / options_.block_len;
}

int64_t LmEvalLoader::stream_begin(int64_t stream) const {
  LSF_CHECK(stream >= 0 && stream < options_.batch_size)
      << "LmEvalLoader: stream " << stream << " outside [0, " << options_.batch_size << ")";
  return std::min(int64_t(corpus_->split(split_).size()), stream * stream_length_);
}

LmBatch LmEvalLoader::batch(int64_t index) const {
  LSF_CHECK(index >= 0 && index < num_batches_)
      << "LmEvalLoader: batch " << index << " outside [0, " << num_batches_ << ")";
  const std::vector<uint8_t>& tokens = corpus_->split(split_);
  const int64_t n = int64_t(tokens.size());
  const int64_t offset = index * options_.block_len;  // inside each stream
  const int64_t width = std::min(options_.block_len, stream_length_ - offset);
  std::vector<RowSpan> rows(size_t(options_.batch_size));
  for (int64_t s = 0; s < options_.batch_size; ++s) {
    const int64_t stream_end = std::min(n, (s + 1) * stream_length_);
    const int64_t begin = std::min(stream_end, s * stream_length_ + offset);
    rows[size_t(s)] = {begin, std::min(width, stream_end - begin)};
  }
  LmBatch out = make_batch(tokens, rows, width, options_.block_end_targets);
  out.index = index;
  out.resets_memory = index == 0;
  return out;
}

int64_t LmEvalLoader::total_targets() const {
  const int64_t n = int64_t(corpus_->split(split_).size());
  int64_t total = 0;
  for (int64_t s = 0; s < options_.batch_size; ++s) {
    const int64_t begin = std::min(n, s * stream_length_);
    const int64_t end = std::min(n, (s + 1) * stream_length_);
    for (int64_t offset = begin; offset < end; offset += options_.block_len)
      total += row_targets({offset, std::min(options_.block_len, end - offset)}, n, options_.block_end_targets);
  }
  return total;
}

}  // namespace lsf::data
