// lm::IncrementalDecoder: token-by-token inference with a TransformerLSModel (the model part of
// `lsf generate`). Each step appends ONE token per stream and returns the next token's
// log-probabilities, with O(w + C·r/l + t·r/l) attention work per layer for the long-short
// model (its window band and its visible compressed slots; O(C + t) for the full baseline) —
// the prefix is never recomputed.
//
//   model.eval();
//   lm::IncrementalDecoder decoder(model, /*batch=*/B);      // or (model, memory)
//   Tensor lp = decoder.feed(prompt);                 // prompt [B, n] → log-probs [B, V] after it
//   for (...) { Tensor next = lm::sample_next_tokens(lp, sampling, gen); lp = decoder.step(next); }
//
// Semantics (exactly the model's forward, evaluated one position at a time): tokens are
// consumed in blocks of M = options.block_length. Within a block, the log-probabilities after
// the token at block position t equal those a full forward of that block (right-padded to M
// with anything, the same memory) gives at t — causality makes the padding irrelevant. When a
// block fills, the memory rolls exactly as forward's does (the last C rows of [memory ; the
// block's layer inputs]) and the next block starts at position 0.
//
// State kept per layer (all [B, …], updated in place under NoGradGuard):
//   the block's layer inputs H (for the roll), LN1 outputs X and projections X W_k, X W_v (for
//   the block-path compression of a chunk when it completes, §3.3 step 5);
//   long-short: window keys/values [B, h, w + M, e] (rows 0..w−1 from the memory's last w rows,
//   row w + t from token t, LN_L applied), the compressed slots [B, h, Nc, e] (the memory chunks,
//   then each block chunk once it is complete), the projected position tables;
//   full: keys/values [B, h, C + M, e] (memory rows, then the block's) and the projected
//   distance table.
// The model must be in eval mode (no dropout) and must not change while a decoder uses it.
#pragma once

#include <vector>

#include "lsformer/models/lm/lm_model.h"

namespace lsf::lm {

class IncrementalDecoder {
 public:
  // B = memory.batch_size() streams, starting at block position 0 with this memory (e.g. the
  // memory a forward over the preceding text returned).
  IncrementalDecoder(TransformerLSModel& model, Memory memory);
  // B streams from the initial (zero) memory.
  IncrementalDecoder(TransformerLSModel& model, int64_t batch);

  // tokens [B] (i64/i32 ids in [0, V)) → log-probabilities of the next token [B, V].
  Tensor step(const Tensor& tokens);
  // tokens [B, n], n ≥ 1, consumed in order → the log-probabilities after the last one [B, V].
  // Whole blocks that start at position 0 go through the model's forward at once.
  Tensor feed(const Tensor& tokens);

  const Memory& memory() const { return memory_; }  // the memory of the current block
  int64_t position() const { return position_; }   // tokens consumed in the current block, in [0, M)
  int64_t batch_size() const { return batch_; }

 private:
  struct LayerState {
    Tensor h_block, x_block, k_block, v_block;  // [B, M, d]
    Tensor keys, values;  // long-short: [B, h, w + M, e]; full: [B, h, C + M, e]
    Tensor kc, vc;        // long-short: [B, h, Nc, e]
    Tensor rel;           // long-short: W_R·window table [h, w, e]; full: W_R·distance table [h, C + M, e]
    Tensor chunk_rel;     // long-short: W_Rc·chunk table, rows reversed: row j ↔ value Nc−1−j [h, Nc, e]
  };
  void load_memory();  // the memory-derived rows of every layer's state
  Tensor attend_long_short(size_t layer, const Tensor& x, int64_t t);  // x [B, 1, d] → [B, 1, d]
  Tensor attend_full(size_t layer, const Tensor& x, int64_t t);

  TransformerLSModel& model_;
  Memory memory_;
  std::vector<LayerState> layers_;
  int64_t batch_ = 0, position_ = 0;
};

}  // namespace lsf::lm
