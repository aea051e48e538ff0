// generate_text: a char-LM checkpoint, a prompt and a sampler → text, one character at a time
// (see lm_generate.h).
#include "lsformer/models/train/lm_generate.h"

#include <filesystem>

#include "lsformer/engine/autograd.h"
#include "lsformer/engine/error.h"
#include "lsformer/engine/random.h"
#include "lsformer/models/lm/incremental.h"
#include "lsformer/models/lm/lm_model.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/models/train/checkpoint.h"
#include "lsformer/models/train/lm_task.h"
#include "lsformer/models/train/trainer.h"
#include "lsformer/ops/factory.h"

namespace lsf::train {
namespace {

// A printable form of a byte for messages: 'x', or \xNN.
std::string show_byte(uint8_t b) {
  static const char* hex = "0123456789abcdef";
  if (b >= 0x20 && b < 0x7f) return std::string("'") + char(b) + "'";
  return std::string("\\x") + hex[b >> 4] + hex[b & 15];
}

// The prompt as ids [1, n] of `vocab`; a character outside it is an error naming it and its offset.
Tensor encode_prompt(const std::string& prompt, const data::CharVocab& vocab) {
  std::vector<int64_t> ids;
  ids.reserve(prompt.size());
  for (size_t i = 0; i < prompt.size(); ++i) {
    const uint8_t byte = uint8_t(prompt[i]);
    const int32_t id = vocab.id_of(byte);
    LSF_CHECK(id >= 0) << "the prompt's character " << show_byte(byte) << " (byte " << int(byte) << ", offset " << i
                       << ") is not in the model's " << vocab.name() << " vocabulary"
                       << (vocab.alphabet == data::CharAlphabet::kText8 ? " (text8: the letters a-z and the space)" : "");
    ids.push_back(id);
  }
  return tensor(ids, {1, int64_t(ids.size())});
}

}  // namespace

std::string generate_text(const std::string& checkpoint, const LmGenerateOptions& options,
                          const std::function<void(char)>& emit) {
  LSF_CHECK(std::filesystem::exists(checkpoint)) << "checkpoint '" << checkpoint << "' does not exist";
  LSF_CHECK(!options.prompt.empty()) << "generate: the prompt is empty (give at least one character)";
  LSF_CHECK(options.tokens >= 0) << "generate: the number of characters to generate must be ≥ 0, got " << options.tokens;
  lm::validate(options.sampling);
  const RunConfig config = checkpoint_config(checkpoint, options.overrides);
  LSF_CHECK(dynamic_cast<const LmSections*>(config.sections.get()) != nullptr)
      << "'" << checkpoint << "' is a checkpoint of task \"" << config.task
      << "\": text generation needs a character-level language model (data.task \"lm\")";
  const data::CharVocab vocab = lm_vocab(config);
  const Tensor prompt = encode_prompt(options.prompt, vocab);

  std::unique_ptr<lm::TransformerLSModel> model;
  {
    nn::init::SkipRandomInit skip;  // every parameter is loaded next
    model = std::make_unique<lm::TransformerLSModel>(lm_model_options(config));
  }
  load_checkpoint(checkpoint, *model, nullptr, /*restore_rng=*/false);
  model->eval();

  if (emit && options.echo_prompt)
    for (char c : options.prompt) emit(c);
  NoGradGuard no_grad;
  Generator generator(options.seed);
  lm::IncrementalDecoder decoder(*model, /*batch=*/1);
  Tensor log_probs = decoder.feed(prompt);
  std::string text;  // grown as sampled: reserving `tokens` up front failed for huge counts
  for (int64_t i = 0; i < options.tokens; ++i) {
    const Tensor next = lm::sample_next_tokens(log_probs, options.sampling, generator);  // [1] i64
    const char c = char(vocab.byte_of(int32_t(next.item<int64_t>())));
    if (options.keep_text) text += c;
    if (emit) emit(c);
    if (i + 1 < options.tokens) log_probs = decoder.step(next);
  }
  return text;
}

}  // namespace lsf::train
