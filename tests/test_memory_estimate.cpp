// The memory estimate (models/train/memory_estimate.h, issue #15): configs that cannot fit —
// 1e6 layers, 1e12 generated examples, a huge rank or image size, also in a checkpoint's stored
// config for `lsf eval` — are refused at once with the estimate broken down, before a run
// directory is made or anything large allocated; the estimate of the quickstart is within 2× of
// the memory its training steps really take (peak RSS over the RSS before the run), and the
// vision models' activations and a char-LM evaluation's batch within 2× of what the allocator
// measures.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "run_helpers.h"
#include "lsformer/engine/cuda_api.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/memory_estimate.h"
#include "lsformer/models/train/task.h"
#include "lsformer/models/train/trainer.h"
#include "lsformer/models/train/vision_task.h"

namespace fs = std::filesystem;
using namespace lsf;
using Catch::Contains;

namespace {

const std::string kConfigDir = std::string(LSF_FIXTURE_DIR) + "/../../configs";

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("memory_estimate", name); }

// Trains `config` with overrides into a fresh directory; returns the error, or "" if none.
std::string refusal(const std::string& config, const std::vector<std::string>& overrides, double* seconds) {
  const fs::path dir = fresh_dir("refused");
  std::ostringstream log;
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  try {
    testing::run_training(train::load_config(kConfigDir + "/" + config, overrides), dir, log, false, /*stop_after=*/1);
  } catch (const Error& e) {
    error = e.what();
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK_FALSE(fs::exists(dir));  // refused before the run directory was made
  return error;
}

}  // namespace

TEST_CASE("absurd sizes are refused at once with the estimate broken down", "[memory]") {
  struct Case {
    std::string config;
    std::string override;
    std::string part;  // the part of the estimate the size lands in
  };
  const std::vector<Case> cases = {
      {"quickstart.json", "model.layers=1000000", "parameters"},
      {"quickstart.json", "model.dim=100000000", "optimizer state"},
      {"quickstart.json", "model.rank=1000000000000", "activations"},
      {"quickstart.json", "data.generate.train=1000000000000", "generated dataset"},
      {"quickstart.json", "data.generate.max_length=100000000", "generated dataset"},
      {"lm/quick.json", "model.layers=1000000", "activations"},
      {"lm/quick.json", "model.memory_length=1000000000000", "memory"},
      {"vision/quick.json", "data.image_size=1000000", "image batches"},
      {"vision/quick.json", "train.batch_size=100000", "activations"},
      // Refused from the stage list, before 20 million blocks are built.
      {"vision/quick.json", "model.name=vil:l1,h2,d48,n20000000,s1,g1,p2,f2,a0,r8_l2,h4,d96,n2,s0,g0,p2,f7,a0",
       "optimizer state"},
  };
  for (const Case& c : cases) {
    INFO(c.config << " --set " << c.override);
    double seconds = 0;
    const std::string error = refusal(c.config, {c.override}, &seconds);
    CHECK_THAT(error, Contains("not enough memory: the config needs an estimated") && Contains(c.part) &&
                          Contains("this machine has available (MemAvailable)"));
    CHECK(seconds < 2.0);  // an estimate, not an attempt
  }
}

TEST_CASE("train.memory_limit replaces MemAvailable", "[memory]") {
  double seconds = 0;
  CHECK_THAT(refusal("quickstart.json", {"train.memory_limit=1000000"}, &seconds),
             Contains("more than the 976.6 KiB of 'train.memory_limit'") && Contains("parameters 345.7 KiB"));
  CHECK_THROWS_WITH(train::load_config(kConfigDir + "/quickstart.json", {"train.memory_limit=-1"}),
                    Contains("'train.memory_limit' must be a byte count ≥ 0"));
}

TEST_CASE("lsf eval refuses a checkpoint whose stored config cannot fit", "[memory]") {
  const fs::path dir = fresh_dir("eval");
  std::ostringstream log;
  const std::vector<std::string> tiny = {"train.steps=2", "schedule.warmup_steps=0", "schedule.name=constant",
                                         "data.generate.train=64", "data.generate.dev=8", "data.generate.test=8"};
  testing::run_training(train::load_config(kConfigDir + "/quickstart.json", tiny), dir, log);
  const std::string last = (dir / "last.safetensors").string();
  SafetensorsContents c = load_safetensors(last);
  nlohmann::json config = nlohmann::json::parse(c.metadata.at("lsformer.config"));
  config["model"]["layers"] = 1000000;
  c.metadata["lsformer.config"] = config.dump();
  save_safetensors(last, NamedTensors(c.tensors.begin(), c.tensors.end()), c.metadata);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(train::evaluate_checkpoint(last, "test"),
                    Contains("not enough memory for evaluating '" + last + "': the config needs an estimated") &&
                        Contains("parameters 129.5 GiB"));
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 2.0);
}

