// lm::LmModelOptions: the options of the character-level Transformer-LS language model
// (transformer-ls.md §3.4, §3.8) and of its full-attention baseline, their validation, the
// padding rule for short (evaluation-tail) blocks and the parameter count.
//
//   lm::LmModelOptions o;                      // the enwik8 base model of §3.8, phase 1
//   o.vocab_size = 205;
//   lm::validate(o);                            // throws an lsf::Error naming the bad option
//   int64_t per_layer = lm::layer_parameter_count(o);   // 3,682,312 at d = 512, h = 8, FFN 2048, r = 1
//
// Option names follow the official fairseq config where one exists (in brackets).
#pragma once

#include <cstdint>
#include <string>

#include "lsformer/engine/random.h"

namespace lsf::lm {

// The attention of every layer: the causal long-short attention of §3.3, or the full-attention
// baseline (models/lm/causal_full_attention.h: Transformer-XL attention over [memory ; block]).
enum class LmAttention { LongShort, Full };
inline constexpr const char* kLmAttentionNames[] = {"long_short", "full"};  // names[i] names value i

// "long_short" / "full" (the config spelling) and back; an unknown name is an error naming it.
const char* to_string(LmAttention attention);
LmAttention parse_lm_attention(const std::string& name);

struct LmModelOptions {
  int64_t vocab_size = 256;      // V, rows of the tied token table (official: the dictionary size)
  int64_t dim = 512;             // d [d_model]; even (sinusoid halves, §3.5) and divisible by heads
  int64_t heads = 8;             // h [n_head], head width e = d / h
  int64_t layers = 12;           // [n_layer]
  int64_t ffn_dim = 2048;        // [d_inner], the FFN's hidden width
  int64_t block_length = 2048;   // M [tokens_per_sample]: the training block; incremental decoding
                                 // consumes tokens in blocks of M (forward accepts any length)
  int64_t memory_length = 2048;  // C [mem_len]: rows of every layer's memory
  int64_t chunk_length = 16;     // l [chunk_size]            (long-short only)
  int64_t rank = 1;              // r [chunk_rank]            (long-short only)
  int64_t window = 512;          // w [window_len]            (long-short only)
  double dropout = 0.2;          // [dropout]: attention output, FFN after GELU and after fc2
  double emb_dropout = 0.2;      // [emb_dropout]: scaled embeddings, relative-position table, final hidden
  bool bias = false;             // [use_bias]: biases of the q/k/v/out projections
  LmAttention attention = LmAttention::LongShort;
  bool fused = true;             // long-short: the fused CPU op (false: the composed reference)
  Generator* generator = nullptr;  // initialisation and dropout masks (null: the default generator)
};

// Throws an lsf::Error naming the offending option and what it must satisfy.
void validate(const LmModelOptions& options);

// The length forward runs a block of n tokens at: n itself when the attention accepts it, else
// n right-padded (token 0) to the next multiple of lcm(l, w) (§3.4 item 1; long-short only: when
// n % l ≠ 0, or n > w with n % w ≠ 0). Outputs are truncated back to n.
int64_t padded_length(const LmModelOptions& options, int64_t n);

// Parameters of one layer and of the whole model (tied output weight counted once), computed
// from the options without building anything.
int64_t layer_parameter_count(const LmModelOptions& options);
int64_t parameter_count(const LmModelOptions& options);

}  // namespace lsf::lm
