// Run configs (models/train/config.h): every JSON under configs/ loads and validates, and bad
// configs give errors that name the dotted key or the missing path.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "helpers.h"
#include "lsformer/data/idx.h"
#include "lsformer/models/lra/lra_model.h"
#include "lsformer/models/lm/lm_options.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/lm_task.h"
#include "lsformer/models/train/lra_task.h"
#include "lsformer/models/train/trainer.h"
#include "lsformer/models/train/vision_task.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/models/vision/factory.h"
#include "lsformer/models/optim/optimizer.h"

namespace fs = std::filesystem;
using namespace lsf;
using Catch::Contains;

namespace {

const std::string kConfigDir = std::string(LSF_FIXTURE_DIR) + "/../../configs";

// A valid config whose data is generated in memory (no files needed).
const std::string kTiny = R"({
  "data": {"task": "listops", "generate": {"enabled": true, "train": 64, "dev": 16, "test": 16,
           "min_length": 10, "max_length": 40, "max_depth": 4, "max_args": 4}},
  "model": {"max_seq_len": 64, "dim": 16, "heads": 2, "ffn_dim": 32, "window": 4, "rank": 4},
  "schedule": {"warmup_steps": 5},
  "train": {"steps": 20, "batch_size": 8}
})";

// A vision config builds its model at its image size (structure only), and the ImageNet ones
// carry the paper's recipe (docs/transformer-ls.md §4.5, §4.6).
void check_vision_config(const std::string& file, const train::RunConfig& c) {
  INFO(file);
  const train::VisionSections& s = train::vision_sections(c);
  {
    nn::init::SkipRandomInit skip;  // structure only: full-size presets
    auto model = vision::make_image_classifier(s.model.name, train::image_spec(c, nullptr), train::classifier_options(c));
    CHECK(model->spec().num_classes == (s.data.source == train::ImageSource::Folder ? 1000 : 10));
  }
  if (s.data.source != train::ImageSource::Folder) {  // the quick runs: the installed Fashion-MNIST
    CHECK(s.data.source == train::ImageSource::FashionMnist);
    CHECK(s.data.path.empty());
    return;
  }
  const bool vil = s.model.name.rfind("vil_ls_", 0) == 0;
  // ImageNet-1k, 1,281,167 images at the global batch 1024: 1,251 steps per epoch.
  CHECK(c.train.batch_size == 1024);
  CHECK(c.train.steps == 300 * 1251);
  CHECK(c.schedule.warmup_steps == 5 * 1251);
  CHECK(c.schedule.name == train::ScheduleKind::WarmupCosine);
  CHECK((c.schedule.warmup_start_factor == 0.002 && !c.schedule.rebase && c.schedule.min_lr == 1e-6));
  CHECK((c.optimizer.name == train::OptimizerKind::AdamW && c.optimizer.eps == 1e-8 && c.optimizer.grad_clip == 0.0));
  CHECK(c.optimizer.no_decay == optim::vil_no_decay_patterns());
  CHECK(c.optimizer.lr == (vil ? 8e-4 : 5e-4));
  CHECK(c.optimizer.weight_decay == (vil ? 0.1 : 0.05));
  const double drop_path = s.model.name == "vil_ls_medium_224"   ? 0.3
                           : s.model.name == "vil_ls_base_224"   ? 0.5
                           : s.model.name == "vil_ls_medium_384" ? 0.2
                                                                 : 0.1;
  CHECK(s.model.drop_path == drop_path);
  CHECK(s.data.image_size == vision::default_spec(s.model.name).image_size);
  CHECK((s.data.mixup == 0.8 && s.data.cutmix == 1.0 && s.data.label_smoothing == 0.1 && s.data.erasing == 0.25));
  CHECK((s.data.rand_augment == "rand-m9-mstd0.5-inc1" && s.data.crop_pct == 0.875 && s.data.hflip == 0.5));
  CHECK(c.description.find("GPU") != std::string::npos);
}

}  // namespace

