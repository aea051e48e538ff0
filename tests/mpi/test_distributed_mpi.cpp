// Data-parallel training across processes: run under `mpirun -np 2` (tests/CMakeLists.txt
// registers it so; CTest skips it, saying why, in a build without MPI). Both ranks run every
// test case in the same order; runs that compare against one process happen on rank 0 alone,
// in the same process, with the single-process group.
//
// Tolerance of "N ranks = one process" (both f32): the ranks' mean gradient is the same sum as
// one process's, reassociated (two half-batch GEMM reductions and an all-reduce instead of one
// reduction over the batch), so each gradient differs by a few f32 roundings, relative ~1e-6
// (u = 6e-8 times reduction lengths of a few hundred). Adam's update m/√v is scale-free and
// changes by about that relative amount, so after k = 6..12 steps the parameters differ from one
// process's by ~1e-5 of the distance they moved. The check bounds that difference by 1e-3 of the
// difference between one process on the global batch and one process on half of it (the error a
// missing or wrong all-reduce makes, a control computed in the same test): a gap of two orders
// of magnitude above the expected rounding, and two below what a wrong reduction gives.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>
#include <tuple>

#include "helpers.h"
#include "run_helpers.h"
#include "image_test_files.h"
#include "lsformer/engine/distributed.h"
#include "lsformer/models/train/trainer.h"

namespace fs = std::filesystem;
using namespace lsf;

namespace {

std::shared_ptr<dist::ProcessGroup> world() {
  auto w = dist::init_world();
  REQUIRE(w->size() == 2);  // run as: mpirun -np 2 test_distributed_mpi
  return w;
}

// A scratch directory all ranks share: named after rank 0's pid, created by rank 0.
fs::path shared_dir(const std::string& name) {
  auto w = world();
  std::string pid = std::to_string(getpid());
  w->broadcast_bytes(pid, 0);
  fs::path dir = fs::temp_directory_path() / ("lsf_test_mpi_" + pid + "_" + name);
  if (w->is_root()) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  std::string done;
  w->broadcast_bytes(done, 0);  // the others wait until it exists
  return dir;
}

train::TrainSummary run(const train::RunConfig& config, const fs::path& dir, std::shared_ptr<dist::ProcessGroup> group,
                        bool resume = false, int64_t stop_after = 0) {
  std::ostringstream log;
  train::TrainOptions options = testing::quiet_train_options(dir, log);
  options.resume = resume;
  options.stop_after = stop_after;
  options.world = std::move(group);
  options.bucket_bytes = 4096;  // several buckets even for these tiny models
  try {
    return train::train(config, options);
  } catch (...) {
    UNSCOPED_INFO(log.str());
    throw;
  }
}

// √Σ (a − b)² over the weights of two checkpoints (the optimizer's moments and task state left out).
double weight_distance(const fs::path& a, const fs::path& b) {
  SafetensorsContents fa = load_safetensors(a.string()), fb = load_safetensors(b.string());
  double sum = 0;
  int64_t compared = 0;
  for (const auto& [name, t] : fa.tensors) {
    if (name.rfind("optimizer.", 0) == 0 || name.rfind("task.", 0) == 0) continue;
    REQUIRE(fb.tensors.count(name));
    const std::vector<double> x = t.to_vector<double>(), y = fb.tensors.at(name).to_vector<double>();
    REQUIRE(x.size() == y.size());
    for (size_t i = 0; i < x.size(); ++i) sum += (x[i] - y[i]) * (x[i] - y[i]);
    ++compared;
  }
  REQUIRE(compared > 0);
  return std::sqrt(sum);
}

// ListOps generated in memory, a 2-layer long-short model, batch 8, 6 steps, no dropout.
train::RunConfig listops_config(int64_t batch_size) {
  return train::parse_config(R"({
  "data": {"task": "listops", "generate": {"enabled": true, "train": 200, "dev": 24, "test": 24,
           "min_length": 10, "max_length": 40, "max_depth": 4, "max_args": 4}, "seed": 0},
  "model": {"vocab_size": 16, "max_seq_len": 64, "dim": 32, "heads": 2, "layers": 2, "ffn_dim": 64,
            "attention": "long_short", "window": 8, "rank": 4, "dropout": 0.0, "attention_dropout": 0.0,
            "pooling": "cls", "head_hidden": 32},
  "optimizer": {"name": "adamw", "lr": 1e-3, "eps": 1e-6, "weight_decay": 0.01},
  "schedule": {"name": "constant"},
  "train": {"steps": 6, "batch_size": )" + std::to_string(batch_size) +
                                 R"(, "eval_every": 3, "log_every": 2, "checkpoint_every": 3, "seed": 1, "threads": 1}
})",
                             {}, "listops test config");
}

