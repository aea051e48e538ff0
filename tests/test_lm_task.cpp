// The char-LM family in the trainer (models/train/lm_task.h, lm_generate.h): a short run lowers
// the loss, lsf eval's computation reproduces the final BPC, a resumed run is bit-identical with
// its memory, the memory persists across steps and resets where the streams restart, --init-from
// starts a new phase from a checkpoint's weights, evaluation settings can be overridden while
// shape changes are refused, generation is deterministic, config errors name their keys, and the
// shipped configs carry docs/transformer-ls.md §3.8's values.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "run_helpers.h"
#include "lsformer/models/lm/lm_loss.h"
#include "lsformer/models/lm/lm_model.h"
#include "lsformer/models/train/checkpoint.h"
#include "lsformer/models/train/lm_generate.h"
#include "lsformer/models/train/lm_task.h"
#include "lsformer/models/train/trainer.h"

namespace fs = std::filesystem;
using namespace lsf;
using Catch::Contains;

namespace {

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("lm_task", name); }

// A split directory (train.txt, dev.txt, test.txt) written once per process: 600 / 120 / 120
// characters. Blocks of 8 in 4 streams give 18 steps per epoch.
const fs::path& corpus_dir() {
  static const fs::path dir = [] {
    fs::path d = fresh_dir("corpus");
    fs::create_directories(d);
    std::ofstream(d / "train.txt") << testing::word_salad(600, 1);
    std::ofstream(d / "dev.txt") << testing::word_salad(120, 2);
    std::ofstream(d / "test.txt") << testing::word_salad(120, 3);
    return d;
  }();
  return dir;
}
constexpr int64_t kStepsPerEpoch = 600 / 8 / 4;  // 75 blocks dealt into 4 streams

// d = 16, 2 heads, 2 layers, M = C = 8, l = 2, r = 1, w = 4; dropout on, so that a resume must
// restore the RNG; one thread, so every number is deterministic.
std::string tiny_config() {
  return R"({
  "data": {"task": "lm", "corpus": "splits", "path": ")" +
         corpus_dir().string() + R"(", "eval_batch_size": 2},
  "model": {"dim": 16, "heads": 2, "layers": 2, "ffn_dim": 32, "block_length": 8, "memory_length": 8,
            "chunk_length": 2, "rank": 1, "window": 4, "dropout": 0.1, "emb_dropout": 0.1},
  "optimizer": {"name": "adamw", "lr": 1e-2, "eps": 1e-8, "weight_decay": 0.01},
  "schedule": {"name": "warmup_constant", "warmup_steps": 5},
  "train": {"steps": 40, "batch_size": 4, "eval_every": 10, "log_every": 5, "checkpoint_every": 5, "seed": 2, "threads": 1}
})";
}

std::vector<nlohmann::json> read_metrics(const fs::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// Every tensor of two safetensors files, bit for bit (names filtered by `keep`).
void check_same_tensors(const fs::path& a, const fs::path& b, const std::function<bool(const std::string&)>& keep) {
  SafetensorsContents fa = load_safetensors(a.string()), fb = load_safetensors(b.string());
  int64_t compared = 0;
  for (const auto& [name, t] : fa.tensors) {
    if (!keep(name)) continue;
    INFO(name);
    REQUIRE(fb.tensors.count(name));
    CHECK(t.to_vector<double>() == fb.tensors.at(name).to_vector<double>());
    ++compared;
  }
  CHECK(compared > 0);
}

bool is_weight(const std::string& name) { return name.rfind("optimizer.", 0) != 0 && name.rfind("task.", 0) != 0; }

// The loss of training batch `step` computed by hand with `memory` (updated), the model as it is.
double manual_loss(lm::TransformerLSModel& model, const data::BpttLoader& loader, int64_t step, lm::Memory& memory) {
  data::LmBatch b = loader.batch(step);
  return lm::lm_loss(model.forward(b.inputs, memory), b.targets, data::kLmIgnoreIndex).item<float>();
}

}  // namespace