TEST_CASE("every shipped config loads and validates", "[configs]") {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(kConfigDir))
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  // 3 LRA tasks × 5 settings of docs/transformer-ls.md §2.5, the quickstart, the char-LM's
  // 3 × 3 phases of §3.8 with its two CPU configs, and the vision configs: 3 ViL-LS + 4 CvT*-LS
  // ImageNet recipes and the two Fashion-MNIST quick runs.
  REQUIRE(files.size() >= 36);
  for (const std::string& f : files) {
    INFO(f);
    train::RunConfig c;
    REQUIRE_NOTHROW(c = train::load_config(f));
    // Resolving is idempotent: the written config.json parses back to the same JSON.
    CHECK(train::to_json(train::parse_config(train::to_json(c))) == train::to_json(c));
    if (train::task_family(c.task).name == "lm") {  // configs/lm/: tests/test_lm_task.cpp checks the values
      CHECK_NOTHROW(lm::validate(train::lm_model_options(c)));
      continue;
    }
    if (c.task == "image") {
      check_vision_config(f, c);
      continue;
    }
    // The model the config describes is one the LRA model accepts (vocabulary and classes of
    // the task: ListOps 16/10, bytes 257/2, pixels 256/10 (lra_image) or 256/2 (pathfinder)).
    data::Dataset shape_only;
    shape_only.name = c.task;
    const bool pixels = c.task == "lra_image" || c.task == "pathfinder";
    shape_only.vocab_size = c.task == "listops" ? 16 : pixels ? 256 : 257;
    shape_only.num_classes = c.task == "listops" || c.task == "lra_image" ? 10 : 2;
    shape_only.paired = c.task == "retrieval";
    CHECK_NOTHROW(lra::validate(train::model_options(c, shape_only)));
    if (f.find("/lra/") != std::string::npos) {
      const train::LraSections& s = train::lra_sections(c);
      // The paper's LRA model and optimiser (§2.4–2.6): 2 layers, d = 64, 2 heads, FFN 128,
      // AdamW with eps 1e-6, OneCycle (linear) with peak 1e-4, batch 32.
      CHECK(s.model.layers == 2);
      CHECK(s.model.dim == 64);
      CHECK(s.model.heads == 2);
      CHECK(s.model.ffn_dim == 128);
      CHECK(c.optimizer.name == train::OptimizerKind::AdamW);
      CHECK(c.optimizer.lr == 1e-4);
      CHECK(c.optimizer.eps == 1e-6);
      CHECK(c.schedule.name == train::ScheduleKind::OneCycle);
      CHECK(c.schedule.anneal == optim::Anneal::Linear);
      CHECK(c.train.batch_size == 32);
      CHECK_FALSE(s.data.path.empty());
    }
  }
  // configs/lra-cpu/: the 3 offline tasks × 3 attentions of bench/run_lra_cpu.sh, each one
  // trainable without a download (generated in memory, or Debian's Fashion-MNIST).
  for (const char* task : {"listops", "pathfinder32", "image"})
    for (const char* attention : {"ls", "full", "linformer"}) {
      const std::string f = kConfigDir + "/lra-cpu/" + task + "_" + attention + ".json";
      INFO(f);
      REQUIRE(std::find(files.begin(), files.end(), f) != files.end());
      const train::RunConfig c = train::load_config(f);
      const train::LraSections& s = train::lra_sections(c);
      CHECK((s.data.generate.enabled || s.data.source == train::LraImageSource::FashionMnist));
      CHECK(s.model.layers == 2);
      CHECK(s.model.dim == 64);
      if (s.data.source != train::LraImageSource::FashionMnist || data::fashion_mnist_installed())
        CHECK_NOTHROW(train::validate_data_paths(c));
    }
  train::RunConfig q = train::load_config(kConfigDir + "/quickstart.json");
  CHECK(train::lra_sections(q).data.generate.enabled);
  CHECK_NOTHROW(train::validate_data_paths(q));  // generated in memory: nothing to find
}