TEST_CASE("the quickstart's estimate is within 2x of its measured peak", "[memory]") {
  LSF_SKIP_UNDER_ASAN("the peak resident memory of a run");
  const train::RunConfig config = train::load_config(kConfigDir + "/quickstart.json", {"train.eval_every=0"});
  const double estimate = train::make_task(config)->estimate_memory(train::MemoryUse::Train).total();
  // The peak (VmHWM) restarts from the current RSS; what the run adds above it is its memory.
  { std::ofstream("/proc/self/clear_refs") << "5"; }
  const double before = lsf::testing::rss_bytes();
  std::ostringstream log;
  testing::run_training(config, fresh_dir("peak"), log, false, /*stop_after=*/20);
  const double peak = lsf::testing::rss_peak_bytes() - before;
  const double ratio = estimate / peak;
  WARN("quickstart: estimate " << train::format_bytes(estimate) << ", measured " << train::format_bytes(peak)
                               << " above the RSS before the run: ratio " << ratio);
  CHECK(ratio > 0.5);
  CHECK(ratio < 2.0);
}

TEST_CASE("the vision models' activation estimates are within 2x of the allocator's measured peak", "[memory]") {
  // One training-mode forward and backward of the config's model, its parameters already
  // allocated: what the allocator's high-water mark grows by is the activations autograd keeps
  // plus the parameters' gradients, the two parts of the estimate compared with it.
  struct Case {
    std::string config;
    std::vector<std::string> overrides;
  };
  const std::vector<Case> cases = {
      {"vision/quick.json", {"train.batch_size=16"}},                                 // ViL-LS, full attention last
      {"vision/quick_cnn.json", {"train.batch_size=16"}},                             // the CNN
      {"vision/cvt_ls_13_224.json", {"train.batch_size=2", "data.image_size=64"}},  // CvT*-LS at 64²
  };
  for (const Case& c : cases) {
    INFO(c.config);
    const train::RunConfig config = train::load_config(kConfigDir + "/" + c.config, c.overrides);
    const train::MemoryEstimate estimate = train::make_task(config)->estimate_memory(train::MemoryUse::Train);
    double expected = 0;
    for (const train::MemoryPart& part : estimate.parts)
      if (part.what == "activations" || part.what == "gradients") expected += part.bytes;
    const vision::ImageSpec spec = train::image_spec(config, nullptr);
    std::shared_ptr<vision::ImageClassifier> model =
        vision::make_image_classifier(train::vision_sections(config).model.name, spec, train::classifier_options(config));
    model->train();
    const int64_t batch = config.train.batch_size;
    const Tensor images = randn({batch, spec.in_channels, spec.image_size, spec.image_size});
    std::vector<int64_t> label_values;
    for (int64_t i = 0; i < batch; ++i) label_values.push_back(i % spec.num_classes);
    const Tensor labels = tensor(label_values);
    reset_peak_memory();
    const double before = double(memory_stats().current_bytes);
    cross_entropy(model->forward(images), labels).backward();
    const double measured = double(memory_stats().peak_bytes) - before;
    const double ratio = expected / measured;
    WARN(c.config << ": activations + gradients estimated " << train::format_bytes(expected) << ", measured "
                  << train::format_bytes(measured) << ": ratio " << ratio);
    CHECK(ratio > 0.5);
    CHECK(ratio < 2.0);
  }
}

TEST_CASE("a char-LM evaluation's estimate is within 2x of the allocator's measured peak", "[memory]") {
  // The quick config's model on a split directory of word salad (20,000 dev characters), with
  // many evaluation streams (the memory dominates: before, lsf eval counted it once and a
  // data.eval_batch_size of 100,000 was killed for memory instead of refused) and with few
  // (the tokens' activations dominate), long-short and full attention.
  const fs::path dir = testing::fresh_dir("memory_estimate", "lm_splits", /*create=*/true);
  std::ofstream(dir / "train.txt") << testing::word_salad(2000, 1);
  std::ofstream(dir / "dev.txt") << testing::word_salad(20000, 2);
  std::ofstream(dir / "test.txt") << testing::word_salad(2000, 3);
  const std::vector<std::string> corpus = {"data.corpus=splits", "data.path=" + dir.string(), "data.eval_characters=0"};
  const std::vector<std::vector<std::string>> cases = {
      {"data.eval_batch_size=400", "data.eval_characters=4000"},
      {"data.eval_batch_size=16"},
      {"data.eval_batch_size=16", "model.attention=full"},
  };
  for (const auto& overrides : cases) {
    std::vector<std::string> set = corpus;
    set.insert(set.end(), overrides.begin(), overrides.end());
    std::string described;
    for (const std::string& kv : overrides) described += kv + " ";
    INFO(described);
    const train::RunConfig config = train::load_config(kConfigDir + "/lm/quick.json", set);
    std::unique_ptr<train::Task> task = train::make_task(config);
    double expected = 0;
    for (const train::MemoryPart& part : task->estimate_memory(train::MemoryUse::Eval).parts)
      if (part.what == "activations" || part.what == "memory") expected += part.bytes;
    task->load_data({"dev"});
    std::shared_ptr<nn::Module> model = task->build_model();
    reset_peak_memory();
    const double before = double(memory_stats().current_bytes);
    task->evaluate(*model, "dev", 0);
    const double measured = double(memory_stats().peak_bytes) - before;
    const double ratio = expected / measured;
    WARN("estimated " << train::format_bytes(expected) << ", measured " << train::format_bytes(measured) << ": ratio " << ratio);
    CHECK(ratio > 0.5);
    CHECK(ratio < 2.0);
  }
  fs::remove_all(dir);
}

