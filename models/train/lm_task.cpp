// The char-LM task: config sections, corpus, model, truncated-BPTT training steps with the
// carried memory, and bits-per-character evaluation (see lm_task.h).
#include "lsformer/models/train/lm_task.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <map>
#include <sstream>

#include "lsformer/data/bptt.h"
#include "lsformer/data/debian_corpus.h"
#include "lsformer/data/lm_baselines.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/engine/enum_names.h"
#include "lsformer/engine/error.h"
#include "lsformer/engine/profiler.h"
#include "lsformer/models/lm/lm_loss.h"
#include "lsformer/models/lm/lm_model.h"
#include "lsformer/models/lm/memory.h"
#include "lsformer/models/nn/capture.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/models/train/config_checks.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/loss.h"

namespace lsf::train {
namespace {

namespace fs = std::filesystem;

const char* corpus_name(LmCorpus c) { return enum_name(c, kLmCorpusNames); }

// 1997616 → "1,997,616".
std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

data::LmSplit split_of(const std::string& split) {
  LSF_CHECK(split == "train" || split == "dev" || split == "test") << "unknown split '" << split << "' (expected train, dev or test)";
  return data::parse_lm_split(split);
}

// ---- the config sections ----

// Every constraint of lm::validate, each naming its dotted key (lm::validate runs last as a
// backstop and names the option).
void validate_lm(const std::string& source, const RunConfig& c) {
  const LmSections& s = lm_sections(c);
  const LmDataConfig& d = s.data;
  LSF_CHECK(d.corpus == LmCorpus::Gcide || !d.path.empty())
      << source << ": 'data.path' must name the " << corpus_name(d.corpus) << " data (data.corpus \"" << corpus_name(d.corpus)
      << "\"); only \"gcide\" has a default (Debian's dict-gcide)";
  at_least(source, "data.eval_batch_size", double(d.eval_batch_size), 1);
  at_least(source, "data.eval_block_length", double(d.eval_block_length), 0);
  LSF_CHECK(d.eval_characters == 0 || d.eval_characters >= 2)
      << source << ": 'data.eval_characters' must be 0 (the whole dev and test splits) or ≥ 2, got " << d.eval_characters;
  // The evaluation cuts a split into eval_batch_size streams of ⌈n / streams⌉ characters; a
  // stream of one character has nothing to predict, so n ≤ streams would score no character.
  LSF_CHECK(d.eval_characters == 0 || d.eval_characters > d.eval_batch_size)
      << source << ": 'data.eval_characters' (" << d.eval_characters << ") must exceed 'data.eval_batch_size' ("
      << d.eval_batch_size << "): each of the evaluation's streams needs two characters to score one";

  const LmModelConfig& m = s.model;
  const data::CharVocab vocab = lm_vocab(c);
  at_least(source, "model.vocab_size", double(m.vocab_size), 0);
  LSF_CHECK(m.vocab_size == 0 || m.vocab_size >= vocab.size())
      << source << ": 'model.vocab_size' (" << m.vocab_size << ") is smaller than the " << corpus_name(d.corpus) << " vocabulary ("
      << vocab.size() << " symbols); 0 takes the corpus's";
  LSF_CHECK(m.dim >= 2 && m.dim % 2 == 0)
      << source << ": 'model.dim' must be even and ≥ 2 (the sinusoid tables have sin and cos halves), got " << m.dim;
  at_least(source, "model.heads", double(m.heads), 1);
  LSF_CHECK(m.dim % m.heads == 0) << source << ": 'model.dim' (" << m.dim << ") must be a multiple of 'model.heads' (" << m.heads << ")";
  at_least(source, "model.layers", double(m.layers), 1);
  at_least(source, "model.ffn_dim", double(m.ffn_dim), 1);
  at_least(source, "model.block_length", double(m.block_length), 1);
  at_least(source, "model.memory_length", double(m.memory_length), 1);
  in_unit(source, "model.dropout", m.dropout);
  in_unit(source, "model.emb_dropout", m.emb_dropout);
  if (m.attention == lm::LmAttention::LongShort) {
    at_least(source, "model.chunk_length", double(m.chunk_length), 1);
    at_least(source, "model.rank", double(m.rank), 1);
    at_least(source, "model.window", double(m.window), 1);
    const int64_t M = m.block_length, C = m.memory_length, l = m.chunk_length, w = m.window;
    LSF_CHECK(M % l == 0) << source << ": 'model.block_length' (" << M << ") must be a multiple of 'model.chunk_length' (" << l << ")";
    LSF_CHECK(M <= w || M % w == 0) << source << ": 'model.block_length' (" << M << ") > 'model.window' (" << w
                                    << ") must be a multiple of it (the official tiling)";
    LSF_CHECK(C % l == 0) << source << ": 'model.memory_length' (" << C << ") must be a multiple of 'model.chunk_length' (" << l << ")";
    LSF_CHECK(C >= w) << source << ": 'model.memory_length' (" << C << ") must be ≥ 'model.window' (" << w
                      << "): the first query's window reaches w − 1 tokens into the memory";
  }
  try {
    lm::validate(lm_model_options(c));
  } catch (const Error& e) {
    LSF_FAIL() << source << ": the 'model' section: " << e.what();
  }
}

void check_lm_data_paths(const RunConfig& config) {
  const LmDataConfig& d = lm_sections(config).data;
  if (d.corpus == LmCorpus::Gcide && d.path.empty()) {
    data::find_gcide();  // throws saying that dict-gcide is needed and how to install it
    return;
  }
  LSF_CHECK(fs::exists(d.path)) << "'data.path': the " << corpus_name(d.corpus) << " data '" << d.path << "' does not exist"
                                << (d.corpus == LmCorpus::Splits ? " (`lsf data text --from FILE --out DIR` writes a split directory)" : "");
  // The directory `lsf data text` writes is read by corpus "splits"; every other corpus is a file.
  LSF_CHECK(d.corpus == LmCorpus::Splits || !fs::is_directory(d.path))
      << "'data.path' '" << d.path << "' is a directory, but 'data.corpus' " << corpus_name(d.corpus) << " reads a file"
      << (fs::exists(fs::path(d.path) / "train.txt")
              ? "; it holds train.txt: for the split files `lsf data text` writes, set 'data.corpus' to \"splits\""
              : "");
}

// ---- the Task ----

class LmTask final : public Task {
 public:
  explicit LmTask(const RunConfig& config)
      : config_(config), sections_(lm_sections(config)), options_(lm_model_options(config)) {}

