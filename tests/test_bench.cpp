// lsf bench's library half (models/train/bench.h): it must time the steps `lsf train` runs —
// after warm-up w and n timed steps, the model has the parameters a run of the config has after
// w + n steps, bit for bit — and report what it measured consistently (the image family's case is
// in test_vision_task.cpp, beside its dataset helpers). Speed itself is never checked here
// (bench/ measures it).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "run_helpers.h"
#include "lsformer/engine/safetensors.h"
#include "lsformer/models/train/bench.h"
#include "lsformer/models/train/config.h"

namespace fs = std::filesystem;
using namespace lsf;
using Catch::Contains;

namespace {

// The model's parameters against checkpoint `path`'s, bit for bit.
void check_same_parameters(const nn::Module& model, const fs::path& path) {
  const SafetensorsContents saved = load_safetensors(path.string());
  const NamedTensors params = model.named_parameters();
  REQUIRE(!params.empty());
  for (const auto& [name, p] : params) {
    INFO(name);
    REQUIRE(saved.tensors.count(name));
    CHECK(p.to_vector<float>() == saved.tensors.at(name).to_vector<float>());
  }
}

// The first parameter's values (to tell whether an update happened).
std::vector<float> first_parameter(const nn::Module& model) { return model.named_parameters().begin()->second.to_vector<float>(); }

// A char-LM over a 600-character corpus with dropout on (so the steps' RNG use must match too)
// and memory carried from step to step.
std::string tiny_lm_config(const fs::path& corpus) {
  return R"({
  "data": {"task": "lm", "corpus": "splits", "path": ")" + corpus.string() + R"(", "eval_batch_size": 2},
  "model": {"dim": 16, "heads": 2, "layers": 2, "ffn_dim": 32, "block_length": 8, "memory_length": 8,
            "chunk_length": 2, "rank": 1, "window": 4, "dropout": 0.1, "emb_dropout": 0.1},
  "optimizer": {"name": "adamw", "lr": 1e-2, "eps": 1e-8, "weight_decay": 0.01, "grad_clip": 0.5},
  "schedule": {"name": "warmup_constant", "warmup_steps": 2},
  "train": {"steps": 20, "batch_size": 4, "eval_every": 0, "log_every": 5, "checkpoint_every": 0, "seed": 2, "threads": 1}
})";
}

}  // namespace

TEST_CASE("bench_training runs the steps lsf train runs (ListOps)", "[bench]") {
  const train::RunConfig config = train::parse_config(testing::kTinyListopsRun, {"train.eval_every=0", "model.dropout=0.1"});
  train::BenchOptions options;
  options.warmup_steps = 2;
  options.steps = 3;
  const train::BenchResult r = train::bench_training(config, options);
  CHECK(r.step_seconds.size() == 3);
  for (double s : r.step_seconds) CHECK(s > 0);
  CHECK(r.unit == "samples");
  CHECK(r.units_per_step == 8);  // train.batch_size
  CHECK(r.threads == 1);         // train.threads
  CHECK(r.non_finite_steps == 0);
  CHECK(r.device == "cpu");  // train.device's default
  CHECK(r.baseline_bytes > 0);
  CHECK(r.peak_bytes > r.baseline_bytes);  // the steps' activations
  CHECK(r.rss_peak_bytes >= r.peak_bytes);  // the process holds at least the tensors (Linux: /proc/self/status)
  CHECK(r.profile.empty());
  CHECK(r.fastest_seconds() <= r.median_seconds());
  CHECK(r.median_seconds() <= r.slowest_seconds());
  CHECK(r.parameters == r.model->parameter_count());

  // lsf train stopped after the same 5 steps.
  std::ostringstream log;
  const fs::path dir = testing::fresh_dir("bench", "listops_run");
  testing::run_training(config, dir, log, /*resume=*/false, /*stop_after=*/5);
  check_same_parameters(*r.model, dir / "last.safetensors");
  fs::remove_all(dir);
}

TEST_CASE("bench_training runs the steps lsf train runs (char-LM: memory, dropout, clipping)", "[bench]") {
  const fs::path corpus = testing::fresh_dir("bench", "corpus", /*create=*/true);
  std::ofstream(corpus / "train.txt") << testing::word_salad(600, 1);
  std::ofstream(corpus / "dev.txt") << testing::word_salad(120, 2);
  std::ofstream(corpus / "test.txt") << testing::word_salad(120, 3);
  const train::RunConfig config = train::parse_config(tiny_lm_config(corpus));
  train::BenchOptions options;
  options.warmup_steps = 1;
  options.steps = 4;
  const train::BenchResult r = train::bench_training(config, options);
  CHECK(r.unit == "tokens");
  CHECK(r.units_per_step == 4 * 8);  // batch_size streams × block_length
  std::ostringstream log;
  const fs::path dir = testing::fresh_dir("bench", "lm_run");
  testing::run_training(config, dir, log, /*resume=*/false, /*stop_after=*/5);
  check_same_parameters(*r.model, dir / "last.safetensors");
  fs::remove_all(dir);
  fs::remove_all(corpus);
}

TEST_CASE("bench_training forward_only: no update, evaluation mode, and the profile on request", "[bench]") {
  const train::RunConfig config = train::parse_config(testing::kTinyListopsRun);
  train::BenchOptions options;
  options.warmup_steps = 0;
  options.steps = 1;
  options.forward_only = true;
  const train::BenchResult one = train::bench_training(config, options);
  options.steps = 3;
  options.profile = true;
  const train::BenchResult three = train::bench_training(config, options);
  CHECK_FALSE(three.model->is_training());
  CHECK(first_parameter(*one.model) == first_parameter(*three.model));  // the initial parameters, untouched
  CHECK(three.step_seconds.size() == 3);
  CHECK_THAT(three.profile, Contains("gemm_kernel"));
  CHECK_THAT(three.profile, Contains("attention"));
  options.forward_only = false;
  options.profile = false;
  const train::BenchResult trained = train::bench_training(config, options);
  CHECK(trained.model->is_training());
  CHECK(first_parameter(*trained.model) != first_parameter(*one.model));
  // The same three batches: the forward's products are the same whether or not a backward
  // follows (backward kernels are not counted, ops/flops.h); training counts 3 × 2 FLOPs per
  // multiply-add, a forward pass 2.
  CHECK(one.forward_multiply_adds > 0);
  CHECK(three.forward_multiply_adds == trained.forward_multiply_adds);
  CHECK(three.flops_per_step() == 2 * three.forward_multiply_adds);
  CHECK(trained.flops_per_step() == 6 * trained.forward_multiply_adds);
}

TEST_CASE("bench_training refuses bad options and configs that cannot run", "[bench]") {
  const train::RunConfig config = train::parse_config(testing::kTinyListopsRun);
  train::BenchOptions options;
  options.steps = 0;
  CHECK_THROWS_WITH(train::bench_training(config, options), Contains("the timed steps must be ≥ 1, got 0"));
  options.steps = 1;
  options.warmup_steps = -1;
  CHECK_THROWS_WITH(train::bench_training(config, options), Contains("the warm-up steps must be ≥ 0, got -1"));
  options.warmup_steps = 0;
  // As lsf train: refused before anything is built when it cannot fit.
  CHECK_THROWS_WITH(train::bench_training(train::parse_config(testing::kTinyListopsRun, {"model.layers=100000000"}), options),
                    Contains("not enough memory"));
  const train::BenchResult none;
  CHECK_THROWS_WITH(none.median_seconds(), Contains("no timed steps"));
}
