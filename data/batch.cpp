// BatchLoader: seeded epoch permutations and padding of examples into tensors (data/batch.h).
//
// Epoch permutation: a Fisher–Yates shuffle drawn from PhiloxStream(seed, stream = epoch), so
// epoch e's order depends on nothing but (seed, e) — not on how many batches were drawn before.
#include "lsformer/data/batch.h"

#include <algorithm>
#include <numeric>

#include "lsformer/data/random_stream.h"
#include "lsformer/engine/error.h"

namespace lsf::data {

BatchLoader::BatchLoader(std::shared_ptr<const Dataset> dataset, const BatchOptions& options)
    : dataset_(std::move(dataset)), options_(options) {
  LSF_CHECK(dataset_ != nullptr) << "BatchLoader: no dataset given";
  const int64_t n = int64_t(dataset_->examples.size());
  LSF_CHECK(n > 0) << "BatchLoader: dataset '" << dataset_->name << "' has no examples";
  LSF_CHECK(n < (int64_t(1) << 32))
      << "BatchLoader: dataset '" << dataset_->name << "' has " << n
      << " examples; at most 2^32 - 1 are supported";
  LSF_CHECK(options_.batch_size >= 1)
      << "BatchLoader: batch_size must be ≥ 1, got " << options_.batch_size;
  LSF_CHECK(options_.pad_multiple >= 1)
      << "BatchLoader: pad_multiple must be ≥ 1, got " << options_.pad_multiple;
  LSF_CHECK(options_.seq_len >= 0) << "BatchLoader: seq_len must be ≥ 0, got " << options_.seq_len;
  LSF_CHECK(options_.seq_len % options_.pad_multiple == 0)
      << "BatchLoader: seq_len " << options_.seq_len << " is not a multiple of pad_multiple "
      << options_.pad_multiple;
  batches_per_epoch_ = options_.drop_last ? n / options_.batch_size
                                          : (n + options_.batch_size - 1) / options_.batch_size;
  LSF_CHECK(batches_per_epoch_ > 0)
      << "BatchLoader: drop_last with batch_size " << options_.batch_size << " but dataset '"
      << dataset_->name << "' has only " << n << " examples, so no full batch exists";
}

int64_t BatchLoader::batches_per_epoch() const { return batches_per_epoch_; }

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch, bool shuffle) {
  LSF_CHECK(epoch >= 0) << "epoch_permutation: epoch must be ≥ 0, got " << epoch;
  LSF_CHECK(n >= 0 && n < (int64_t(1) << 32)) << "epoch_permutation: n = " << n << " is outside [0, 2^32)";
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t(0));
  if (!shuffle) return order;
  PhiloxStream rng(seed, uint64_t(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = int64_t(rng.below(uint32_t(i + 1)));
    std::swap(order[size_t(i)], order[size_t(j)]);
  }
  return order;
}

std::vector<int64_t> BatchLoader::epoch_order(int64_t epoch) const {
  LSF_CHECK(epoch >= 0) << "BatchLoader: epoch must be ≥ 0, got " << epoch;
  return epoch_permutation(int64_t(dataset_->examples.size()), options_.seed, epoch, options_.shuffle);
}

std::vector<int64_t> BatchLoader::batch_indices(int64_t index) const {
  LSF_CHECK(index >= 0) << "BatchLoader: batch index must be ≥ 0, got " << index;
  const int64_t epoch = index / batches_per_epoch_;
  const int64_t position = index % batches_per_epoch_;
  const int64_t n = int64_t(dataset_->examples.size());
  const int64_t begin = position * options_.batch_size;
  const int64_t end = std::min(n, begin + options_.batch_size);
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cached_epoch_ != epoch) {
    cached_order_ = epoch_order(epoch);
    cached_epoch_ = epoch;
  }
  return std::vector<int64_t>(cached_order_.begin() + begin, cached_order_.begin() + end);
}

namespace {

// Padded length for a batch whose longest sequence has `longest` tokens.
int64_t padded_length(int64_t longest, const BatchOptions& options) {
  if (options.seq_len > 0) return options.seq_len;
  const int64_t m = options.pad_multiple;
  return std::max<int64_t>(1, (longest + m - 1) / m) * m;
}

// Fills tokens [B, L] and mask [B, L] from one document of each example (first or second).
void fill_sequences(const Dataset& dataset, const std::vector<int64_t>& indices, bool second,
                    const BatchOptions& options, Tensor* tokens, Tensor* mask) {
  const int64_t batch = int64_t(indices.size());
  int64_t longest = 0;
  for (int64_t index : indices) {
    const Example& e = dataset.examples[size_t(index)];
    longest = std::max<int64_t>(longest, int64_t((second ? e.tokens2 : e.tokens).size()));
  }
  const int64_t length = padded_length(longest, options);
  *tokens = empty({batch, length}, kI64);
  *mask = empty({batch, length}, kBool);
  int64_t* t = tokens->data_ptr<int64_t>();
  bool* m = mask->data_ptr<bool>();
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<int32_t>& ids =
        second ? dataset.examples[size_t(indices[b])].tokens2 : dataset.examples[size_t(indices[b])].tokens;
    const int64_t used = std::min<int64_t>(length, int64_t(ids.size()));
    for (int64_t i = 0; i < used; ++i) {
      const int32_t id = ids[size_t(i)];
      LSF_CHECK(id >= 0 && id < dataset.vocab_size)
          << "BatchLoader: example " << indices[b] << " of dataset '" << dataset.name
          << "' has token id " << id << " outside [0, " << dataset.vocab_size << ")";
      t[b * length + i] = id;
      m[b * length + i] = true;
    }
    for (int64_t i = used; i < length; ++i) {
      t[b * length + i] = 0;
      m[b * length + i] = false;
    }
  }
}

}  // namespace

Batch BatchLoader::batch(int64_t index) const {
  const std::vector<int64_t> indices = batch_indices(index);
  const Dataset& dataset = *dataset_;
  Batch out;
  fill_sequences(dataset, indices, /*second=*/false, options_, &out.tokens, &out.mask);
  if (dataset.paired)
    fill_sequences(dataset, indices, /*second=*/true, options_, &out.tokens2, &out.mask2);
  out.labels = empty({int64_t(indices.size())}, kI64);
  int64_t* labels = out.labels.data_ptr<int64_t>();
  for (size_t b = 0; b < indices.size(); ++b) {
    const int32_t label = dataset.examples[size_t(indices[b])].label;
    LSF_CHECK(label >= 0 && label < dataset.num_classes)
        << "BatchLoader: example " << indices[b] << " of dataset '" << dataset.name
        << "' has label " << label << " outside [0, " << dataset.num_classes << ")";
    labels[b] = label;
  }
  return out;
}

}  // namespace lsf::data