  void load_data(const std::vector<std::string>& splits) override {
    for (const auto& s : splits) split_of(s);
    corpus_ = load_lm_corpus(config_);
    const bool train = std::find(splits.begin(), splits.end(), "train") != splits.end();
    if (train) {
      try {
        train_batches_ = std::make_unique<data::BpttLoader>(
            corpus_, data::LmSplit::kTrain,
            data::BpttOptions{.batch_size = config_.train.batch_size, .block_len = options_.block_length,
                              .block_end_targets = sections_.data.block_end_targets});
      } catch (const Error& e) {
        LSF_FAIL() << "'train.batch_size' (" << config_.train.batch_size << ") streams of 'model.block_length' ("
                   << options_.block_length << ") tokens do not fit the training split: " << e.what();
      }
    }
    for (const auto& s : splits) {
      const std::vector<uint8_t>& tokens = corpus_->split(split_of(s));
      LSF_CHECK(tokens.size() >= 2) << "the " << s << " split of corpus '" << corpus_->name << "' has " << tokens.size()
                                    << " characters: nothing to predict";
      if (s == "train") continue;  // its evaluation is `lsf eval --split train`'s alone (evaluate checks it)
      const data::LmEvalLoader loader = eval_loader(split_of(s));
      LSF_CHECK(loader.total_targets() > 0)
          << "the " << s << " split of corpus '" << corpus_->name << "' (" << tokens.size()
          << " characters) cut into 'data.eval_batch_size' (" << sections_.data.eval_batch_size
          << ") streams in blocks of " << loader.options().block_len
          << " leaves no character to score (a stream's first character and, without 'data.block_end_targets', each "
             "block's last are not scored): lower data.eval_batch_size or raise data.eval_block_length";
    }
  }

  std::string describe_data() const override {
    std::ostringstream os;
    os << corpus_->name << " (" << with_commas(int64_t(corpus_->train.size())) << " / " << with_commas(int64_t(corpus_->dev.size()))
       << " / " << with_commas(int64_t(corpus_->test.size())) << " characters of train / dev / test, " << corpus_->vocab.size()
       << " symbols" << (sections_.data.eval_characters > 0 ? "; dev and test cut by data.eval_characters" : "") << "), "
       << lm::to_string(options_.attention) << " attention, blocks of " << options_.block_length
       << " with a memory of " << options_.memory_length;
    if (train_batches_) os << ", " << train_batches_->batches_per_epoch() << " steps per epoch";
    return os.str();
  }