TEST_CASE("lm: a short run lowers the loss, and lsf eval reproduces the final BPC exactly", "[train][lm]") {
  const train::RunConfig config = train::parse_config(tiny_config());
  fs::path dir = fresh_dir("short");
  std::ostringstream log;
  train::TrainSummary s = testing::run_training(config, dir, log);
  INFO(log.str());
  REQUIRE(s.finished);
  // The progress lines show bits per character and tokens per second.
  CHECK_THAT(log.str(), Contains("bpc ") && Contains("tokens/s") && Contains("dev bpc "));
  std::vector<double> bpc;
  for (const auto& j : read_metrics(dir / "metrics.jsonl"))
    if (j["split"] == "train") bpc.push_back(j["bpc"].get<double>());
  REQUIRE(bpc.size() == 8);
  CHECK(bpc.front() > 6.0);             // about log2(256) = 8 at the start
  CHECK(bpc.back() < bpc.front() - 2);  // it learns (the salad's unigram entropy is about 3.5 bits)
  // Below the unigram baseline of the dev split: the model has learnt more than letter counts.
  CHECK(s.dev.metric("bpc") < s.dev.metric("unigram_bpc"));
  // Every dev character but the last of each of the 2 evaluation streams' blocks is scored.
  CHECK(s.dev.metric("characters") == 120 - 2 * (60 / 8 + 1));
  for (const char* split : {"dev", "test"}) {
    INFO(split);
    const train::EvalResult& trained = std::string(split) == "dev" ? s.dev : s.test;
    train::EvalResult again = train::evaluate_checkpoint(s.best_checkpoint, split);
    CHECK(again.metric("bpc") == trained.metric("bpc"));  // the same computation, bit for bit
    CHECK(again.metric("characters") == trained.metric("characters"));
    CHECK(again.metric("bigram_bpc") == trained.metric("bigram_bpc"));
    CHECK(again.loss == trained.loss);
    const std::string line = train::describe_result(s.best_checkpoint, again);
    CHECK(line.rfind("bpc ", 0) == 0);
    CHECK_THAT(line, Contains(" characters; unigram ") && Contains(", bigram "));
  }
  fs::remove_all(dir);
}

