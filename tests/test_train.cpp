// The trainer (models/train/trainer.h): a short run lowers the loss, `lsf eval`'s computation
// reproduces the accuracy printed at the end of training, a resumed run ends bit-identical to an
// uninterrupted one, and bad checkpoints or run directories give clear errors.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "run_helpers.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/lra_task.h"
#include "lsformer/models/train/run_directory.h"
#include "lsformer/models/train/trainer.h"

namespace fs = std::filesystem;
using namespace lsf;
using Catch::Contains;
using Catch::Matches;

namespace {

const std::string& kTiny = testing::kTinyListOps;

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("train", name); }

std::vector<nlohmann::json> read_metrics(const fs::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

}  // namespace

TEST_CASE("a 50-step run lowers the loss and writes the run directory", "[train]") {
  fs::path dir = fresh_dir("loss");
  std::ostringstream log;
  train::TrainSummary s = testing::run_training(train::parse_config(kTiny), dir, log);
  INFO(log.str());
  CHECK(s.finished);
  CHECK(s.steps == 50);
  for (const char* f : {"config.json", "metrics.jsonl", "best.safetensors", "last.safetensors", "summary.json"})
    CHECK(fs::exists(dir / f));
  std::vector<double> train_loss;
  int dev_evals = 0, finals = 0;
  for (const auto& m : read_metrics(dir / "metrics.jsonl")) {
    if (m.at("split") == "train") {
      train_loss.push_back(m.at("loss"));
      CHECK(m.at("samples_per_s").get<double>() > 0);
      CHECK(m.at("lr").get<double>() > 0);
    }
    if (m.at("split") == "dev" && !m.contains("final")) ++dev_evals;
    if (m.contains("final")) ++finals;
  }
  REQUIRE(train_loss.size() == 5);  // log_every 10
  // Ten classes start near ln 10 ≈ 2.30 (mean over steps 1–10); this run reaches ≈ 2.17 over
  // steps 41–50 (measured with one thread, the run is deterministic).
  CHECK(train_loss.back() < train_loss.front() - 0.1);
  CHECK(dev_evals == 3);  // steps 20, 40 and the last
  CHECK(finals == 2);     // best checkpoint on dev and test
  CHECK(s.dev.metric("examples") == 48);
  CHECK(s.test.metric("examples") == 40);
  CHECK(s.test.metric("majority_accuracy") > 0);
  CHECK_THAT(log.str(), Contains("test accuracy") && Contains("eval --checkpoint") && Contains("best.safetensors"));
  // The stored config is the resolved one: it rebuilds the run.
  CHECK(train::to_json(train::checkpoint_config((dir / "best.safetensors").string())) == train::to_json(train::parse_config(kTiny)));
  fs::remove_all(dir);
}

TEST_CASE("evaluating the best checkpoint reproduces the accuracy printed at the end of training", "[train]") {
  fs::path dir = fresh_dir("eval");
  std::ostringstream log;
  train::TrainSummary s = testing::run_training(train::parse_config(kTiny, {"train.steps=30"}), dir, log);
  for (const train::EvalResult* printed : {&s.dev, &s.test}) {
    train::EvalResult again = train::evaluate_checkpoint(s.best_checkpoint, printed->split);
    CHECK(again.metric("correct") == printed->metric("correct"));
    CHECK(again.metric("examples") == printed->metric("examples"));
    CHECK(again.metric("accuracy") == printed->metric("accuracy"));  // exactly: the same computation
    CHECK(again.loss == printed->loss);
    CHECK(again.step == s.best_step);
  }
  CHECK_THROWS_WITH(train::evaluate_checkpoint(s.best_checkpoint, "validation"), Contains("unknown split 'validation'"));
  fs::remove_all(dir);
}