  std::shared_ptr<nn::Module> build_model() override { return std::make_shared<lm::TransformerLSModel>(options_); }

  // The model follows from the config alone (the vocabulary is the corpus kind's): lsf info
  // --model describes a paper config without its corpus file.
  ModelSummary summarize_model() override {
    nn::init::SkipRandomInit skip;  // counting only
    const std::shared_ptr<nn::Module> model = build_model();
    ModelSummary summary;
    summary.description = model->type_name();
    summary.parameters = model->parameter_count();
    return summary;
  }

  // Parameters from the shapes (lm_model.h: tied token table, per layer Q/K/V/O, FFN, norms and
  // the long-short projections dconv_1, r_net, r_net_chunk), activations of one training block
  // (B × M queries, each seeing w window keys plus r per chunk of the block and memory, or
  // every key with full attention) and every layer's memory [B, C, d] (evaluating: below), and
  // the corpus: its file size, × 4 when compressed (.zip / .gz / .dz), held twice while the
  // splits are cut.
  MemoryEstimate estimate_memory(MemoryUse use) const override {
    const lm::LmModelOptions& o = options_;
    const double d = double(o.dim), heads = double(o.heads), layers = double(o.layers);
    const double M = double(o.block_length), C = double(o.memory_length);
    const bool ls = o.attention == lm::LmAttention::LongShort;
    const double extra = ls ? d * heads * double(o.rank) + heads * double(o.rank) + 2 * d * d + d : 0;
    const double span = ls ? double(o.window) + (M + C) / double(o.chunk_length) * double(o.rank) : M + C;
    const double parameters = double(o.vocab_size) * d + transformer_block_parameters(d, double(o.ffn_dim), layers, extra) + 2 * d;
    MemoryEstimate e;
    add_parameter_parts(e, parameters, use, config_);
    const double streams = double(use == MemoryUse::Train ? config_.train.batch_size : sections_.data.eval_batch_size);
    if (use == MemoryUse::Train) {
      e.add("activations", transformer_activation_bytes(streams * M, d, double(o.ffn_dim), heads, span, layers));
      e.add("memory", 4 * layers * streams * C * d);
    } else {
      // Without a graph one layer's intermediates live at a time: per token its input, LN and
      // attention output, the FFN's hidden row, its scores over its span (logits, mask,
      // probabilities), and the batch's logits and log-probabilities (blocks of
      // data.eval_block_length when set, no wider than a stream). Every layer's memory is held
      // twice while a batch replaces it, and the layer in flight makes about five more [B, C, d]
      // tensors of it (its LN, the chunk reshapes, [memory ; block]). Checked against the
      // allocator's peak in tests/test_memory_estimate.cpp.
      double Me = sections_.data.eval_block_length > 0 ? double(sections_.data.eval_block_length) : M;
      if (sections_.data.eval_characters > 0) Me = std::min(Me, std::ceil(double(sections_.data.eval_characters) / streams));
      const double eval_span = ls ? double(o.window) + (Me + C) / double(o.chunk_length) * double(o.rank) : Me + C;
      e.add("activations", 4 * streams * Me * (3 * d + double(o.ffn_dim) + 3 * heads * eval_span + 2 * double(o.vocab_size)));
      e.add("memory", 4 * streams * C * d * (2 * layers + 5));
    }
    std::string path = sections_.data.path;
    if (path.empty() && sections_.data.corpus == LmCorpus::Gcide) {
      try {
        path = data::find_gcide();
      } catch (const Error&) {  // load_data says that dict-gcide is missing
      }
    }
    std::error_code ec;
    if (!path.empty() && fs::is_regular_file(path, ec)) {
      const std::string ext = fs::path(path).extension().string();
      const bool compressed = ext == ".zip" || ext == ".gz" || ext == ".dz";
      e.add("corpus", 2.0 * double(fs::file_size(path, ec)) * (compressed ? 4 : 1), MemoryPlace::Host);
    }
    return e;
  }

