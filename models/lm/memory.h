// lm::Memory: the recurrent state of the char-level language model (transformer-ls.md §3.2,
// §3.4 items 5 and 7): for every layer, the inputs H (before the layer's LN1) of the last C
// positions the model has read, detached. The trainer carries it from batch k to k + 1 of the
// B parallel streams (truncated BPTT), saves it in checkpoints, and resets the streams that
// restart.
//
//   lm::Memory memory = model.initial_memory(B);            // zeros, §3.4 item 7
//   Tensor lp = model.forward(tokens, memory);               // memory now holds the next state
//   memory.reset_streams({2});                               // stream 2 starts a new text
//   save_safetensors(path, lm::memory_tensors(memory));      // "lm.memory.0", "lm.memory.1", ...
//   memory = lm::memory_from_tensors(load_safetensors(path).tensors, model.options())
//                .to(model.in_emb->weight.options());                 // CPU tensors → the model's
//
// Every operation that changes a memory makes new tensors (nothing is written in place), so a
// memory that an earlier forward's graph still holds is never altered under it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lsformer/engine/safetensors.h"
#include "lsformer/engine/tensor.h"
#include "lsformer/models/lm/lm_options.h"

namespace lsf::lm {

struct Memory {
  std::vector<Tensor> layers;  // one per layer: [B, C, d], detached

  bool empty() const { return layers.empty(); }
  int64_t batch_size() const;  // B (throws when empty)
  int64_t length() const;      // C
  int64_t dim() const;         // d

  // The streams in `streams` (indices in [0, B)) return to the initial all-zero memory.
  void reset_streams(const std::vector<int64_t>& streams);
  // The same with a mask: restart [B] bool, true for the streams that restart.
  void reset_streams(const Tensor& restart);
  // Every stream returns to the initial memory.
  void reset();
  // A copy in another dtype / on another device (e.g. a memory read from a checkpoint, which
  // holds CPU tensors, for a model on a GPU).
  Memory to(const TensorOptions& options) const;
};

// The initial memory: zeros [B, C, d] per layer, in `options` (dtype, device) (§3.4 item 7).
Memory zero_memory(int64_t layers, int64_t batch, int64_t length, int64_t dim, const TensorOptions& options = {});

// Checks that `memory` fits a model with these options at batch size `batch` (layers, [B, C, d])
// and the activations' dtype and device `like`; the message names `who` and the offending layer.
void check_memory(const char* who, const Memory& memory, const LmModelOptions& options, int64_t batch, const Tensor& like);

// Checkpoint entries: "<prefix><layer>" → [B, C, d] (e.g. "lm.memory.0").
NamedTensors memory_tensors(const Memory& memory, const std::string& prefix = "lm.memory.");
// The memory stored under `prefix` in `tensors` (e.g. load_safetensors(path).tensors): exactly
// options.layers entries, each [B, C, d] with C = memory_length and d = dim, one B for all; a
// missing, extra or mis-shaped entry is an error naming it.
Memory memory_from_tensors(const std::map<std::string, Tensor>& tensors, const LmModelOptions& options,
                           const std::string& prefix = "lm.memory.");

}  // namespace lsf::lm