TEST_CASE("lm: a resumed run ends bit-identical to an uninterrupted one, memory included", "[train][lm]") {
  const train::RunConfig config = train::parse_config(tiny_config());
  fs::path a = fresh_dir("resume_a"), b = fresh_dir("resume_b");
  std::ostringstream log;
  testing::run_training(config, a, log);
  // Stop at step 13, inside the first epoch (18 steps): the memory must come back from the
  // checkpoint, and the resumed part crosses the epoch boundary where it resets.
  testing::run_training(config, b, log, false, /*stop_after=*/13);
  SafetensorsContents stopped = load_safetensors((b / "last.safetensors").string());
  for (const char* name : {"task.lm.memory.0", "task.lm.memory.1"}) {
    INFO(name);
    REQUIRE(stopped.tensors.count(name));
    CHECK(stopped.tensors.at(name).shape() == Shape{4, 8, 16});  // [B, C, d]
    CHECK(stopped.tensors.at(name).abs().sum().item<float>() > 0.0f);
  }
  manual_seed(77);  // resuming must restore the dropout RNG
  train::TrainSummary resumed = testing::run_training(config, b, log, /*resume=*/true);
  INFO(log.str());
  CHECK(resumed.finished);
  check_same_tensors(a / "last.safetensors", b / "last.safetensors", [](const std::string&) { return true; });
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST_CASE("lm: the memory persists across steps and resets where every stream restarts", "[train][lm]") {
  // No dropout: the task's step and a forward by hand must agree bit for bit.
  const std::vector<std::string> no_dropout = {"model.dropout=0", "model.emb_dropout=0"};
  for (bool reset : {true, false}) {
    INFO("data.reset_memory " << reset);
    std::vector<std::string> o = no_dropout;
    o.push_back(std::string("data.reset_memory=") + (reset ? "true" : "false"));
    const train::RunConfig config = train::parse_config(tiny_config(), o);
    auto task = train::make_task(config);
    task->load_data({"train", "dev", "test"});
    manual_seed(2);
    auto module = task->build_model();
    auto& model = dynamic_cast<lm::TransformerLSModel&>(*module);
    CHECK(task->state().empty());  // nothing before the first step
    auto corpus = train::load_lm_corpus(config);
    data::BpttLoader loader(corpus, data::LmSplit::kTrain, {.batch_size = 4, .block_len = 8});
    lm::Memory carried = model.initial_memory(4);
    NoGradGuard no_grad;  // the model does not change: only the memory does
    for (int64_t k = 0; k <= kStepsPerEpoch + 1; ++k) {
      INFO("step " << k);
      const double loss = task->train_step(model, k).loss.item<float>();
      if (k == kStepsPerEpoch && reset) carried.reset();  // the first batch of epoch 1
      lm::Memory zero = model.initial_memory(4);
      const double expected = manual_loss(model, loader, k, carried);
      const double from_zero = manual_loss(model, loader, k, zero);
      CHECK(loss == expected);
      // From the second step on the carried memory changes the loss, except where it was reset.
      if (k == 0 || (k == kStepsPerEpoch && reset)) CHECK(loss == from_zero);
      else CHECK(loss != from_zero);
    }
    // The state is the carried memory.
    NamedTensors state = task->state();
    REQUIRE(state.size() == 2);
    CHECK(state[0].first == "lm.memory.0");
    CHECK(state[0].second.to_vector<float>() == carried.layers[0].to_vector<float>());
  }
}

TEST_CASE("lm: training with the memory zeroed at every step reaches other parameters", "[train][lm]") {
  const train::RunConfig config = train::parse_config(tiny_config(), {"train.steps=6"});
  auto train_params = [&](bool zero_each_step) {
    auto task = train::make_task(config);
    task->load_data({"train", "dev", "test"});
    manual_seed(config.train.seed);
    auto model = task->build_model();
    model->train();
    auto optimizer = train::make_optimizer(config, *model);
    auto schedule = train::make_schedule(config);
    for (int64_t k = 0; k < config.train.steps; ++k) {
      if (zero_each_step) task->restore_state({});  // back to the state before step 0: zeros
      optim::apply_schedule(*schedule, *optimizer, k);
      task->train_step(*model, k).loss.backward();
      optimizer->step();
      optimizer->zero_grad();
    }
    return model->state_dict();
  };
  NamedTensors carried = train_params(false), zeroed = train_params(true), again = train_params(false);
  REQUIRE(carried.size() == zeroed.size());
  bool any_difference = false;
  for (size_t i = 0; i < carried.size(); ++i) {
    any_difference |= carried[i].second.to_vector<float>() != zeroed[i].second.to_vector<float>();
    CHECK(carried[i].second.to_vector<float>() == again[i].second.to_vector<float>());  // deterministic
  }
  CHECK(any_difference);
}

TEST_CASE("lm: --init-from starts a new phase from a checkpoint's weights", "[train][lm]") {
  const train::RunConfig phase1 = train::parse_config(tiny_config(), {"train.steps=10"});
  fs::path p1 = fresh_dir("phase1"), p2 = fresh_dir("phase2");
  std::ostringstream log;
  train::TrainSummary first = testing::run_training(phase1, p1, log);
  // Phase 2: longer blocks and memory (no parameter depends on them), a fresh optimizer and
  // schedule. With lr = 1e-30 one AdamW step leaves every f32 weight exactly as loaded, so the
  // run's last weights must be the phase-1 checkpoint's, bit for bit.
  const train::RunConfig phase2 = train::parse_config(
      tiny_config(), {"train.steps=1", "model.block_length=16", "model.memory_length=16", "optimizer.lr=1e-30",
                      "optimizer.weight_decay=0", "train.eval_every=0"});
  train::TrainSummary second = testing::run_training(phase2, p2, log, false, 0, first.best_checkpoint);
  INFO(log.str());
  CHECK(second.finished);
  CHECK_THAT(log.str(), Contains("initialised from '" + first.best_checkpoint + "'"));
  check_same_tensors(first.best_checkpoint, p2 / "last.safetensors", is_weight);
  // The optimizer restarted: its step count is phase 2's.
  SafetensorsContents last = load_safetensors((p2 / "last.safetensors").string());
  CHECK(nlohmann::json::parse(last.metadata.at("lsformer.optimizer")).dump().find("\"step\":1") != std::string::npos);

  // A model of another shape, or --init-from with --resume, is refused with what differs.
  fs::path p3 = fresh_dir("phase3");
  CHECK_THROWS_WITH(testing::run_training(train::parse_config(tiny_config(), {"model.ffn_dim=24"}), p3, log, false, 0, first.best_checkpoint),
                    Contains("--init-from") && Contains("model.ffn_dim 32 → 24") && Contains("layers.0.ff.fc1.weight"));
  CHECK_THROWS_WITH(testing::run_training(phase1, p1, log, /*resume=*/true, 0, first.best_checkpoint), Contains("--resume"));
  CHECK_THROWS_WITH(testing::run_training(phase1, p3, log, false, 0, "/nonexistent/best.safetensors"),
                    Contains("'/nonexistent/best.safetensors' does not exist"));
  fs::remove_all(p1);
  fs::remove_all(p2);
  fs::remove_all(p3);
}

TEST_CASE("lm: lsf eval takes other evaluation settings but refuses a model of another shape", "[train][lm]") {
  const train::RunConfig config = train::parse_config(tiny_config(), {"train.steps=5", "train.eval_every=0"});
  fs::path dir = fresh_dir("eval_settings");
  std::ostringstream log;
  train::TrainSummary s = testing::run_training(config, dir, log);
  // The paper's evaluation settings, scaled down: one stream, shorter blocks, a longer memory.
  train::EvalResult paper = train::evaluate_checkpoint(
      s.best_checkpoint, "test", 0, {"data.eval_batch_size=1", "data.eval_block_length=4", "model.memory_length=32"});
  CHECK(paper.metric("characters") == 120 - 120 / 4);  // every block of 4 leaves its last position unscored
  CHECK(std::isfinite(paper.metric("bpc")));
  CHECK(paper.metric("bpc") != s.test.metric("bpc"));
  // data.block_end_targets scores every character but the split's first.
  CHECK(train::evaluate_checkpoint(s.best_checkpoint, "test", 0, {"data.block_end_targets=true"}).metric("characters") == 119);
  CHECK_THROWS_WITH(train::evaluate_checkpoint(s.best_checkpoint, "test", 0, {"model.dim=32"}),
                    Contains("lsf eval with --set") && Contains("model.dim 16 → 32") && Contains("in_emb.weight"));
  CHECK_THROWS_WITH(train::evaluate_checkpoint(s.best_checkpoint, "test", 0, {"model.layers=3"}),
                    Contains("model.layers 2 → 3") && Contains("missing") && Contains("layers.2."));
  fs::remove_all(dir);
}

TEST_CASE("lm: generation is deterministic and checks the checkpoint and the prompt", "[train][lm]") {
  const train::RunConfig config = train::parse_config(tiny_config(), {"train.steps=5", "train.eval_every=0"});
  fs::path dir = fresh_dir("generate");
  std::ostringstream log;
  train::TrainSummary s = testing::run_training(config, dir, log);
  train::LmGenerateOptions o{.prompt = "the tide ", .tokens = 40, .sampling = {.temperature = 0.9, .top_k = 20}, .seed = 5};
  std::string streamed;
  const std::string text = train::generate_text(s.best_checkpoint, o, [&](char c) { streamed += c; });
  CHECK(text.size() == 40);
  CHECK(streamed == text);  // each character handed over as it is produced
  CHECK(train::generate_text(s.best_checkpoint, o) == text);  // same seed, same text
  {  // lsf generate's way: emitted only, nothing held (--tokens may exceed memory)
    train::LmGenerateOptions streaming = o;
    streaming.keep_text = false;
    std::string emitted;
    CHECK(train::generate_text(s.best_checkpoint, streaming, [&](char c) { emitted += c; }).empty());
    CHECK(emitted == text);
  }
  o.seed = 6;
  CHECK(train::generate_text(s.best_checkpoint, o) != text);
  o.echo_prompt = true;
  streamed.clear();
  train::generate_text(s.best_checkpoint, o, [&](char c) { streamed += c; });
  CHECK(streamed.rfind("the tide ", 0) == 0);
  // Greedy decoding equals the argmax of a full forward over prompt + generated text.
  o.sampling = {.temperature = 0.0};
  o.tokens = 3;
  const std::string greedy = train::generate_text(s.best_checkpoint, o);
  {
    lm::TransformerLSModel model(train::lm_model_options(config));
    load_checkpoint(s.best_checkpoint, model, nullptr, false);
    model.eval();
    NoGradGuard no_grad;
    std::string context = o.prompt;
    for (char expected : greedy) {
      std::vector<int64_t> ids(context.begin(), context.end());
      lm::Memory memory = model.initial_memory(1);
      Tensor lp = model.forward(tensor(ids, {1, int64_t(ids.size())}), memory);
      CHECK(char(argmax(lp.select(1, int64_t(ids.size()) - 1), 1).item<int64_t>()) == expected);
      context += expected;
    }
  }
  // Errors: a prompt character outside a text8 vocabulary, a checkpoint of another task.
  fs::path foreign = dir / "foreign.safetensors";
  {
    train::RunConfig t8 = train::parse_config(tiny_config(), {"data.corpus=text8", "data.path=/nonexistent/text8"});
    lm::TransformerLSModel model(train::lm_model_options(t8));
    CHECK(model.options().vocab_size == 27);
    CheckpointInfo info;
    info.config = train::to_json(t8);
    save_checkpoint(foreign.string(), model, nullptr, info);
    CHECK_THROWS_WITH(train::generate_text(foreign.string(), {.prompt = "the Tide", .tokens = 1}),
                      Contains("'T'") && Contains("offset 4") && Contains("text8 vocabulary"));
    CHECK(train::generate_text(foreign.string(), {.prompt = "the tide", .tokens = 2}).size() == 2);
  }
  {
    train::RunConfig listops = train::parse_config(R"({"data": {"task": "listops", "generate": {"enabled": true}},
        "model": {"dim": 16, "ffn_dim": 16, "head_hidden": 8, "max_seq_len": 64}})");
    lra::LraModelOptions lo = train::lra_sections(listops).model;
    lo.num_classes = 10;
    lra::LraClassifier model(lo);
    CheckpointInfo info;
    info.config = train::to_json(listops);
    save_checkpoint(foreign.string(), model, nullptr, info);
    CHECK_THROWS_WITH(train::generate_text(foreign.string(), {.prompt = "a", .tokens = 1}),
                      Contains("task \"listops\"") && Contains("character-level language model"));
  }
  CHECK_THROWS_WITH(train::generate_text(s.best_checkpoint, {.prompt = "", .tokens = 1}), Contains("prompt is empty"));
  CHECK_THROWS_WITH(train::generate_text(s.best_checkpoint, {.prompt = "a", .tokens = 1, .sampling = {.top_p = 0.0}}),
                    Contains("top_p"));
  fs::remove_all(dir);
}