  TrainStep train_step(nn::Module& module, int64_t step) override {
    LSF_CHECK(train_batches_ != nullptr) << "internal: the char-LM task trains without its training split loaded";
    lm::TransformerLSModel& model = lm_model(module);
    const data::LmBatch batch = shard_rows(train_batches_->batch(step));
    const Tensor& weight = model.in_emb->weight;
    if (memory_.empty()) {
      memory_ = model.initial_memory(shard_.rows(config_.train.batch_size));  // §3.4 item 7
    } else {
      if (memory_.layers.front().device() != weight.device() || memory_.layers.front().dtype() != weight.dtype())
        memory_ = memory_.to(weight.options());  // restored from a checkpoint (CPU tensors)
      if (batch.resets_memory && sections_.data.reset_memory) memory_.reset();
    }
    const Tensor log_probs = model.forward(batch.inputs.to(weight.device()), memory_);
    TrainStep s;
    profiler::PhaseScope phase("loss");
    s.loss = lm::lm_loss(log_probs, batch.targets.to(weight.device()), data::kLmIgnoreIndex);
    // The throughput counts an even share of the global batch's tokens per rank (padding past a
    // stream's end is not visible in the cut rows); the ranks' shares sum to the global count.
    s.units = double(batch.num_tokens) / double(shard_.world);
    // lm_loss divides the scored targets' NLL by all positions: undo that for the window's BPC.
    s.tally.add("nll", double(s.loss.item<float>()) * double(batch.targets.numel()));
    s.tally.add("targets", double(batch.num_targets));
    return s;
  }

  std::vector<Metric> window_metrics(const Tally& sums, int64_t /*steps*/) const override {
    const double targets = sums.get("targets");
    return {{"bpc", targets > 0 ? lm::bits_per_character(sums.get("nll") / targets) : 0.0, Metric::Kind::Number, "bpc"}};
  }

  const char* throughput_unit() const override { return "tokens"; }

  EvalResult evaluate(nn::Module& module, const std::string& split, int64_t max_batches) override {
    LSF_CHECK(corpus_ != nullptr) << "internal: the char-LM task evaluates before load_data";
    const data::LmSplit which = split_of(split);
    lm::TransformerLSModel& model = lm_model(module);
    const bool was_training = model.is_training();
    model.eval();
    NoGradGuard no_grad;
    const data::LmEvalLoader loader = eval_loader(which);
    int64_t batches = loader.num_batches();
    if (max_batches > 0) batches = std::min(batches, max_batches);
    const Tensor& weight = model.in_emb->weight;
    lm::Memory memory = model.initial_memory(sections_.data.eval_batch_size);  // a fresh zero memory
    double nll = 0.0;  // nats, summed over the scored characters
    int64_t scored = 0;
    for (int64_t j = 0; j < batches; ++j) {
      const data::LmBatch b = loader.batch(j);
      const Tensor log_probs = model.forward(b.inputs.to(weight.device()), memory);
      const int64_t positions = b.targets.numel();
      nll += double(nll_loss(log_probs.reshape({positions, log_probs.size(2)}), b.targets.reshape({positions}).to(weight.device()),
                             {.ignore_index = data::kLmIgnoreIndex, .reduction = Reduction::Sum})
                        .item<float>());
      scored += b.num_targets;
    }
    model.train(was_training);
    // 0 / 0 is no result: a split whose streams hold one character each (load_data refuses
    // such dev and test splits) or too few batches.
    LSF_CHECK(scored > 0) << "evaluating the " << split << " split scored no character (" << corpus_->split(which).size()
                          << " characters in 'data.eval_batch_size' = " << sections_.data.eval_batch_size << " streams, "
                          << batches << " batches): lower data.eval_batch_size";
    const Baselines& base = baselines(which);
    EvalResult r;
    r.split = split;
    r.loss = nll / double(scored);
    r.metrics = {{"bpc", lm::bits_per_character(r.loss), Metric::Kind::Number, "bpc"},
                 {"characters", double(scored), Metric::Kind::Count, ""},
                 {"unigram_bpc", base.unigram, Metric::Kind::Number, ""},
                 {"bigram_bpc", base.bigram, Metric::Kind::Number, ""}};
    return r;
  }

  // The evaluation's batches of a split: data.eval_batch_size streams, blocks of
  // data.eval_block_length (or the model's block length).
  data::LmEvalLoader eval_loader(data::LmSplit which) const {
    const int64_t block = sections_.data.eval_block_length > 0 ? sections_.data.eval_block_length : options_.block_length;
    return data::LmEvalLoader(corpus_, which,
                              {.batch_size = sections_.data.eval_batch_size, .block_len = block,
                               .block_end_targets = sections_.data.block_end_targets});
  }

