// Truncated-BPTT batching of a char-LM split, as fairseq's `truncated_bptt_lm` task does it for
// the official Transformer-LS runs (transformer-ls.md §3.4 item 7, §3.6 "Targets"), and a
// one-pass evaluation iterator for bits-per-character.
//
// Training (BpttLoader), exactly the official task (autoregressive/truncated_bptt_lm_task.py):
//   1. the split's N tokens are cut into blocks of M (TokenBlockDataset, break_mode "none"):
//      block g = tokens [g·M, min((g+1)·M, N)), num_blocks = ceil(N / M), the last may be short;
//   2. the blocks are dealt into B streams of P = floor(num_blocks / B) consecutive blocks each
//      (TruncatedBPTTDataset.batchify): stream b = blocks [b·P, (b+1)·P); the num_blocks mod B
//      blocks at the end are dropped. The division is in blocks, not tokens, so a stream starts
//      at token b·P·M;
//   3. batch j of an epoch (j < P) holds block b·P + j of every stream as row b; rows are
//      right-padded to the longest row (only the split's final, short block can be shorter);
//   4. targets = inputs shifted left by one within the row, and the row's last position gets
//      the pad target (`F.pad(item[:, 1:], (0, 1), value=pad)`): the token that follows a block
//      is never predicted from it, so a block of M gives M − 1 targets. Padded positions have
//      the pad target too. Here the pad target is kLmIgnoreIndex.
//   5. epochs repeat the same batches in the same order (shuffling disabled).
// Batch k of the endless stream is epoch k / P, position j = k mod P: a pure function of
// (split, B, M, k), so a resumed run draws bit-identical batches (the model's memory is the
// trainer's to checkpoint).
// The loss the official criterion reports divides the summed NLL of the non-ignored targets by
// all B·T positions (`ntokens = item.numel()`), then by ln 2; LmBatch gives both counts.
// Data-parallel runs in fairseq use B·(GPUs) streams and give each GPU B of them; with one
// device that is just B = the global batch size.
//
// Memory resets: `resets_memory` is true for the first batch of every epoch, where every row
// starts its stream again and the memory carried from the previous batch holds unrelated text.
// The official code never resets (the decoder keeps `_mems` from the previous batch, even across
// epochs and into validation); the flag lets the trainer choose, and resetting is the deviation
// we recommend.
//
// Evaluation (LmEvalLoader): covers every token of the split exactly once, in S streams (1 as
// the official evaluation, fairseq-eval-lm --batch-size 1): stream s = tokens
// [s·Ls, min((s+1)·Ls, N)) with Ls = ceil(N / S); batch j holds tokens [j·M, j·M + T) of every
// stream with T = min(M, Ls − j·M), so the last batch may be shorter than M (the model pads it,
// transformer-ls.md §3.4 item 1). Rows past their stream's end are padded. With S = 1 the blocks
// are exactly the official evaluation's.
//
// Targets at block ends (both loaders): BpttOptions::block_end_targets = false is the official
// rule above. true gives the last position of a row the next token of the split (the first token
// of the stream's next block, which the memory connects it to) whenever one exists, so every
// token but the split's first is a target exactly once: the full-coverage BPC that
// data-formats.md §1.3 recommends. Official evaluation (M = 256) leaves 1/256 of the tokens
// unscored.
#pragma once

#include <cstdint>
#include <memory>

#include "lsformer/data/char_corpus.h"
#include "lsformer/engine/tensor.h"

namespace lsf::data {

// The target of positions that predict nothing (block ends, padding); the default ignore_index
// of lsf::cross_entropy, as in PyTorch.
inline constexpr int64_t kLmIgnoreIndex = -100;

struct LmBatch {
  Tensor inputs;    // [B, T] i64 token ids; positions past a stream's end hold 0
  Tensor targets;   // [B, T] i64 next-token ids, kLmIgnoreIndex where nothing is predicted
  int64_t index = 0;           // which batch: k (training) or j (evaluation)
  int64_t epoch = 0;           // training: k / batches_per_epoch; evaluation: 0
  bool resets_memory = false;  // every row starts its stream here: reset the model's memory
  int64_t num_targets = 0;     // targets that are not kLmIgnoreIndex
  int64_t num_tokens = 0;      // real (unpadded) input tokens
};

struct BpttOptions {
  int64_t batch_size = 1;          // B: parallel streams (evaluation: S)
  int64_t block_len = 0;           // M: tokens per block (fairseq --tokens-per-sample), ≥ 1
  bool block_end_targets = false;  // false: official (a row's last position is ignored); true: see above
};

class BpttLoader {
 public:
  // Throws when B or M < 1, the corpus is missing, or the split has fewer than B blocks of M.
  BpttLoader(std::shared_ptr<const CharCorpus> corpus, LmSplit split, const BpttOptions& options);

  int64_t batches_per_epoch() const { return blocks_per_stream_; }  // P
  // Token offset (in the split) where stream b starts: b·P·M.
  int64_t stream_begin(int64_t stream) const;
  // Tokens of the split that some stream holds: the whole split minus the dropped blocks.
  int64_t tokens_per_epoch() const;
  // Batch k of the endless stream (epoch k / P, block k mod P of every stream).
  LmBatch batch(int64_t index) const;

  const BpttOptions& options() const { return options_; }
  LmSplit split() const { return split_; }

 private:
  std::shared_ptr<const CharCorpus> corpus_;
  LmSplit split_;
  BpttOptions options_;
  int64_t num_blocks_ = 0;
  int64_t blocks_per_stream_ = 0;
};

class LmEvalLoader {
 public:
  // options.batch_size = the number of streams S. Throws when S or M < 1 or the corpus is missing.
  LmEvalLoader(std::shared_ptr<const CharCorpus> corpus, LmSplit split, const BpttOptions& options);

  int64_t num_batches() const { return num_batches_; }
  int64_t stream_length() const { return stream_length_; }  // Ls = ceil(N / S)
  // Token offset (in the split) where stream s starts: s·Ls (N when the stream is empty).
  int64_t stream_begin(int64_t stream) const;
  // Batch j, 0 ≤ j < num_batches().
  LmBatch batch(int64_t index) const;
  // Sum of num_targets over all batches: the BPC denominator.
  int64_t total_targets() const;

  const BpttOptions& options() const { return options_; }
  LmSplit split() const { return split_; }

 private:
  std::shared_ptr<const CharCorpus> corpus_;
  LmSplit split_;
  BpttOptions options_;
  int64_t stream_length_ = 0;
  int64_t num_batches_ = 0;
};

}  // namespace lsf::data
