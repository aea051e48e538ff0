// The vision family in the trainer (models/train/vision_task.h): tiny IDX, CIFAR and PNG-folder
// datasets written by the test, a tiny ViL-LS, a few steps. A short run lowers the loss, lsf eval's
// computation reproduces the final top-1 exactly, a resumed run (the loader restarted at the
// resumed step, with augmentation, Mixup/CutMix, drop path and loader threads on) ends
// bit-identical, config errors name their keys, `lsf info --model`'s summary measures the
// model, and the LRA task renamed to lra_image still trains.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "run_helpers.h"
#include "image_test_files.h"
#include "lsformer/models/train/bench.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/trainer.h"
#include "lsformer/models/train/vision_task.h"
#include "lsformer/models/vision/factory.h"
#include "lsformer/ops/kernels/conv.h"

namespace fs = std::filesystem;
using namespace lsf;
using Catch::Contains;
using test::TempDir;

namespace {

constexpr int kSide = 8, kClasses = 4;

// Image i of a split: class i % 4 is a texture — horizontal stripes, vertical stripes, a
// checkerboard (each of period 2, in one of two phases) or flat grey — over deterministic noise.
// Textures, not positions: the ViL's relative-position attention and mean pooling see them at
// once, and a 2×2 patch embedding separates them (a tiny ViL learns them in ~150 steps).
std::vector<uint8_t> texture_image(int i, int salt) {
  const int label = i % kClasses, phase = (i / kClasses) % 2;
  std::vector<uint8_t> px(kSide * kSide);
  for (int y = 0; y < kSide; ++y)
    for (int x = 0; x < kSide; ++x) {
      const int noise = (i * 131 + y * 17 + x * 29 + salt * 7) % 61;
      const int along = label == 0 ? y : label == 1 ? x : x + y;
      const int value = label == 3 ? 100 : (along + phase) % 2 == 0 ? 170 : 30;
      px[size_t(y * kSide + x)] = uint8_t(value + noise);
    }
  return px;
}

// MNIST-layout IDX files (train: n_train images, t10k: n_test) of 8×8 texture images.
void write_idx_dataset(const TempDir& dir, int n_train, int n_test) {
  for (auto [prefix, n, salt] : {std::tuple{"train", n_train, 0}, std::tuple{"t10k", n_test, 1}}) {
    std::string images = test::idx_header({uint32_t(n), kSide, kSide}), labels = test::idx_header({uint32_t(n)});
    for (int i = 0; i < n; ++i) {
      const auto px = texture_image(i, salt);
      images.append(px.begin(), px.end());
      labels.push_back(char(i % kClasses));
    }
    test::write_bytes(dir / (std::string(prefix) + "-images-idx3-ubyte"), images);
    test::write_gz(dir / (std::string(prefix) + "-labels-idx1-ubyte.gz"), labels);  // .gz works too
  }
}

// A tiny ViL-LS: stage 1 long-short on the 4×4 map (w 2, r 2, a CLS, relative-position bias),
// stage 2 full attention on 2×2 with relative biases, mean pooled. Augmentation off, 1 thread:
// every number is deterministic.
std::string tiny_config(const std::string& path) {
  return R"({
    "data": {"task": "image", "source": "mnist", "path": ")" +
         path + R"(", "image_size": 8, "random_resized_crop": false, "hflip": 0,
             "rand_augment": "", "erasing": 0, "mixup": 0, "cutmix": 0, "label_smoothing": 0, "crop_pct": 1.0,
             "eval_batch_size": 48, "workers": 1, "prefetch": 2},
    "model": {"name": "vil:l1,h2,d16,n1,s1,g1,p2,f2,a0,r2_l2,h2,d32,n1,s0,g0,p2,f2,a0"},
    "optimizer": {"lr": 3e-3, "weight_decay": 0.05, "eps": 1e-8, "no_decay": ["norm.weight", "norm.bias", "relative_position"]},
    "schedule": {"name": "warmup_cosine", "warmup_steps": 5, "warmup_start_factor": 0.002, "rebase": false, "min_lr": 1e-6},
    "train": {"steps": 160, "batch_size": 16, "eval_every": 80, "log_every": 40, "checkpoint_every": 40, "seed": 5, "threads": 1}
  })";
}

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("vision", name); }

