// Batching: turns a Dataset into an endless, seeded stream of padded tensor batches.
//
// batch(index) is a pure function of (dataset, options, index): epoch = index / batches_per_epoch
// and position = index % batches_per_epoch; each epoch visits the examples in a fresh permutation
// that depends only on (seed, epoch). Resuming training at step k is therefore just batch(k) —
// there is no iterator state to save in a checkpoint.
//
// Shapes (B = batch size, L = padded length):
//   tokens  [B, L]  i64   token ids, right-padded with 0
//   mask    [B, L]  bool  true for the example's real positions (from its length, not from the
//                         token values: a black pixel is token 0 in the image tasks)
//   labels  [B]     i64
// L is options.seq_len when > 0 (longer examples are truncated to their first seq_len tokens,
// as LRA does); otherwise the longest example of the batch rounded up to pad_multiple (at least
// pad_multiple, so no batch is ever zero-length). For paired datasets tokens2 / mask2 [B, L2]
// follow the same rule, with L2 taken from the second documents.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "lsformer/data/dataset.h"
#include "lsformer/engine/tensor.h"

namespace lsf::data {

struct Batch {
  Tensor tokens;   // [B, L] i64, right-padded with 0
  Tensor mask;     // [B, L] bool, true for real tokens
  Tensor tokens2;  // [B, L2] i64 (paired datasets only, else undefined)
  Tensor mask2;    // [B, L2] bool
  Tensor labels;   // [B] i64
  // The same batch with every tensor on `device` (where the model trains).
  Batch to(Device device) const {
    auto on = [&](const Tensor& t) { return t.defined() ? t.to(device) : t; };
    return {on(tokens), on(mask), on(tokens2), on(mask2), on(labels)};
  }
};

struct BatchOptions {
  int64_t batch_size = 32;
  int64_t seq_len = 0;        // >0: every batch padded (and longer examples truncated) to exactly this;
                              // 0: pad to the longest example of the batch, rounded up to pad_multiple
  int64_t pad_multiple = 1;   // e.g. the attention window w (L must be a multiple of w)
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;     // training: true; evaluation: false (last batch may be smaller)
};

// The order in which epoch `epoch` visits n examples: a Fisher–Yates shuffle drawn from
// PhiloxStream(seed, stream = epoch), or the identity when !shuffle. Shared by BatchLoader and
// the image loader (data/image_loader.h).
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch, bool shuffle);

class BatchLoader {
 public:
  // Throws when batch_size < 1, pad_multiple < 1, seq_len < 0 or not a multiple of
  // pad_multiple, the dataset is missing or empty, or drop_last leaves no full batch.
  BatchLoader(std::shared_ptr<const Dataset> dataset, const BatchOptions& options);
  int64_t batches_per_epoch() const;
  // The index-th batch of the endless stream: epoch = index / batches_per_epoch, each epoch a
  // fresh permutation derived only from (seed, epoch). Pure function of index, so resuming at
  // step k is batch(k) — no iterator state to save.
  Batch batch(int64_t index) const;

  // Dataset indices of the examples in batch(index), in batch order.
  std::vector<int64_t> batch_indices(int64_t index) const;
  // The order in which epoch `epoch` visits the dataset (identity when shuffle is off).
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  const Dataset& dataset() const { return *dataset_; }
  const BatchOptions& options() const { return options_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  BatchOptions options_;
  int64_t batches_per_epoch_ = 0;
  // The last epoch's permutation, cached because consecutive batches share it; guarded so that
  // batch() stays safe to call from several threads.
  mutable std::mutex cache_mutex_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_order_;
};

}  // namespace lsf::data