// The char-LM on a tiny split directory written by rank 0 (4 streams of blocks of 8), no dropout.
train::RunConfig lm_config(const fs::path& corpus, int64_t batch_size) {
  return train::parse_config(R"({
  "data": {"task": "lm", "corpus": "splits", "path": ")" + corpus.string() + R"(", "eval_batch_size": 2},
  "model": {"dim": 16, "heads": 2, "layers": 2, "ffn_dim": 32, "block_length": 8, "memory_length": 8,
            "chunk_length": 2, "rank": 1, "window": 4, "dropout": 0.0, "emb_dropout": 0.0},
  "optimizer": {"name": "adamw", "lr": 1e-2, "eps": 1e-8, "weight_decay": 0.01},
  "schedule": {"name": "constant"},
  "train": {"steps": 12, "batch_size": )" + std::to_string(batch_size) +
                                 R"(, "eval_every": 6, "log_every": 2, "checkpoint_every": 4, "seed": 2, "threads": 1}
})",
                             {}, "lm test config");
}

// MNIST-layout IDX files of 8×8 textures (the class is the texture), written by rank 0; the
// same images as tests/test_vision_task.cpp.
void write_textures(const fs::path& dir, int n_train, int n_test) {
  constexpr int kSide = 8;
  for (auto [prefix, n, salt] : {std::tuple{"train", n_train, 0}, std::tuple{"t10k", n_test, 1}}) {
    std::string images = test::idx_header({uint32_t(n), kSide, kSide}), labels = test::idx_header({uint32_t(n)});
    for (int i = 0; i < n; ++i) {
      const int label = i % 4, phase = (i / 4) % 2;
      for (int y = 0; y < kSide; ++y)
        for (int x = 0; x < kSide; ++x) {
          const int along = label == 0 ? y : label == 1 ? x : x + y;
          const int noise = (i * 131 + y * 17 + x * 29 + salt * 7) % 61;
          images.push_back(char(uint8_t((label == 3 ? 100 : (along + phase) % 2 == 0 ? 170 : 30) + noise)));
        }
      labels.push_back(char(label));
    }
    test::write_bytes((dir / (std::string(prefix) + "-images-idx3-ubyte")).string(), images);
    test::write_bytes((dir / (std::string(prefix) + "-labels-idx1-ubyte")).string(), labels);
  }
}

// A tiny ViL-LS on them, augmentation and Mixup off (the sharded loader decodes each rank's rows).
train::RunConfig vision_config(const fs::path& data, int64_t batch_size) {
  return train::parse_config(R"({
    "data": {"task": "image", "source": "mnist", "path": ")" + data.string() + R"(", "image_size": 8,
             "random_resized_crop": false, "hflip": 0, "rand_augment": "", "erasing": 0, "mixup": 0, "cutmix": 0,
             "label_smoothing": 0, "crop_pct": 1.0, "eval_batch_size": 48, "workers": 1, "prefetch": 2},
    "model": {"name": "vil:l1,h2,d16,n1,s1,g1,p2,f2,a0,r2_l2,h2,d32,n1,s0,g0,p2,f2,a0"},
    "optimizer": {"lr": 3e-3, "weight_decay": 0.05, "eps": 1e-8},
    "schedule": {"name": "constant"},
    "train": {"steps": 6, "batch_size": )" + std::to_string(batch_size) +
                                 R"(, "eval_every": 0, "log_every": 2, "checkpoint_every": 3, "seed": 5, "threads": 1}
  })",
                             {}, "vision test config");
}

}  // namespace

TEST_CASE("2 ranks with global batch 2b reach one process's parameters with batch 2b", "[mpi]") {
  auto w = world();
  const fs::path dir = shared_dir("equivalence");
  const train::TrainSummary dp = run(listops_config(8), dir / "ranks", w);
  CHECK(dp.steps == 6);
  CHECK(dp.finished);
  if (!w->is_root()) return;
  // The files of the run are rank 0's alone and complete.
  for (const char* f : {"config.json", "metrics.jsonl", "last.safetensors", "best.safetensors", "summary.json"})
    CHECK(fs::exists(dir / "ranks" / f));
  const train::TrainSummary one = run(listops_config(8), dir / "one", dist::single_process_group());
  run(listops_config(4), dir / "half", dist::single_process_group());
  const double d_ranks = weight_distance(dir / "ranks" / "last.safetensors", dir / "one" / "last.safetensors");
  const double d_half = weight_distance(dir / "half" / "last.safetensors", dir / "one" / "last.safetensors");
  INFO("2 ranks vs one process: " << d_ranks << "; half the batch vs the whole: " << d_half);
  CHECK(d_half > 1e-3);  // the control really differs
  CHECK(d_ranks <= 1e-3 * d_half);
  // The logged losses agree to the same degree (the mean of the ranks' means is the global mean).
  CHECK(std::fabs(dp.final_train_loss - one.final_train_loss) <= 1e-4 * std::fabs(one.final_train_loss));
}