// tiny_config with the whole recipe on — random-resized crop, flip, RandAugment, erasing,
// Mixup/CutMix with label smoothing, drop path, two loader threads — for 14 steps without
// evaluation, plus `more` overrides: the runs whose steps must be reproduced bit for bit.
train::RunConfig whole_recipe(const TempDir& data, std::vector<std::string> more) {
  std::vector<std::string> o = {"train.steps=14", "train.eval_every=0", "data.random_resized_crop=true", "data.hflip=0.5",
                                "data.rand_augment=rand-m9-mstd0.5-inc1", "data.erasing=0.25", "data.mixup=0.8",
                                "data.cutmix=1.0", "data.label_smoothing=0.1", "data.workers=2", "model.drop_path=0.1"};
  o.insert(o.end(), more.begin(), more.end());
  return train::parse_config(tiny_config(data.path().string()), o);
}

std::vector<double> train_losses(const fs::path& metrics) {
  std::vector<double> losses;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.at("split") == "train") losses.push_back(j.at("loss"));
  }
  return losses;
}

void check_same_files(const fs::path& a, const fs::path& b) {
  SafetensorsContents fa = load_safetensors(a.string()), fb = load_safetensors(b.string());
  REQUIRE(fa.tensors.size() == fb.tensors.size());
  for (const auto& [name, t] : fa.tensors) {
    INFO(name);
    REQUIRE(fb.tensors.count(name));
    CHECK(t.to(kF64).to_vector<double>() == fb.tensors.at(name).to(kF64).to_vector<double>());  // bit for bit
  }
}

}  // namespace

TEST_CASE("a short image run lowers the loss and lsf eval reproduces its top-1 exactly", "[train][vision]") {
  TempDir data("vision_idx");
  write_idx_dataset(data, 400, 80);
  const train::RunConfig config = train::parse_config(tiny_config(data.path().string()));
  fs::path dir = fresh_dir("loss");
  std::ostringstream log;
  train::TrainSummary s = testing::run_training(config, dir, log);
  INFO(log.str());
  REQUIRE(s.finished);
  // The dev split is the last 10% of the 400 training images, the test split the t10k file.
  CHECK_THAT(log.str(), Contains("mnist (360 train / 40 dev / 80 test images; 8×8×1, 10 classes)"));
  CHECK(s.dev.metric("examples") == 40);
  CHECK(s.test.metric("examples") == 80);
  const std::vector<double> losses = train_losses(dir / "metrics.jsonl");
  REQUIRE(losses.size() == 4);
  // Ten outputs (MNIST's), four used: the loss starts above ln 4 ≈ 1.39 and ends near 0.2
  // (measured; deterministic with one thread).
  CHECK(losses.front() > 1.0);
  CHECK(losses.back() < 0.6 * losses.front());
  CHECK(s.test.metric("top1") > 0.6);
  CHECK(s.test.metric("top5") == 1.0);  // four classes: the label is always among the top 5
  CHECK_THAT(log.str(), Contains("test top-1 ") && Contains("top-5 100.00%"));
  for (const train::EvalResult* printed : {&s.dev, &s.test}) {
    train::EvalResult again = train::evaluate_checkpoint(s.best_checkpoint, printed->split);
    CHECK(again.metric("correct") == printed->metric("correct"));
    CHECK(again.metric("top1") == printed->metric("top1"));  // exactly: the same computation
    CHECK(again.metric("top5") == printed->metric("top5"));
    CHECK(again.loss == printed->loss);
    CHECK(again.step == s.best_step);
  }
  CHECK(train::describe_result(s.best_checkpoint, s.test).rfind("top-1 ", 0) == 0);
  fs::remove_all(dir);
}

TEST_CASE("a resumed image run ends bit-identical, the loader restarted at the resumed step", "[train][vision]") {
  TempDir data("vision_resume");
  write_idx_dataset(data, 200, 40);
  const train::RunConfig config = whole_recipe(data, {"train.checkpoint_every=3"});
  fs::path a = fresh_dir("resume_a"), b = fresh_dir("resume_b");
  std::ostringstream log;
  testing::run_training(config, a, log);
  train::TrainSummary stopped = testing::run_training(config, b, log, /*resume=*/false, /*stop_after=*/7);
  CHECK(stopped.steps == 7);
  manual_seed(999);  // something else moved the global RNG: resume must restore it
  (void)randn({10});
  train::TrainSummary resumed = testing::run_training(config, b, log, /*resume=*/true);
  INFO(log.str());
  CHECK(resumed.finished);
  check_same_files(a / "last.safetensors", b / "last.safetensors");
  fs::remove_all(a);
  fs::remove_all(b);
}

