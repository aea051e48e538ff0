// lm::TransformerLSModel: the character-level Transformer-LS language model (transformer-ls.md
// §3.2–3.6, the official TransformerLSModel of autoregressive/model_lib/model.py), with the
// causal long-short attention of §3.3 or the full-attention baseline in every layer.
//
//   lm::TransformerLSModel model({.vocab_size = 205, .layers = 12, .block_length = 2048});
//   lm::Memory memory = model.initial_memory(B);               // zeros, §3.4 item 7
//   for (k = 0, 1, ...) {                                       // B contiguous streams, block k
//     Tensor lp = model.forward(tokens_k, memory);              // [B, M] → log-probs [B, M, V]
//     Tensor loss = lm::lm_loss(lp, targets_k, pad);            // models/lm/lm_loss.h
//     loss.backward();                                          // memory is detached: one block deep
//   }
//
// Forward, for tokens [B, n] (§3.4):
//   1. n not accepted by the attention (long-short: n % l ≠ 0, or n > w with n % w ≠ 0) → the
//      block is right-padded with token 0 to the next multiple of lcm(l, w) (padded_length) and
//      the outputs are truncated back to n (the official evaluation-tail rule; the returned
//      memory then holds the padded positions too, as the official code's — a tail is the last
//      block of its stream).
//   2. H0 = Drop_emb(E[x]·√d); the token table E [V, d] is tied with the output layer.
//   3. Tables shared by every layer: long-short — the window sinusoids of distances w−1 … 0,
//      after Drop_emb, and the chunk sinusoids of values 0 … Nc−1 (Nc = (C + n)/l·r), never
//      dropped out; full — the distances C+n−1 … 0, after Drop_emb.
//   4. For each layer: the next memory = the last C rows of [old memory ; layer input H]
//      (before LN1, detached), recorded BEFORE the layer runs; then H ← layer(H, old memory).
//   5. log_softmax(Drop_emb(H_L)·Eᵀ + b_out) over V: the model's dtype for f32 / f64, f32 for
//      f16 / bf16 activations (official: the log-softmax in f32, cast back to the activations').
//   No final LayerNorm (§3.2). Embedding dropout = emb_dropout; dropout inside the layers = dropout.
//
// state_dict names (the official module's, relative to TransformerLSModel; a fairseq
// checkpoint prefixes them with "decoder.model."):
//   in_emb.weight                      [V, d]   the token table, ALSO the output weight
//   out_emb.bias                       [V]      the output bias
//   layers.{i}.attn.*                  long-short: proj_query, proj_key, proj_val, proj_out
//                                      (.weight [d, d], .bias with options.bias), dconv_1.{weight
//                                      [h·r, d], bias}, r_net.weight, r_net_chunk.{weight, bias},
//                                      r_w_bias [1, h, 1, 1, e], r_r_bias [1, h, 1, e],
//                                      dual_ln_win.*, dual_ln_dproj.*;
//                                      full: proj_*, r_net.weight, r_w_bias, r_r_bias
//   layers.{i}.norm1.*, layers.{i}.ff.fc1.*, layers.{i}.ff.fc2.*, layers.{i}.norm2.*
// The official module ties `out_emb.weight = in_emb.weight`: PyTorch's named_parameters() lists
// the tensor once (as in_emb.weight) but its state_dict() holds it under both names. Here it is
// registered once, as in_emb.weight (there is no out_emb.weight entry);
// scripts/convert_lm_checkpoint.py checks that a checkpoint's out_emb.weight equals its
// in_emb.weight and drops it. The official buffer pos_emb.inv_freq (10000^{−2k/d}, a function
// of d) is not stored: the tables are computed from the rule of §3.5 (in double precision).
//
// Initialisation (§6, AR column): every Linear weight N(0, 0.02²), bias 0; the token table
// N(0, 0.02²); LayerNorm weight N(1, 0.02²), bias 0; u, v N(0, 0.02²); output bias 0.
//
// Deviations: the block is also padded when n % l = 0 but n > w and n % w ≠ 0 (the official
// tiling fails there); the log-softmax of f32 / f64 activations is not cast (nothing to cast).
#pragma once

#include <memory>
#include <vector>

#include "lsformer/models/lm/lm_layer.h"
#include "lsformer/models/lm/lm_options.h"
#include "lsformer/models/lm/memory.h"
#include "lsformer/models/nn/dropout.h"
#include "lsformer/models/nn/embedding.h"
#include "lsformer/models/nn/module_list.h"

namespace lsf::lm {

// The output layer's own parameter: its weight is the token table (tied).
class TiedOutput : public nn::Module {
 public:
  explicit TiedOutput(int64_t vocab_size);
  Tensor bias;  // [V]
};

class TransformerLSModel : public nn::Module {
 public:
  explicit TransformerLSModel(const LmModelOptions& options);

  // tokens [B, n] (i64 or i32 ids in [0, V)), memory (options.layers × [B, C, d], from
  // initial_memory or a previous forward) → log-probabilities [B, n, V]. `memory` is replaced by
  // the memory for the next block (detached). With layer_inputs, every layer's input H
  // [B, n', d] (n' = padded_length(n)) is appended to it (for tests and inspection).
  Tensor forward(const Tensor& tokens, Memory& memory, std::vector<Tensor>* layer_inputs = nullptr);

  // zeros [B, C, d] per layer, in the parameters' dtype and device.
  Memory initial_memory(int64_t batch) const;

  // The initialisation of §6 (the constructor applies it), from options.generator.
  void reset_parameters();

  const LmModelOptions& options() const { return options_; }
  std::string extra_repr() const override;

  std::shared_ptr<nn::Embedding> in_emb;     // token table [V, d], tied with the output
  std::shared_ptr<TiedOutput> out_emb;       // output bias
  std::shared_ptr<nn::ModuleList> layers_list;  // registered as "layers"
  std::vector<std::shared_ptr<TransformerLSLayer>> layers;  // the same layers, typed
  std::shared_ptr<nn::Dropout> emb_dropout;

 private:
  LmModelOptions options_;
};

}  // namespace lsf::lm