TEST_CASE("lm: config errors name the dotted key", "[train][lm][configs]") {
  const std::string c = tiny_config();
  CHECK_NOTHROW(train::parse_config(c));
  CHECK_THROWS_WITH(train::parse_config(c, {"data.corpus=wiki"}),
                    Contains("'data.corpus' must be one of gcide, enwik8, text8, splits, text") && Contains("\"wiki\""));
  CHECK_THROWS_WITH(train::parse_config(c, {"model.attention=sparse"}), Contains("'model.attention' must be one of long_short, full"));
  CHECK_THROWS_WITH(train::parse_config(c, {"model.windw=4"}), Contains("unknown key 'model.windw'"));
  CHECK_THROWS_WITH(train::parse_config(c, {"model.block_length=10"}),
                    Contains("'model.block_length' (10) > 'model.window' (4) must be a multiple of it"));
  CHECK_THROWS_WITH(train::parse_config(c, {"model.block_length=3"}),
                    Contains("'model.block_length' (3) must be a multiple of 'model.chunk_length' (2)"));
  CHECK_THROWS_WITH(train::parse_config(c, {"model.memory_length=2"}), Contains("'model.memory_length' (2) must be ≥ 'model.window' (4)"));
  CHECK_THROWS_WITH(train::parse_config(c, {"model.dim=15"}), Contains("'model.dim' must be even"));
  CHECK_THROWS_WITH(train::parse_config(c, {"model.heads=3"}), Contains("'model.dim' (16) must be a multiple of 'model.heads' (3)"));
  CHECK_THROWS_WITH(train::parse_config(c, {"model.dropout=1"}), Contains("'model.dropout' must be in [0, 1)"));
  CHECK_THROWS_WITH(train::parse_config(c, {"model.vocab_size=100"}),
                    Contains("'model.vocab_size' (100) is smaller than the splits vocabulary (256 symbols)"));
  CHECK(train::lm_model_options(train::parse_config(c, {"data.corpus=text8"})).vocab_size == 27);
  CHECK_THROWS_WITH(train::parse_config(c, {"data.eval_batch_size=0"}), Contains("'data.eval_batch_size' must be ≥ 1"));
  CHECK_THROWS_WITH(train::parse_config(c, {"data.eval_characters=1"}), Contains("'data.eval_characters' must be 0"));
  // More streams than characters would score nothing (and print a BPC of 0 / 0).
  CHECK_THROWS_WITH(train::parse_config(c, {"data.eval_characters=20", "data.eval_batch_size=20"}),
                    Contains("'data.eval_characters' (20) must exceed 'data.eval_batch_size' (20)"));
  CHECK_NOTHROW(train::parse_config(c, {"data.eval_characters=21", "data.eval_batch_size=20"}));
  CHECK_THROWS_WITH(train::parse_config(c, {"data.corpus=enwik8", "data.path="}), Contains("'data.path' must name the enwik8 data"));
  // The full-attention baseline ignores the long-short keys' constraints.
  CHECK_NOTHROW(train::parse_config(c, {"model.attention=full", "model.block_length=10"}));
  // Files: a missing path names the key before anything is written; too many streams name theirs.
  train::RunConfig missing = train::parse_config(c, {"data.path=/nonexistent/lm-splits"});
  CHECK_THROWS_WITH(train::validate_data_paths(missing), Contains("'data.path'") && Contains("/nonexistent/lm-splits"));
  auto task = train::make_task(train::parse_config(c, {"train.batch_size=100"}));
  CHECK_THROWS_WITH(task->load_data({"train", "dev", "test"}), Contains("'train.batch_size' (100)") && Contains("'model.block_length' (8)"));
  // The 120-character dev split in 120 evaluation streams: one character each, none scored.
  auto streams = train::make_task(train::parse_config(c, {"data.eval_batch_size=120"}));
  CHECK_THROWS_WITH(streams->load_data({"train", "dev", "test"}),
                    Contains("the dev split") && Contains("(120 characters)") && Contains("'data.eval_batch_size' (120)"));
  CHECK_NOTHROW(train::make_task(train::parse_config(c, {"data.eval_batch_size=119"}))->load_data({"dev", "test"}));
  // The training split evaluated that way (lsf eval --split train) is refused when evaluated.
  auto train_split = train::make_task(train::parse_config(c, {"data.eval_batch_size=600"}));
  train_split->load_data({"train"});
  auto model = train_split->build_model();
  CHECK_THROWS_WITH(train_split->evaluate(*model, "train", 0), Contains("evaluating the train split scored no character"));
  // Evaluating holds a layer's activations of data.eval_batch_size streams: estimated, so that
  // lsf eval refuses a batch that cannot fit instead of being killed for memory.
  auto activations = [&](const std::vector<std::string>& set) {
    for (const train::MemoryPart& part : train::make_task(train::parse_config(c, set))->estimate_memory(train::MemoryUse::Eval).parts)
      if (part.what == "activations") return part.bytes;
    return 0.0;
  };
  CHECK(activations({}) > 0);
  CHECK(activations({"data.eval_batch_size=20"}) == Approx(10 * activations({})).epsilon(1e-12));
  CHECK(activations({"data.eval_batch_size=200000"}) > 1e9);
  // The memory of a checkpoint must have the run's streams.
  auto small = train::make_task(train::parse_config(c));
  small->load_data({"train"});
  CHECK_THROWS_WITH(small->restore_state({{"lm.memory.0", zeros({3, 8, 16})}, {"lm.memory.1", zeros({3, 8, 16})}}),
                    Contains("3 streams") && Contains("'train.batch_size' is 4"));
}