// lsf bench (models/train/bench.h; the LRA and char-LM cases are in test_bench.cpp): its warm-up
// and timed steps are the run's first steps, the loader's batches and augmentation included.
TEST_CASE("bench_training runs the steps lsf train runs (images: augmentation, Mixup/CutMix, loader threads)",
          "[train][vision][bench]") {
  TempDir data("vision_bench");
  write_idx_dataset(data, 200, 40);
  const train::RunConfig config = whole_recipe(data, {"train.checkpoint_every=0", "optimizer.grad_clip=1.0"});
  train::BenchOptions options;
  options.warmup_steps = 2;
  options.steps = 3;
  const train::BenchResult r = train::bench_training(config, options);
  CHECK(r.unit == "samples");
  CHECK(r.units_per_step == 16);
  fs::path dir = fresh_dir("bench_run");
  std::ostringstream log;
  testing::run_training(config, dir, log, /*resume=*/false, /*stop_after=*/5);
  const SafetensorsContents saved = load_safetensors((dir / "last.safetensors").string());
  for (const auto& [name, p] : r.model->named_parameters()) {
    INFO(name);
    REQUIRE(saved.tensors.count(name));
    CHECK(p.to_vector<float>() == saved.tensors.at(name).to_vector<float>());  // bit for bit
  }
  fs::remove_all(dir);
}

TEST_CASE("image config errors name their keys", "[configs][vision]") {
  TempDir data("vision_errors");
  const std::string base = tiny_config(data.path().string());
  CHECK_NOTHROW(train::parse_config(base));
  auto fails = [&](const std::vector<std::string>& overrides, const std::string& text) {
    INFO(overrides.front());
    CHECK_THROWS_WITH(train::parse_config(base, overrides), Contains(text));
  };
  fails({"data.source=imagenet"}, "'data.source' must be one of fashion_mnist, mnist, cifar10, cifar100, folder");
  fails({"data.path="}, "'data.path' must name the mnist data");
  fails({"data.dev_fraction=1"}, "'data.dev_fraction' must be in (0, 1)");
  fails({"data.source=folder", "data.image_size=0"}, "'data.image_size' must be set (> 0) for an image folder");
  fails({"data.channels=2"}, "'data.channels' must be 0 (the source's), 1 or 3");
  fails({"data.interpolation=nearest"}, "'data.interpolation' must be bilinear or bicubic");
  fails({"data.mean=[0.5, 0.5, 0.5]", "data.std=[0.5, 0.5, 0.5]"}, "one value per channel (1), got 3");
  fails({"data.mean=[0.5]"}, "'data.mean' and 'data.std' must have the same length");
  fails({"data.mean=[0.5]", "data.std=[0]"}, "every 'data.std' value must be > 0");
  fails({"data.mean=\"gray\""}, "'data.mean' must be an array of numbers");
  fails({"data.crop_scale=[0.5, 0.2]"}, "'data.crop_scale' must be [min, max]");
  fails({"data.hflip=1.5"}, "'data.hflip' must be in [0, 1]");
  fails({"data.rand_augment=rand-q9"}, "'data.rand_augment'");
  fails({"data.mixup=0.8", "train.batch_size=15"}, "'train.batch_size' must be even");
  fails({"data.workers=-1"}, "'data.workers' must be in [0, 256]");
  fails({"data.crop_pct=0"}, "'data.crop_pct' must be in (0, 1]");
  fails({"model.name=resnet50"}, "'model.name': image classifier: unknown model 'resnet50'");
  fails({"model.name=vil:garbage"}, "'model.name': ViL arch \"garbage\"");  // checked with the config
  fails({"model.in_channels=2"}, "'model.in_channels' must be 0 (the data's), 1 or 3");
  fails({"model.drop_path=1"}, "'model.drop_path' must be in [0, 1)");
  fails({"model.kv_stride=2"}, "'model.kv_stride' applies to CvT*-LS (cvt_ls_*) models only");
  fails({"model.name=cnn", "model.dual_ln=false"}, "'model.dual_ln' applies to ViL and CvT*-LS models only, not 'cnn'");
  fails({"data.windw=3"}, "unknown key 'data.windw'");
  // Missing files: the key and the path.
  write_idx_dataset(data, 20, 8);
  fs::remove(data / "t10k-images-idx3-ubyte");
  CHECK_THROWS_WITH(train::validate_data_paths(train::parse_config(base)),
                    Contains("'data.path'") && Contains("t10k-images-idx3-ubyte[.gz]") && Contains("does not exist"));
  CHECK_THROWS_WITH(train::validate_data_paths(train::parse_config(base, {"data.source=cifar10"})),
                    Contains("cifar10 training batch") && Contains("data_batch_1.bin"));
  CHECK_THROWS_WITH(train::validate_data_paths(train::parse_config(base, {"data.source=folder"})),
                    Contains("folder training folder") && Contains("train"));
  // A model that does not fit the images names the key: patch 4 gives a 2×2 map, not a multiple of w = 4.
  write_idx_dataset(data, 20, 8);
  std::unique_ptr<train::Task> task = train::make_task(train::parse_config(base, {"model.name=vil:l1,h1,d8,n1,s1,g1,p4,f4,a0,r2"}));
  task->load_data({"test"});
  CHECK_THROWS_WITH(task->build_model(), Contains("'model.name'") && Contains("8×8 images"));
}