TEST_CASE("the char-LM's streams shard by rank, and a run resumes from 1 to 2 ranks and back", "[mpi]") {
  auto w = world();
  const fs::path dir = shared_dir("lm_resume");
  const fs::path corpus = dir / "corpus";
  if (w->is_root()) {
    fs::create_directories(corpus);
    std::ofstream(corpus / "train.txt") << testing::word_salad(600, 1);
    std::ofstream(corpus / "dev.txt") << testing::word_salad(120, 2);
    std::ofstream(corpus / "test.txt") << testing::word_salad(120, 3);
  }
  std::string sync;
  w->broadcast_bytes(sync, 0);
  const fs::path chain = dir / "chain";
  // Steps 1–4 in one process (rank 0), 5–8 on both ranks, 9–12 in one process again.
  if (w->is_root()) run(lm_config(corpus, 4), chain, dist::single_process_group(), false, 4);
  w->broadcast_bytes(sync, 0);
  run(lm_config(corpus, 4), chain, w, /*resume=*/true, 8);
  if (!w->is_root()) return;
  {
    // The 2-rank checkpoint holds the memory of all 4 streams, joined from both ranks.
    SafetensorsContents last = load_safetensors((chain / "last.safetensors").string());
    int64_t memories = 0;
    for (const auto& [name, t] : last.tensors)
      if (name.rfind("task.", 0) == 0) {
        INFO(name << ": " << t.dim() << " dims, " << t.size(0) << " rows");
        CHECK(t.size(0) == 4);
        ++memories;
      }
    CHECK(memories > 0);
  }
  const train::TrainSummary end = run(lm_config(corpus, 4), chain, dist::single_process_group(), true);
  CHECK(end.finished);
  run(lm_config(corpus, 4), dir / "one", dist::single_process_group());
  run(lm_config(corpus, 2), dir / "half", dist::single_process_group());
  const double d_chain = weight_distance(chain / "last.safetensors", dir / "one" / "last.safetensors");
  const double d_half = weight_distance(dir / "half" / "last.safetensors", dir / "one" / "last.safetensors");
  INFO("1→2→1 ranks vs one process: " << d_chain << "; half the streams vs all: " << d_half);
  CHECK(d_half > 1e-3);
  CHECK(d_chain <= 1e-3 * d_half);
}

TEST_CASE("a rank that stops answering is an error after the timeout, not a hang", "[mpi]") {
  auto w = world();
  Tensor t = full({4}, double(w->rank() + 1), TensorOptions(kF64));
  // Start together: the previous test leaves rank 0 behind (it writes the run directory), and
  // under a sanitizer by more than the 1.2 s margin below.
  Tensor start = zeros({1}, TensorOptions(kF64));
  w->allreduce_async(start, dist::ReduceOp::Sum)->wait(/*timeout_s=*/0, "the test's start");
  if (w->rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // "hung"
  auto work = w->allreduce_async(t, dist::ReduceOp::Average);
  if (w->rank() == 0) {
    CHECK_THROWS_WITH(work->wait(0.3, "the test's all-reduce"),
                      Catch::Contains("the test's all-reduce did not complete within 0.3 s on rank 0 of 2") &&
                          Catch::Contains("LSF_DIST_TIMEOUT"));
  }
  work->wait(/*timeout_s=*/0, "the test's all-reduce");  // rank 1 arrives: it completes
  test::check_close(t, {1.5, 1.5, 1.5, 1.5}, 0, 0);     // (1 + 2) / 2, exact
}

TEST_CASE("a global batch the ranks cannot split is refused on every rank", "[mpi]") {
  auto w = world();
  const fs::path dir = shared_dir("odd_batch");
  CHECK_THROWS_WITH(run(listops_config(7), dir / "run", w), Catch::Contains("cannot be split over 2 ranks"));
}

TEST_CASE("the vision loader shards by rank: 2 ranks reach one process's ViL-LS", "[mpi]") {
  auto w = world();
  const fs::path dir = shared_dir("vision");
  if (w->is_root()) {
    fs::create_directories(dir / "data");
    write_textures(dir / "data", 96, 24);
  }
  std::string sync;
  w->broadcast_bytes(sync, 0);
  run(vision_config(dir / "data", 8), dir / "ranks", w);
  if (!w->is_root()) return;
  run(vision_config(dir / "data", 8), dir / "one", dist::single_process_group());
  run(vision_config(dir / "data", 4), dir / "half", dist::single_process_group());
  const double d_ranks = weight_distance(dir / "ranks" / "last.safetensors", dir / "one" / "last.safetensors");
  const double d_half = weight_distance(dir / "half" / "last.safetensors", dir / "one" / "last.safetensors");
  INFO("2 ranks vs one process: " << d_ranks << "; half the batch vs the whole: " << d_half);
  CHECK(d_half > 1e-3);
  CHECK(d_ranks <= 1e-3 * d_half);
}