TEST_CASE("lm: the shipped char-LM configs are docs/transformer-ls.md §3.8's", "[train][lm][configs]") {
  const std::string dir = std::string(LSF_FIXTURE_DIR) + "/../../configs/lm/";
  struct Phase {
    const char* file;
    int64_t layers;
    double dropout, weight_decay;
    int64_t length, batch;  // tokens per sample = mem_len; per-GPU batch × update_freq × 8 GPUs
    double lr;
    int64_t warmup, updates;
  };
  const Phase phases[] = {
      {"enwik8_base_phase1", 12, 0.2, 0.01, 2048, 4 * 1 * 8, 2.5e-4, 10000, 430000},
      {"enwik8_base_phase2", 12, 0.2, 0.01, 4096, 4 * 1 * 8, 1.25e-4, 5000, 50000},
      {"enwik8_base_phase3", 12, 0.2, 0.01, 8192, 4 * 1 * 8, 6.25e-5, 5000, 50000},
      {"text8_base_phase1", 12, 0.2, 0.01, 2048, 4 * 1 * 8, 5e-4, 10000, 430000},
      {"text8_base_phase2", 12, 0.2, 0.01, 4096, 4 * 1 * 8, 2.5e-4, 5000, 50000},
      {"text8_base_phase3", 12, 0.2, 0.01, 8192, 2 * 1 * 8, 1.25e-4, 5000, 50000},
      {"enwik8_large_phase1", 30, 0.4, 0.1, 2048, 4 * 1 * 8, 2.5e-4, 10000, 430000},
      {"enwik8_large_phase2", 30, 0.4, 0.1, 4096, 2 * 4 * 8, 1.25e-4, 5000, 50000},
      {"enwik8_large_phase3", 30, 0.4, 0.1, 8192, 1 * 4 * 8, 6.25e-5, 5000, 50000},
  };
  for (const Phase& p : phases) {
    INFO(p.file);
    const train::RunConfig c = train::load_config(dir + p.file + ".json");
    const train::LmSections& s = train::lm_sections(c);
    const std::string name = p.file;
    CHECK(s.data.corpus == (name.rfind("text8", 0) == 0 ? train::LmCorpus::Text8 : train::LmCorpus::Enwik8));
    CHECK_FALSE(s.data.path.empty());
    CHECK_FALSE(s.data.block_end_targets);
    const lm::LmModelOptions m = train::lm_model_options(c);
    CHECK((m.layers == p.layers && m.dim == 512 && m.heads == 8 && m.ffn_dim == 2048));
    CHECK((m.attention == lm::LmAttention::LongShort && m.chunk_length == 16 && m.rank == 1 && m.window == 512));
    CHECK((m.dropout == p.dropout && m.emb_dropout == p.dropout && !m.bias));
    CHECK((m.block_length == p.length && m.memory_length == p.length));
    CHECK(m.vocab_size == (name.rfind("text8", 0) == 0 ? 27 : 256));
    CHECK((c.optimizer.name == train::OptimizerKind::AdamW && c.optimizer.eps == 1e-8 && c.optimizer.lr == p.lr));
    CHECK((c.optimizer.betas == std::array<double, 2>{0.9, 0.999} && c.optimizer.weight_decay == p.weight_decay));
    CHECK(c.optimizer.grad_clip == 0);
    CHECK((c.schedule.name == train::ScheduleKind::WarmupConstant && c.schedule.warmup_steps == p.warmup));
    CHECK((c.train.steps == p.updates && c.train.batch_size == p.batch && c.train.seed == 2));
    // §3.8's parameter check: 3,682,312 per layer (the paper's 44M and 110M with the tables).
    CHECK(lm::layer_parameter_count(m) == 3'682'312);
    CHECK(lm::parameter_count(m) == m.vocab_size * 512 + m.vocab_size + p.layers * 3'682'312);
    // The paper's evaluation settings apply on top.
    CHECK_NOTHROW(train::parse_config(train::to_json(c), {"data.eval_batch_size=1", "data.eval_block_length=256",
                                                          "model.memory_length=32768"}));
  }
  // The CPU configs: the offline corpus, long-short and its full-attention twin.
  const train::RunConfig quick = train::load_config(dir + "quick.json");
  const train::RunConfig full = train::load_config(dir + "quick_full.json");
  CHECK(train::lm_sections(quick).data.corpus == train::LmCorpus::Gcide);
  CHECK(train::lm_sections(quick).model.attention == lm::LmAttention::LongShort);
  CHECK(train::lm_sections(full).model.attention == lm::LmAttention::Full);
  CHECK_NOTHROW(train::validate_data_paths(quick));
  // Apart from the attention (and the description), the two are the same run.
  train::RunConfig same = train::parse_config(train::to_json(full), {"model.attention=long_short"});
  same.description = quick.description;
  CHECK(train::to_json(same) == train::to_json(quick));
}