  // Examples are the split's blocks of model.block_length characters (block i = characters
  // [i·M, (i+1)·M)); the memory is that of an evaluation that started ⌈C/M⌉ blocks earlier
  // (enough blocks to fill it; fewer at the split's start, where the rest is the zero memory).
  int64_t examples(const std::string& split) const override {
    LSF_CHECK(corpus_ != nullptr) << "internal: the char-LM task runs an example before load_data";
    return int64_t(corpus_->split(split_of(split)).size()) / options_.block_length;
  }

  InspectedExample forward_example(nn::Module& module, const std::string& split, int64_t index) override {
    const int64_t count = examples(split), M = options_.block_length, C = options_.memory_length;
    LSF_CHECK(count > 0) << "the " << split << " split holds no whole block of " << M << " characters (it has "
                         << corpus_->split(split_of(split)).size() << ")";
    LSF_CHECK(index >= 0 && index < count) << "block index " << index << " is out of range for the " << split
                                           << " split (0.." << count - 1 << ": blocks of " << M << " characters)";
    const std::vector<uint8_t>& text = corpus_->split(split_of(split));
    lm::TransformerLSModel& model = lm_model(module);
    const bool was_training = model.is_training();
    model.eval();
    NoGradGuard no_grad;
    const Tensor& weight = model.in_emb->weight;
    auto block = [&](int64_t k) {
      std::vector<int64_t> ids(text.begin() + k * M, text.begin() + (k + 1) * M);
      return tensor(ids, {1, M}).to(weight.device());
    };
    lm::Memory memory = model.initial_memory(1);
    {
      nn::CapturePause warm_up;  // only block `index` is observed
      for (int64_t k = std::max<int64_t>(0, index - (C + M - 1) / M); k < index; ++k) model.forward(block(k), memory);
    }
    model.forward(block(index), memory);
    model.train(was_training);
    InspectedExample out;
    out.memory = C;
    for (int64_t pos = index * M - C; pos < (index + 1) * M; ++pos) {
      if (pos < 0) {
        out.tokens.push_back("");  // the zero memory before the split's start
        continue;
      }
      const uint8_t byte = corpus_->vocab.byte_of(text[size_t(pos)]);
      out.tokens.push_back(byte == ' ' ? "␣" : byte == '\n' ? "⏎" : byte >= 0x20 && byte < 0x7f ? std::string(1, char(byte)) : "·");
    }
    out.description = "char-LM " + split + " block " + std::to_string(index) + ": characters " + std::to_string(index * M) +
                      ".." + std::to_string((index + 1) * M - 1) + " after a memory of " + std::to_string(C);
    return out;
  }

  Selection selection() const override { return {"bpc", /*higher_is_better=*/false}; }

  std::string describe(const EvalResult& r) const override {
    return "bpc " + fixed(r.metric("bpc"), 3) + " (" + with_commas(int64_t(r.metric("characters"))) + " characters; unigram " +
           fixed(r.metric("unigram_bpc"), 3) + ", bigram " + fixed(r.metric("bigram_bpc"), 3) + ")";
  }

  // Data parallelism: rank r trains streams [r·B/N, (r+1)·B/N) of the B truncated-BPTT streams
  // (every rank cuts the global batch, a cheap copy of token ids) and keeps their memory.
  void set_data_shard(const DataShard& shard) override { shard_ = shard; }

  // The training memory: "lm.memory.<layer>" → [B, C, d] (this rank's streams when sharded);
  // nothing before the first step.
  NamedTensors state() const override { return memory_.empty() ? NamedTensors{} : lm::memory_tensors(memory_); }

  void restore_state(const NamedTensors& tensors) override {
    if (tensors.empty()) {  // the state before the first step: the next step starts from zeros
      memory_ = {};
      return;
    }
    std::map<std::string, Tensor> by_name(tensors.begin(), tensors.end());
    lm::Memory memory = lm::memory_from_tensors(by_name, options_);
    LSF_CHECK(memory.batch_size() == shard_.rows(config_.train.batch_size))
        << "the checkpoint's char-LM memory has " << memory.batch_size() << " streams but 'train.batch_size' is "
        << config_.train.batch_size << (shard_.world > 1 ? " (this rank's share: " + std::to_string(shard_.rows(config_.train.batch_size)) + ")" : "");
    memory_ = std::move(memory);
  }

 private:
  DataShard shard_;