TEST_CASE("the shipped LRA settings are transformer-ls.md §2.5's", "[configs]") {
  using lra::AttentionKind;
  auto load = [](const std::string& name) { return train::load_config(kConfigDir + "/lra/" + name + ".json"); };
  auto lra = [](const train::RunConfig& c) -> const train::LraSections& { return train::lra_sections(c); };
  train::RunConfig c = load("listops_ls");
  CHECK((lra(c).model.attention == AttentionKind::LongShort && lra(c).model.window == 8 && lra(c).model.rank == 32));
  CHECK((lra(c).data.seq_len == 2048 && c.train.steps == 5000 && c.schedule.warmup_steps == 1000));
  CHECK((c.train.eval_every == 50 && c.train.eval_batches == 62 && c.train.seed == 1234));
  c = load("listops_ls_best");
  CHECK((lra(c).model.window == 16 && lra(c).model.rank == 2));
  c = load("text_ls_best");
  CHECK((lra(c).model.window == 1 && lra(c).model.rank == 1 && c.optimizer.weight_decay == 0.01));
  c = load("retrieval_ls_best");
  CHECK((lra(c).model.window == 1 && lra(c).model.rank == 254 && lra(c).model.dropout == 0.1 && c.train.seed == 4096));
  c = load("retrieval_proj_best");
  CHECK((lra(c).model.window == 0 && lra(c).model.rank == 256 && c.train.steps == 30000));
  c = load("text_linformer");
  CHECK((lra(c).model.attention == AttentionKind::Linformer && lra(c).model.linformer_k == 256 && lra(c).data.seq_len == 4096));
  CHECK(lra(load("text_full")).model.attention == AttentionKind::Full);
}

TEST_CASE("config errors name the dotted key", "[configs]") {
  CHECK_NOTHROW(train::parse_config(kTiny));
  // Unknown keys, at any depth.
  CHECK_THROWS_WITH(train::parse_config(R"({"modle": {}})"), Contains("unknown key 'modle'"));
  CHECK_THROWS_WITH(train::parse_config(R"({"model": {"windw": 4}})"), Contains("unknown key 'model.windw'") && Contains("window"));
  CHECK_THROWS_WITH(train::parse_config(R"({"data": {"generate": {"seed": 1}}})"), Contains("'data.generate.seed'"));
  // A key given twice (JSON keeps the last without a word), at any depth, inside arrays too.
  CHECK_THROWS_WITH(train::parse_config(R"({"train": {"steps": 20}, "train": {"steps": 30}})"), Contains("key 'train' is given twice"));
  CHECK_THROWS_WITH(train::parse_config(R"({"data": {"seed": 1, "generate": {"train": 5, "train": 6}}})"),
                    Contains("key 'data.generate.train' is given twice"));
  CHECK_THROWS_WITH(train::parse_config(R"({"x": [{"a": 1, "a": 2}]})"), Contains("key 'x.a' is given twice"));
  CHECK_THROWS_WITH(train::parse_config(R"({"model": {"dim": 64}, "train": {"steps": 20, "log_every": 2}, "model": {}})"),
                    Contains("key 'model' is given twice"));
  // Wrong JSON types.
  CHECK_THROWS_WITH(train::parse_config(R"({"train": {"steps": "ten"}})"),
                    Contains("'train.steps' must be an integer") && Contains("\"ten\""));
  CHECK_THROWS_WITH(train::parse_config(R"({"train": {"steps": 2.5}})"), Contains("'train.steps' must be an integer"));
  CHECK_THROWS_WITH(train::parse_config(R"({"model": {"fused": 1}})"), Contains("'model.fused' must be a boolean"));
  CHECK_THROWS_WITH(train::parse_config(R"({"optimizer": {"betas": [0.9]}})"), Contains("'optimizer.betas' must be an array of 2"));
  CHECK_THROWS_WITH(train::parse_config(R"({"data": 3})"), Contains("'data' must be an object"));
  CHECK_THROWS_WITH(train::parse_config(R"([1, 2])"), Contains("must be a JSON object"));
  CHECK_THROWS_WITH(train::parse_config("{\"train\": "), Contains("not valid JSON"));
  // Values out of range and unknown names.
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"train.batch_size=0"}), Contains("'train.batch_size' must be ≥ 1"));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"model.attention=sparse"}),
                    Contains("'model.attention' must be one of long_short, full, linformer"));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"train.seed=-1"}), Contains("'train.seed' must be a non-negative integer"));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"model.heads=3"}), Contains("'model.dim' (16) must be a multiple of 'model.heads' (3)"));
  // No data at all.
  CHECK_THROWS_WITH(train::parse_config("{}"), Contains("'data.path'") && Contains("data.generate.enabled"));
  // The file itself.
  CHECK_THROWS_WITH(train::load_config("/nonexistent/run.json"), Contains("'/nonexistent/run.json'"));
}