TEST_CASE("a resumed run ends bit-identical to an uninterrupted one", "[train]") {
  const train::RunConfig config = train::parse_config(kTiny, {"train.steps=30"});
  fs::path a = fresh_dir("resume_a"), b = fresh_dir("resume_b");
  std::ostringstream log;
  testing::run_training(config, a, log);
  train::TrainSummary stopped = testing::run_training(config, b, log, /*resume=*/false, /*stop_after=*/20);
  CHECK_FALSE(stopped.finished);
  CHECK(stopped.steps == 20);
  CHECK_FALSE(fs::exists(b / "summary.json"));
  // Something else ran in between and moved the global RNG: resume must restore it.
  manual_seed(999);
  (void)randn({100});
  train::TrainSummary resumed = testing::run_training(config, b, log, /*resume=*/true);
  CHECK(resumed.finished);
  CHECK(resumed.steps == 30);

  SafetensorsContents fa = load_safetensors((a / "last.safetensors").string());
  SafetensorsContents fb = load_safetensors((b / "last.safetensors").string());
  REQUIRE(fa.tensors.size() == fb.tensors.size());
  size_t optimizer_tensors = 0;
  for (const auto& [name, t] : fa.tensors) {
    INFO(name);
    REQUIRE(fb.tensors.count(name));
    CHECK(t.to_vector<float>() == fb.tensors.at(name).to_vector<float>());  // bit for bit
    optimizer_tensors += name.rfind("optimizer.", 0) == 0;
  }
  CHECK(optimizer_tensors > 0);
  CHECK(fa.metadata.at("lsformer.rng.offset") == fb.metadata.at("lsformer.rng.offset"));
  CHECK(resumed.test.metric("correct") == testing::run_training(config, fresh_dir("resume_c"), log).test.metric("correct"));
  // metrics.jsonl: the resumed run continues the interrupted one's lines, no step twice.
  std::vector<int64_t> train_steps;
  for (const auto& m : read_metrics(b / "metrics.jsonl"))
    if (m.at("split") == "train") train_steps.push_back(m.at("step"));
  CHECK(train_steps == std::vector<int64_t>{10, 20, 30});
  for (const auto& d : {a, b, fresh_dir("resume_c")}) fs::remove_all(d);
}

TEST_CASE("train.precision: bf16 and f16 runs train, an f16 run resumes bit-identical with its loss scale", "[train]") {
  std::ostringstream log;
  auto final_weights = [](const fs::path& dir) { return load_safetensors((dir / "last.safetensors").string()); };
  auto train_losses = [](const fs::path& dir) {
    std::vector<double> losses;
    for (const auto& m : read_metrics(dir / "metrics.jsonl"))
      if (m.at("split") == "train") losses.push_back(m.at("loss"));
    return losses;
  };
  const fs::path f32 = fresh_dir("precision_f32");
  testing::run_training(train::parse_config(kTiny, {"train.steps=30"}), f32, log);
  for (const char* precision : {"bf16", "f16"}) {
    INFO(precision);
    const train::RunConfig config =
        train::parse_config(kTiny, {"train.steps=30", std::string("train.precision=") + precision});
    const fs::path a = fresh_dir(std::string("precision_") + precision);
    const train::TrainSummary s = testing::run_training(config, a, log);
    INFO(log.str());
    CHECK(s.finished);
    const std::vector<double> losses = train_losses(a);
    REQUIRE(losses.size() == 3);
    CHECK(losses.back() < losses.front());
    // The 16-bit products change the numbers (and f32 runs untouched by the key are the default).
    const SafetensorsContents mine = final_weights(a), plain = final_weights(f32);
    bool differs = false;
    for (const auto& [name, t] : plain.tensors)
      if (name.rfind("optimizer.", 0) != 0) differs = differs || t.to_vector<float>() != mine.tensors.at(name).to_vector<float>();
    CHECK(differs);
    if (std::string(precision) == "f16") {
      // The loss scale travels in last.safetensors: a run stopped at step 20 and resumed ends
      // bit-identical to the uninterrupted one.
      CHECK(final_weights(a).metadata.count("extra.grad_scaler_scale"));
      const fs::path b = fresh_dir("precision_f16_resumed");
      testing::run_training(config, b, log, /*resume=*/false, /*stop_after=*/20);
      testing::run_training(config, b, log, /*resume=*/true);
      const SafetensorsContents fa = final_weights(a), fb = final_weights(b);
      for (const auto& [name, t] : fa.tensors) {
        INFO(name);
        CHECK(t.to_vector<float>() == fb.tensors.at(name).to_vector<float>());
      }
      CHECK(fa.metadata.at("extra.grad_scaler_scale") == fb.metadata.at("extra.grad_scaler_scale"));
      fs::remove_all(b);
    } else {
      CHECK_FALSE(final_weights(a).metadata.count("extra.grad_scaler_scale"));
    }
    fs::remove_all(a);
  }
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"train.precision=fp8"}), Contains("train.precision"));
  fs::remove_all(f32);
}

