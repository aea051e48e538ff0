// The character-level language-model family for the trainer (models/train/task.h): data.task
// "lm". Its "data" section names the corpus (data/char_corpus.h) and the evaluation settings;
// its "model" section is lm::LmModelOptions (models/lm/lm_options.h). Spec:
// docs/transformer-ls.md §3.4, §3.6, §3.8; the batching is data/bptt.h's.
//
//   RunConfig c = load_config("configs/lm/quick.json");
//   const LmSections& s = lm_sections(c);                 // c's data and model sections
//   lm::LmModelOptions o = lm_model_options(c);           // vocab_size resolved, generator null
//   std::unique_ptr<Task> task = make_task(c);            // an LmTask
//
// Training (truncated BPTT, §3.4 item 7): step k runs BpttLoader batch k (train.batch_size
// streams B, blocks of model.block_length M) through the model with the memory the previous
// step left (one lm::Memory, [B, C, d] per layer, detached), loss = lm::lm_loss (§3.6: the NLL
// of the scored targets divided by all B·T positions). The memory is the task's state: saved in
// last.safetensors as "task.lm.memory.<layer>" and restored on --resume, so a resumed run is
// bit-identical. Memory resets: the memory starts at zeros; with data.reset_memory (default
// true) it returns to zeros where a batch restarts every stream (the first batch of each epoch,
// LmBatch::resets_memory). The official code never resets (its decoder keeps the previous
// batch's memory across epochs and even into validation): there the first block of an epoch
// attends to the end of the previous stream's text, which has nothing to do with it; resetting
// gives that block the state every evaluation starts from. data.reset_memory = false is the
// official behaviour.
//
// Evaluation: the whole split in data.eval_batch_size streams S (1 as the paper's evaluation)
// of data.eval_block_length tokens per block (0: model.block_length), through LmEvalLoader
// from a fresh zero memory, in eval mode: a pure function of (weights, split, config), and
// independent of the training memory. Metrics, in order: "bpc" (bits per scored character,
// lower is better: best checkpoints are chosen by it), "characters" (scored targets), and the
// split's add-one unigram and bigram BPC (data/lm_baselines.h, estimated on train; computed
// once per split and cached). EvalResult::loss is the mean NLL per scored character, in nats.
// The paper's evaluation — blocks of 256 with a 32,768-token memory, batch 1 — is
//   lsf eval --checkpoint C --split test --set data.eval_batch_size=1
//            --set data.eval_block_length=256 --set model.memory_length=32768
// (memory_length changes no parameter; a key that changes a parameter's shape is an error).
#pragma once

#include <memory>
#include <string>

#include "lsformer/data/char_corpus.h"
#include "lsformer/models/lm/lm_options.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/task.h"

namespace lsf::train {

// data.corpus: the formats data::load_char_corpus reads.
enum class LmCorpus { Gcide, Enwik8, Text8, Splits, Text };
inline constexpr const char* kLmCorpusNames[] = {"gcide", "enwik8", "text8", "splits", "text"};

// The "data" section of the char-LM task (data.task itself is RunConfig::task).
struct LmDataConfig {
  LmCorpus corpus = LmCorpus::Gcide;
  // gcide: a dictd .dict.dz / .dict file, empty = Debian's installed one; enwik8 / text8: the
  // file or its Hutter-prize .zip; splits: a directory with train.txt, dev.txt, test.txt (`lsf
  // data text` writes one); text: any text file (.zip / .gz / .dz too), split 90/5/5.
  std::string path;
  bool block_end_targets = false;  // false: a block's last position is not scored (official); true: data/bptt.h
  bool reset_memory = true;        // zero the training memory where every stream restarts (epoch start)
  int64_t eval_batch_size = 1;     // S: evaluation streams (the paper: 1)
  int64_t eval_block_length = 0;   // evaluation block; 0: model.block_length (the paper's evaluation: 256)
  int64_t eval_characters = 0;     // > 0: dev and test are cut to their first N characters (for quick
                                   // runs on a CPU; baselines and BPC then cover that prefix); 0: whole
};

// The "model" section: lm::LmModelOptions with vocab_size defaulting to 0, meaning "the
// corpus's" (256 for bytes, 27 for text8); the generator is not a config key.
struct LmModelConfig : lm::LmModelOptions {
  LmModelConfig() { vocab_size = 0; }
};

struct LmSections final : TaskSections {
  LmDataConfig data;
  LmModelConfig model;
  std::unique_ptr<TaskSections> clone() const override { return std::make_unique<LmSections>(*this); }
  void visit(FieldVisitor& v) override;
};

// The char-LM sections of a config (an error naming the task when it is not "lm").
const LmSections& lm_sections(const RunConfig& config);

// The vocabulary of the configured corpus (text8's 27 symbols, or bytes), known without reading it.
data::CharVocab lm_vocab(const RunConfig& config);

// The model options of the config: vocab_size 0 resolved to lm_vocab(config).size().
lm::LmModelOptions lm_model_options(const RunConfig& config);

// The configured corpus, read as data.corpus / data.path say (errors name the key and the file).
std::shared_ptr<const data::CharCorpus> load_lm_corpus(const RunConfig& config);

}  // namespace lsf::train