TEST_CASE("image folders: val/ is the dev and test split, classes and channels come from the data", "[train][vision]") {
  TempDir root("vision_folder");
  // Two classes of 8×8 RGB PNGs; train/ holds 6 per class, val/ 2 per class.
  for (const char* split : {"train", "val"})
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < (std::string(split) == "train" ? 6 : 2); ++i) {
        std::vector<uint32_t> samples(8 * 8 * 3, uint32_t(c ? 200 : 40) + uint32_t(i));
        test::write_png_raw(root / (std::string(split) + "/class" + std::to_string(c) + "/" + std::to_string(i) + ".png"), 8, 8,
                            PNG_COLOR_TYPE_RGB, 8, samples);
      }
  const train::RunConfig config = train::parse_config(tiny_config(""), {"data.source=folder", "data.path=" + root.path().string(),
                                                                          "train.batch_size=4", "train.steps=3", "train.eval_every=0",
                                                                          "schedule.warmup_steps=1"});
  std::unique_ptr<train::Task> task = train::make_task(config);
  task->load_data({"train", "dev", "test"});
  CHECK(task->describe_data().find("folder (12 train / 4 dev / 4 test images; 8×8×3, 2 classes)") == 0);
  manual_seed(1);
  std::shared_ptr<nn::Module> model = task->build_model();
  CHECK(dynamic_cast<vision::ImageClassifier&>(*model).spec().num_classes == 2);
  model->train();
  train::TrainStep s = task->train_step(*model, 0);
  CHECK(std::isfinite(s.loss.item<double>()));
  CHECK(task->evaluate(*model, "test", 0).metric("examples") == 4);
  // Without val/, dev is the last 10% of train/ and the test split needs test/.
  fs::rename(root / "val", root / "test");
  task = train::make_task(config);
  task->load_data({"train", "dev", "test"});
  CHECK(task->describe_data().find("folder (11 train / 1 dev / 4 test images") == 0);
  // The summary for lsf info needs the data only for a folder's class count.
  train::ModelSummary m = task->summarize_model();
  CHECK(m.description.find("8×8×3 images, 2 classes") != std::string::npos);
}

TEST_CASE("lsf info's model summary: parameters and multiply-adds without the data", "[train][vision]") {
  // No files at all: the source fixes classes, channels and size (MNIST: 10, 1, 28 → 8 set here).
  const train::RunConfig config = train::parse_config(tiny_config("/nonexistent"));
  train::ModelSummary s = train::make_task(config)->summarize_model();
  auto model = vision::make_image_classifier(train::vision_sections(config).model.name, {.num_classes = 10, .image_size = 8, .in_channels = 1});
  const vision::ModelCost cost = vision::measure_cost(*model);
  CHECK(s.parameters == cost.parameters);
  CHECK(s.multiply_adds == cost.multiply_adds);
  CHECK(s.example == "image");
  CHECK(s.description == "vil:l1,h2,d16,n1,s1,g1,p2,f2,a0,r2_l2,h2,d32,n1,s0,g0,p2,f2,a0, 8×8×1 images, 10 classes");
  // DualLN off: two LayerNorms of 16 fewer in the one long-short block.
  CHECK(train::make_task(train::parse_config(tiny_config("/nonexistent"), {"model.dual_ln=false"}))->summarize_model().parameters ==
        cost.parameters - 4 * 16);
  // A folder's classes come from its folders unless model.num_classes says.
  CHECK_THROWS_WITH(train::make_task(train::parse_config(tiny_config("/nonexistent"), {"data.source=folder"}))->summarize_model(),
                    Contains("/nonexistent"));
  CHECK(train::make_task(train::parse_config(tiny_config("/nonexistent"), {"data.source=folder", "model.num_classes=5"}))
            ->summarize_model()
            .description.find("8×8×3 images, 5 classes") != std::string::npos);
}

