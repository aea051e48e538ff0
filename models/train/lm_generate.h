// Text generation from a char-LM training checkpoint (what `lsf generate` runs): the model is
// rebuilt from the checkpoint's stored config (data.task must be "lm"), its weights loaded
// strictly, the prompt encoded with the corpus's vocabulary and fed through
// lm::IncrementalDecoder, then `tokens` characters are sampled one at a time
// (lm::sample_next_tokens: temperature, top-k, top-p, from Generator(seed)) and handed to `emit`
// as each is produced. Deterministic: the same checkpoint, prompt, options and seed give the same
// text (with the same thread count).
//
//   LmGenerateOptions o{.prompt = "Tidal ", .tokens = 200, .sampling = {.temperature = 0.8}, .seed = 1};
//   std::string text = generate_text("runs/quick/best.safetensors", o,
//                                    [](char c) { std::cout << c << std::flush; });
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lsformer/models/lm/sampling.h"

namespace lsf::train {

struct LmGenerateOptions {
  std::string prompt;                   // ≥ 1 character, each in the corpus's vocabulary
  int64_t tokens = 200;                 // characters to generate, ≥ 0
  lm::SamplingOptions sampling;         // temperature 0 = greedy
  uint64_t seed = 0;                    // the sampling generator's seed
  std::vector<std::string> overrides;   // "key=value" applied to the stored config (e.g. model.memory_length)
  bool echo_prompt = false;             // emit the prompt's characters first, once the model is loaded
  bool keep_text = true;                // false: the characters go to emit only and the returned text
                                        // is empty (lsf generate: a long stream holds nothing)
};

// The generated characters (without the prompt). Errors: a checkpoint of another task, a prompt
// character outside the vocabulary (named with its offset), bad sampling options.
std::string generate_text(const std::string& checkpoint, const LmGenerateOptions& options,
                          const std::function<void(char)>& emit = {});

}  // namespace lsf::train
