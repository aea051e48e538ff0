// Sampling the next token from a language model's log-probabilities (the sampling part of
// `lsf generate`): temperature, top-k and top-p (nucleus) filtering, greedy decoding, all
// driven by an lsf::Generator, so the same seed (and the same log-probabilities) gives the same
// text on every run and machine.
//
//   Generator gen(seed);
//   lm::SamplingOptions sampling{.temperature = 0.8, .top_k = 40, .top_p = 0.95};
//   Tensor next = lm::sample_next_tokens(log_probs, sampling, gen);   // [B, V] → [B] i64
//   Tensor text = lm::generate(decoder, prompt, /*count=*/200, sampling, gen);  // [B, 200]
//
// Per row: z = log_probs / temperature; keep the top_k most likely tokens (ties: lower id
// first); then keep the smallest prefix of them, most likely first, whose probability mass
// (after the top-k renormalisation) reaches top_p; renormalise; draw one uniform u ∈ [0, 1)
// from the generator (one f64 per row, rows in order) and take the first token whose
// cumulative probability exceeds u. temperature = 0 is greedy: the most likely token (lowest id
// among ties), no draw.
#pragma once

#include <cstdint>

#include "lsformer/engine/random.h"
#include "lsformer/engine/tensor.h"

namespace lsf::lm {

class IncrementalDecoder;

struct SamplingOptions {
  double temperature = 1.0;  // ≥ 0; 0 = greedy
  int64_t top_k = 0;         // ≥ 0; 0 = no top-k filter
  double top_p = 1.0;        // in (0, 1]; 1 = no nucleus filter
};

// Throws an lsf::Error naming the bad option.
void validate(const SamplingOptions& options);

// log_probs [B, V] (any float dtype, any device) → the sampled ids [B] i64 (on the CPU).
Tensor sample_next_tokens(const Tensor& log_probs, const SamplingOptions& options, Generator& generator);

// Feeds prompt [B, n] (n ≥ 1) to the decoder, then samples `count` tokens one after the other,
// feeding each back (the decoder ends having read the prompt and every sampled token) → the
// sampled ids [B, count] i64.
Tensor generate(IncrementalDecoder& decoder, const Tensor& prompt, int64_t count, const SamplingOptions& options,
                Generator& generator);

}  // namespace lsf::lm