TEST_CASE("top-1 and top-5 counting breaks ties as argmax does", "[vision]") {
  Tensor logits = tensor(std::vector<float>{0, 5, 5, 1, 2, 3, 4,    // label 2: tied with index 1, which wins → rank 1
                                            9, 1, 2, 3, 4, 5, 6,    // label 0: top-1
                                            1, 2, 3, 4, 5, 6, 0},   // label 6: rank 6, outside the top 5
                         {3, 7});
  train::TopK k = train::count_top_k(logits, tensor(std::vector<int64_t>{2, 0, 6}));
  CHECK(k.correct1 == 1);
  CHECK(k.correct5 == 2);
  CHECK(train::count_top_k(logits, tensor(std::vector<int64_t>{1, 0, 5})).correct1 == 3);  // argmax of every row
  CHECK_THROWS_WITH(train::count_top_k(logits, tensor(std::vector<int64_t>{7, 0, 0})), Contains("label 7 outside [0, 7)"));
}

TEST_CASE("the LRA CIFAR-10 sequence task trains as lra_image", "[train][vision]") {
  TempDir data("lra_image");
  // Five training batches of 4 records and a test batch of 4: label byte, then 3072 pixel bytes.
  auto batch = [](int first) {
    std::string bytes;
    for (int i = first; i < first + 4; ++i) {
      bytes.push_back(char(i % 10));
      for (int p = 0; p < 3072; ++p) bytes.push_back(char((i * 7 + p) % 251));
    }
    return bytes;
  };
  for (int b = 1; b <= 5; ++b) test::write_bytes(data / ("data_batch_" + std::to_string(b) + ".bin"), batch(4 * b));
  test::write_bytes(data / "test_batch.bin", batch(100));
  const train::RunConfig config = train::parse_config(R"({
    "data": {"task": "lra_image", "path": ")" + data.path().string() + R"("},
    "model": {"vocab_size": 256, "max_seq_len": 1024, "dim": 8, "heads": 2, "ffn_dim": 16, "layers": 1, "window": 32, "rank": 2},
    "schedule": {"warmup_steps": 2},
    "train": {"steps": 3, "batch_size": 4, "eval_every": 0, "threads": 1}
  })");
  fs::path dir = fresh_dir("lra_image");
  std::ostringstream log;
  train::TrainSummary s = testing::run_training(config, dir, log);
  INFO(log.str());
  CHECK(s.finished);
  CHECK(s.dev.metric("examples") == 2);   // the last 10% of the 20 training images
  CHECK(s.test.metric("examples") == 4);
  CHECK_THROWS_WITH(train::parse_config(R"({"data": {"task": "image", "path": "x", "generate": {"enabled": true}}})"),
                    Contains("unknown key 'data.generate'"));
  fs::remove_all(dir);
}

TEST_CASE("an image task names the kernels a device lacks before a run starts on it", "[train][vision]") {
  const std::unique_ptr<train::Task> task = train::make_task(train::parse_config(tiny_config("/nonexistent")));
  CHECK(task->unsupported_device(kCPU).empty());
  const std::string why = task->unsupported_device(kCUDA);
  if (conv2d_forward_kernel.implemented(DeviceType::CUDA)) {
    WARN("this build has CUDA convolutions: " << (why.empty() ? "nothing missing" : why));
  } else {
    CHECK_THAT(why, Contains("no kernels on cuda in this build") && Contains("conv2d_forward_kernel"));
    const train::RunConfig config = train::parse_config(tiny_config("/nonexistent"), {"train.device=cuda"});
    CHECK_THROWS_WITH(train::check_device_supported(*task, kCUDA, config),
                      Contains("'train.device' is \"cuda\" but the vision models'") && Contains("--set train.device=cpu"));
  }
}