TEST_CASE("a GPU run's model parts are held to the device's memory, its data to the host's", "[memory]") {
  train::MemoryEstimate e;
  e.add("parameters", 6e9);
  e.add("activations", 3e9);
  e.add("dataset", 5e9, train::MemoryPlace::Host);
  REQUIRE(e.total() == 14e9);
  REQUIRE(e.in(train::MemoryPlace::Host).describe() == "4.7 GiB (dataset 4.7 GiB)");
  REQUIRE(e.in(train::MemoryPlace::RunDevice).parts.size() == 2);

  // One memory (a CPU run): every part against the one limit, whatever its place.
  train::MemoryLimits one;
  one.device = {12e9, "this machine has available (MemAvailable)"};
  CHECK_THROWS_WITH(train::check_memory_fits(e, one, ""),
                    Contains("not enough memory: the config needs an estimated 13.0 GiB (parameters 5.6 GiB, "
                             "activations 2.8 GiB, dataset 4.7 GiB), more than the 11.2 GiB this machine has available"));
  one.device.bytes = 14e9;
  CHECK_NOTHROW(train::check_memory_fits(e, one, ""));

  // Two memories (a CUDA run): the same 14 GB fit a 10 GB GPU beside 6 GB of host memory...
  train::MemoryLimits two;
  two.separate = true;
  two.device_name = "cuda:1";
  two.device = {10e9, "of cuda:1 (a GPU)"};
  two.host = {6e9, "this machine has available (MemAvailable)"};
  CHECK_NOTHROW(train::check_memory_fits(e, two, ""));
  // ...but not an 8 GB GPU, whose refusal names the device and only the parts that live there,
  two.device.bytes = 8e9;
  CHECK_THROWS_WITH(train::check_memory_fits(e, two, "evaluating 'x'"),
                    Contains("not enough memory on cuda:1 for evaluating 'x': the config needs an estimated 8.4 GiB "
                             "(parameters 5.6 GiB, activations 2.8 GiB), more than the 7.5 GiB of cuda:1 (a GPU)"));
  // and not 4 GB of host memory for the dataset.
  two.device.bytes = 10e9;
  two.host.bytes = 4e9;
  CHECK_THROWS_WITH(train::check_memory_fits(e, two, ""),
                    Contains("not enough host memory: the config needs an estimated 4.7 GiB (dataset 4.7 GiB), more "
                             "than the 3.7 GiB this machine has available (MemAvailable)"));
  // An unknown limit (0) refuses nothing.
  two.host.bytes = 0;
  CHECK_NOTHROW(train::check_memory_fits(e, two, ""));
}

TEST_CASE("memory_limits: one memory on the CPU and for a CUDA device this process lacks", "[memory]") {
  const train::RunConfig cpu = train::load_config(kConfigDir + "/quickstart.json", {"train.memory_limit=1000000"});
  const train::MemoryLimits a = train::memory_limits(cpu);
  CHECK_FALSE(a.separate);
  CHECK(a.device.bytes == 1e6);
  CHECK(a.device.source == "of 'train.memory_limit'");
  // A GPU config described where that GPU is absent (lsf info --model on a laptop): the host's
  // limit for all of it, as before; `lsf train` refuses the device itself (run_device).
  const train::RunConfig gpu = train::load_config(kConfigDir + "/quickstart.json", {"train.device=cuda:7"});
  if (cuda::device_count() <= 7) {
    const train::MemoryLimits b = train::memory_limits(gpu);
    CHECK_FALSE(b.separate);
    CHECK(b.device.source == "this machine has available (MemAvailable)");
  }
}

TEST_CASE("memory_limits: a CUDA run holds its model to the GPU's memory", "[memory][cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  const cuda::DeviceProperties p = cuda::device_properties(0);
  const train::MemoryLimits limits =
      train::memory_limits(train::load_config(kConfigDir + "/quickstart.json", {"train.device=cuda:0"}));
  CHECK(limits.separate);
  CHECK(limits.device_name == "cuda:0");
  CHECK(limits.device.bytes == double(p.total_memory));
  CHECK(limits.device.source == "of cuda:0 (" + p.name + ")");
  CHECK(limits.host.source == "this machine has available (MemAvailable)");
  // train.memory_limit bounds the run device, the GPU here.
  const train::MemoryLimits set = train::memory_limits(
      train::load_config(kConfigDir + "/quickstart.json", {"train.device=cuda:0", "train.memory_limit=1000000"}));
  CHECK(set.device.bytes == 1e6);
  CHECK(set.device.source == "of 'train.memory_limit'");
}