TEST_CASE("config overrides (--set): JSON values, plain strings, and only known keys", "[configs]") {
  train::RunConfig c = train::parse_config(
      kTiny, {"train.steps=30", "model.attention=full", "optimizer.betas=[0.8, 0.99]", "model.dropout=0.1",
              "data.path=\"quoted\"", "description=a run with spaces = fine", "data.generate.enabled=false"});
  CHECK(c.train.steps == 30);
  CHECK(train::lra_sections(c).model.attention == lra::AttentionKind::Full);
  CHECK(c.optimizer.betas[0] == 0.8);
  CHECK(c.optimizer.betas[1] == 0.99);
  CHECK(train::lra_sections(c).model.dropout == 0.1);
  CHECK(train::lra_sections(c).data.path == "quoted");
  CHECK(c.description == "a run with spaces = fine");
  // A string key takes digits as text; a number key refuses text, naming the key.
  CHECK(train::lra_sections(train::parse_config(kTiny, {"data.generate.enabled=false", "data.path=123"})).data.path == "123");
  // Named by the --set that gave the value, not by the file (which holds a good one).
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"train.steps=many"}), Contains("--set train.steps=many: 'train.steps' must be an integer"));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"train.stepz=3"}), Contains("--set: unknown key 'train.stepz'"));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"model..dim=3"}), Contains("--set: unknown key 'model..dim'"));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"train.steps"}), Contains("--set expects key=value"));
  // An override may set a whole section, checked like the file.
  CHECK(train::parse_config(kTiny, {R"(schedule={"name": "constant", "warmup_steps": 0})"}).schedule.name ==
        train::ScheduleKind::Constant);
  CHECK_THROWS_WITH(train::parse_config(kTiny, {R"(schedule={"nme": "constant"})"}), Contains("unknown key 'schedule.nme'"));
}