  // This rank's streams (rows) of a global training batch, with their counts.
  data::LmBatch shard_rows(data::LmBatch b) const {
    if (shard_.world == 1) return b;
    const int64_t B = b.inputs.size(0), first = shard_.first(B), rows = shard_.rows(B);
    b.inputs = b.inputs.narrow(0, first, rows).contiguous();
    b.targets = b.targets.narrow(0, first, rows).contiguous();
    b.num_targets = 0;
    for (const int64_t t : b.targets.to_vector<int64_t>()) b.num_targets += t != data::kLmIgnoreIndex;
    return b;
  }
  struct Baselines {
    double unigram = 0, bigram = 0;
  };

  static lm::TransformerLSModel& lm_model(nn::Module& model) {
    auto* m = dynamic_cast<lm::TransformerLSModel*>(&model);
    LSF_CHECK(m != nullptr) << "internal: the char-LM task was given a model that is not an lm::TransformerLSModel";
    return *m;
  }

  // The split's unigram and bigram BPC, computed on first use.
  const Baselines& baselines(data::LmSplit split) {
    auto it = baselines_.find(split);
    if (it == baselines_.end())
      it = baselines_.emplace(split, Baselines{data::unigram_bpc(*corpus_, split).bits_per_char,
                                               data::bigram_bpc(*corpus_, split).bits_per_char})
               .first;
    return it->second;
  }

  RunConfig config_;
  LmSections sections_;
  lm::LmModelOptions options_;
  std::shared_ptr<const data::CharCorpus> corpus_;
  std::unique_ptr<data::BpttLoader> train_batches_;
  lm::Memory memory_;  // carried from step to step (the task's state)
  std::map<data::LmSplit, Baselines> baselines_;
};

// The family's registration: one task, "lm".
[[maybe_unused]] const bool kRegistered =
    register_task_family(task_family_of<LmSections, LmTask>("lm", {"lm"}, validate_lm, check_lm_data_paths));

}  // namespace

void LmSections::visit(FieldVisitor& v) {
  v.field("data.corpus", data.corpus, kLmCorpusNames);
  v.field("data.path", data.path);
  v.field("data.block_end_targets", data.block_end_targets);
  v.field("data.reset_memory", data.reset_memory);
  v.field("data.eval_batch_size", data.eval_batch_size);
  v.field("data.eval_block_length", data.eval_block_length);
  v.field("data.eval_characters", data.eval_characters);
  v.field("model.vocab_size", model.vocab_size);
  v.field("model.dim", model.dim);
  v.field("model.heads", model.heads);
  v.field("model.layers", model.layers);
  v.field("model.ffn_dim", model.ffn_dim);
  v.field("model.attention", model.attention, lm::kLmAttentionNames);
  v.field("model.block_length", model.block_length);
  v.field("model.memory_length", model.memory_length);
  v.field("model.chunk_length", model.chunk_length);
  v.field("model.rank", model.rank);
  v.field("model.window", model.window);
  v.field("model.dropout", model.dropout);
  v.field("model.emb_dropout", model.emb_dropout);
  v.field("model.bias", model.bias);
  v.field("model.fused", model.fused);
}

const LmSections& lm_sections(const RunConfig& config) { return config.sections_as<LmSections>(); }

data::CharVocab lm_vocab(const RunConfig& config) {
  data::CharVocab v;
  v.alphabet = lm_sections(config).data.corpus == LmCorpus::Text8 ? data::CharAlphabet::kText8 : data::CharAlphabet::kBytes;
  return v;
}

lm::LmModelOptions lm_model_options(const RunConfig& config) {
  lm::LmModelOptions o = lm_sections(config).model;
  if (o.vocab_size == 0) o.vocab_size = lm_vocab(config).size();
  o.generator = nullptr;
  return o;
}

std::shared_ptr<const data::CharCorpus> load_lm_corpus(const RunConfig& config) {
  validate_data_paths(config);
  const LmDataConfig& d = lm_sections(config).data;
  data::CharCorpus corpus;
  try {
    corpus = data::load_char_corpus(corpus_name(d.corpus), d.path);
  } catch (const Error& e) {
    LSF_FAIL() << "'data.corpus' " << corpus_name(d.corpus) << ", 'data.path' '" << d.path << "': " << e.what();
  }
  if (d.eval_characters > 0)
    for (std::vector<uint8_t>* split : {&corpus.dev, &corpus.test})
      if (int64_t(split->size()) > d.eval_characters) split->resize(size_t(d.eval_characters));
  return std::make_shared<const data::CharCorpus>(std::move(corpus));
}

}  // namespace lsf::train