TEST_CASE("train.device: its syntax is checked when the config is read, the device when a run starts", "[train]") {
  CHECK(train::parse_config(kTiny).train.device == "cpu");  // the default
  CHECK(train::run_device(train::parse_config(kTiny)) == kCPU);
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"train.device=tpu"}),
                    Contains("'train.device' must be \"cpu\", \"cuda\" or \"cuda:N\", got \"tpu\""));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"train.device=cuda:x"}), Contains("'train.device'"));
  // A device that may not exist here still parses (a config is portable); the run refuses it.
  const train::RunConfig far = train::parse_config(kTiny, {"train.device=cuda:999"});
  CHECK(far.train.device == "cuda:999");
  CHECK_THROWS_WITH(train::run_device(far), Contains("'train.device' is \"cuda:999\"") && Contains("--set train.device=cpu"));
  if (cuda_is_available()) return;  // the rest is about a machine without a usable GPU
  const fs::path dir = fresh_dir("device");
  std::ostringstream log;
  CHECK_THROWS_WITH(testing::run_training(train::parse_config(kTiny, {"train.device=cuda"}), dir, log),
                    Contains("no CUDA device is usable here") && Contains("--set train.device=cpu"));
  CHECK_FALSE(fs::exists(dir));  // refused before the run directory is made
}

TEST_CASE("run directories: no silent overwrite, resume needs the same config", "[train]") {
  fs::path dir = fresh_dir("dirs");
  std::ostringstream log;
  const train::RunConfig config = train::parse_config(kTiny, {"train.steps=10"});
  testing::run_training(config, dir, log, false, /*stop_after=*/5);
  CHECK_THROWS_WITH(testing::run_training(config, dir, log), Contains("already holds a run") && Contains("--resume"));
  CHECK_THROWS_WITH(testing::run_training(train::parse_config(kTiny, {"train.steps=10", "model.dim=16"}), dir, log, true),
                    Contains("config differs") && Contains("model.dim 32 → 16"));
  // Only the thread count (and the fault policies, and the description) may change on resume.
  CHECK_NOTHROW(testing::run_training(train::parse_config(kTiny, {"train.steps=10", "train.threads=2"}), dir, log, true));
  CHECK(train::config_differences(config, train::parse_config(kTiny, {"train.steps=10", "description=the same run, retold"})).empty());
  CHECK_THROWS_WITH(testing::run_training(config, fresh_dir("nothing"), log, true), Contains("nothing to resume"));
  // A directory with no last.safetensors (a run that failed while loading its data) starts afresh.
  fs::remove(dir / "last.safetensors");
  CHECK(testing::run_training(config, dir, log).finished);
  fs::remove_all(dir);
}

TEST_CASE("corrupt, truncated or foreign checkpoints give clear errors", "[train]") {
  fs::path dir = fresh_dir("corrupt");
  std::ostringstream log;
  train::TrainSummary s = testing::run_training(train::parse_config(kTiny, {"train.steps=10"}), dir, log);
  const std::string truncated = (dir / "truncated.safetensors").string();
  {
    std::ifstream in(s.best_checkpoint, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    std::ofstream((dir / "garbage.safetensors").string(), std::ios::binary) << "not a checkpoint at all";
  }
  CHECK_THROWS_WITH(train::evaluate_checkpoint(truncated, "test"), Contains(truncated));
  CHECK_THROWS_WITH(train::evaluate_checkpoint((dir / "garbage.safetensors").string(), "test"), Contains("garbage.safetensors"));
  CHECK_THROWS_WITH(train::evaluate_checkpoint((dir / "missing.safetensors").string(), "test"), Contains("does not exist"));
  // A safetensors file without a run config (e.g. plain model weights).
  const std::string weights = (dir / "weights.safetensors").string();
  save_safetensors(weights, {{"w", zeros({2})}}, {});
  CHECK_THROWS_WITH(train::evaluate_checkpoint(weights, "test"), Contains("holds no run config"));
  fs::remove_all(dir);
}

TEST_CASE("a too-long example names the key that sets its padding", "[train]") {
  auto build = [](const std::vector<std::string>& overrides) {
    std::unique_ptr<train::Task> task = train::make_task(train::parse_config(kTiny, overrides));
    task->load_data({"train"});
    task->build_model();
  };
  // Up to 20 tokens padded to a multiple of the window: 64 > max_seq_len 32.
  CHECK_THROWS_WITH(build({"model.window=64", "model.max_seq_len=32"}),
                    Contains("tokens (64 padded to a multiple of 'model.window' = 64), more than 'model.max_seq_len' (32)"));
  CHECK_THROWS_WITH(build({"data.pad_multiple=48"}), Contains("(48 padded to a multiple of 'data.pad_multiple' = 48)"));
  // Full attention pads nothing: the message says only the length.
  CHECK_THROWS_WITH(build({"model.attention=full", "model.max_seq_len=8"}),
                    Matches(".*example has [0-9]+ tokens, more than 'model.max_seq_len' \\(8\\).*"));
}