TEST_CASE("missing data paths are errors naming the key and the path", "[configs]") {
  fs::path dir = fs::temp_directory_path() / ("lsf_test_configs_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string base = R"({"data": {"task": "listops", "path": ")" + dir.string() + R"("}, "schedule": {"warmup_steps": 5},
                              "train": {"steps": 20}})";
  train::RunConfig c = train::parse_config(base);  // validation of the schema does not need the files
  CHECK_THROWS_WITH(train::validate_data_paths(c), Contains("'data.path'") && Contains((dir / "basic_train.tsv").string()));
  for (const char* name : {"basic_train.tsv", "basic_val.tsv"}) std::ofstream(dir / name) << "Source\tTarget\n";
  CHECK_THROWS_WITH(train::validate_data_paths(c), Contains((dir / "basic_test.tsv").string()));
  std::ofstream(dir / "basic_test.tsv") << "Source\tTarget\n";
  CHECK_NOTHROW(train::validate_data_paths(c));
  // Files holding a header alone: the split and its file are named when the data loads (it
  // was "BatchLoader: dataset 'listops' has no examples").
  CHECK_THROWS_WITH(train::make_task(c)->load_data({"test"}),
                    Contains("the test split of listops ('" + (dir / "basic_test.tsv").string() + "') holds no examples"));
  // An explicit file replaces the layout's, and its key is named.
  c = train::parse_config(base, {"data.files.test=" + (dir / "other.tsv").string()});
  CHECK_THROWS_WITH(train::validate_data_paths(c), Contains("'data.files.test'") && Contains("other.tsv"));
  // The layouts of the other tasks.
  train::LraDataConfig d;
  d.path = "lra";
  CHECK(train::data_files("retrieval", d).dev == (fs::path("lra") / "new_aan_pairs.eval.tsv").string());
  CHECK(train::data_files("text", d).train == (fs::path("lra") / "train").string());
  CHECK(train::data_files("text", d).test == (fs::path("lra") / "test").string());
  fs::remove_all(dir);
}

TEST_CASE("optimizer.no_decay splits the parameters into a decayed and a no-decay group", "[configs]") {
  nn::Sequential model;
  model.push_back(std::make_shared<nn::Linear>(3, 4));
  model.push_back(std::make_shared<nn::LayerNorm>(4));
  // Default: one group, every parameter decayed (the LRA and char-LM code bases).
  train::RunConfig c = train::parse_config(kTiny, {"optimizer.weight_decay=0.1"});
  CHECK(c.optimizer.no_decay.empty());
  std::unique_ptr<optim::Optimizer> opt = train::make_optimizer(c, model);
  REQUIRE(opt->num_groups() == 1);
  CHECK(opt->group_params(0).size() == 4);
  // Substring patterns: the biases and the LayerNorm's weight go to group 1 without decay.
  c = train::parse_config(kTiny, {"optimizer.weight_decay=0.1", R"(optimizer.no_decay=["bias", "1.weight"])"});
  for (const char* name : {"adamw", "adam"}) {
    INFO(name);
    c.optimizer.name = parse_enum<train::OptimizerKind>(name, train::kOptimizerNames, "optimizer.name");
    opt = train::make_optimizer(c, model);
    REQUIRE(opt->num_groups() == 2);
    std::vector<std::string> decayed, plain;
    for (const auto& [n, t] : opt->group_params(0)) decayed.push_back(n);
    for (const auto& [n, t] : opt->group_params(1)) plain.push_back(n);
    CHECK(decayed == std::vector<std::string>{"0.weight"});
    CHECK(plain == std::vector<std::string>{"0.bias", "1.weight", "1.bias"});
    CHECK(std::get<double>(opt->option_map(0).at("weight_decay")) == 0.1);
    CHECK(std::get<double>(opt->option_map(1).at("weight_decay")) == 0.0);
  }
  CHECK_THROWS_WITH(train::parse_config(kTiny, {R"(optimizer.no_decay=["bias", ""])"}), Contains("'optimizer.no_decay' holds an empty pattern"));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"optimizer.no_decay=[1]"}), Contains("'optimizer.no_decay' must be an array of strings"));
}

TEST_CASE("schedule.warmup_start_factor and schedule.rebase give ViL's warmup + cosine", "[configs]") {
  // Defaults keep the plain warmup + cosine (from 0, rebased after warmup).
  train::RunConfig c = train::parse_config(kTiny, {"schedule.name=warmup_cosine", "train.steps=100", "schedule.warmup_steps=10"});
  CHECK(c.schedule.warmup_start_factor == 0.0);
  CHECK(c.schedule.rebase);
  std::unique_ptr<optim::Schedule> s = train::make_schedule(c);
  const optim::WarmupCosine plain({.lr = c.optimizer.lr, .warmup_steps = 10, .total_steps = 100});
  for (int64_t step : {0, 5, 10, 55, 99}) CHECK(s->lr(step) == plain.lr(step));
  // The ViL recipe: from 0.002·lr, floor 1e-6, cosine on the global step.
  c = train::parse_config(kTiny, {"schedule.name=warmup_cosine", "train.steps=100", "schedule.warmup_steps=10", "optimizer.lr=8e-4",
                                  "schedule.min_lr=1e-6", "schedule.warmup_start_factor=0.002", "schedule.rebase=false"});
  s = train::make_schedule(c);
  const optim::WarmupCosine vil(optim::vil_warmup_cosine(8e-4, 10, 100));
  for (int64_t step = 0; step <= 100; ++step) CHECK(s->lr(step) == vil.lr(step));
  CHECK(s->lr(0) == 8e-4 * 0.002);
  CHECK(s->lr(10) < 8e-4);  // not rebased: the cosine starts below the peak
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"schedule.name=warmup_cosine", "schedule.warmup_start_factor=2"}),
                    Contains("'schedule.warmup_start_factor' must be in [0, 1]"));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"schedule.rebase=false"}),
                    Contains("'schedule.rebase' applies to warmup_cosine only") && Contains("\"onecycle\""));
}

TEST_CASE("an LRA key another task or attention reads is an error when set here", "[configs]") {
  // kTiny generates listops: Pathfinder's image keys, text's max_length and Linformer's k would be ignored.
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"data.generate.image_size=64"}),
                    Contains("'data.generate.image_size' applies to pathfinder only, and 'data.task' is \"listops\""));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"data.generate.difficulty=curv_baseline"}), Contains("applies to pathfinder only"));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"data.max_length=10"}), Contains("'data.max_length' applies to text and retrieval only"));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"model.linformer_k=7"}),
                    Contains("'model.linformer_k' applies to linformer attention only, and 'model.attention' is \"long_short\""));
  // Switching a generating config to files keeps its generate.* keys allowed.
  CHECK_NOTHROW(train::parse_config(kTiny, {"data.generate.enabled=false", "data.path=/somewhere"}));
}

TEST_CASE("a schedule key the chosen schedule does not read is an error, and min_lr is a floor below lr", "[configs]") {
  // Each would be ignored: refused naming the key, the schedules that read it, and the one chosen.
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"schedule.min_lr=1e-5"}),
                    Contains("'schedule.min_lr' applies to warmup_cosine and linear only") && Contains("\"onecycle\""));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"schedule.name=constant", "schedule.warmup_steps=15"}),
                    Contains("'schedule.warmup_steps' applies to every schedule but constant") && Contains("\"constant\""));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"schedule.name=constant", "schedule.warmup_steps=0", "schedule.anneal=cos"}),
                    Contains("'schedule.anneal' applies to onecycle only"));
  for (const char* key : {"schedule.div_factor=10", "schedule.final_div_factor=10", "schedule.base_momentum=0.8",
                          "schedule.max_momentum=0.9", "schedule.cycle_momentum=false"})
    CHECK_THROWS_WITH(train::parse_config(kTiny, {"schedule.name=linear", key}), Contains("applies to onecycle only"));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"schedule.name=warmup_constant", "schedule.rebase=false"}),
                    Contains("'schedule.rebase' applies to warmup_cosine only"));
  // Every key at the task's default is no choice (a stored config holds them all), and warmup 0
  // suits constant.
  CHECK_NOTHROW(train::parse_config(kTiny, {"schedule.name=constant", "schedule.warmup_steps=0"}));
  CHECK_NOTHROW(train::parse_config(train::to_json(train::parse_config(kTiny, {"schedule.name=linear", "schedule.min_lr=1e-5"}))));
  // The floor the decay ends at must not be above the peak it decays from (it made the "decay" rise).
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"schedule.name=warmup_cosine", "schedule.min_lr=1"}),
                    Contains("'schedule.min_lr' (1), the floor the schedule decays to, must be ≤ 'optimizer.lr'"));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"schedule.name=linear", "schedule.min_lr=1"}), Contains("must be ≤ 'optimizer.lr'"));
}

TEST_CASE("optimizer.eps must be > 0: Adam's update would be 0 / 0 for a parameter never used yet", "[config]") {
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"optimizer.eps=0"}), Contains("'optimizer.eps' must be > 0"));
  CHECK_THROWS_WITH(train::parse_config(kTiny, {"optimizer.eps=-1e-8"}), Contains("got -1e-08"));
  CHECK_NOTHROW(train::parse_config(kTiny, {"optimizer.eps=1e-12"}));
}
