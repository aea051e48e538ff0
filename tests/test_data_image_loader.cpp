// ImagePipeline batches and the threaded ImageLoader: batch k is the same tensors with 0, 1 or
// 3 workers, streamed or computed directly, and after a resume at k; epochs visit every sample
// once; a worker's error reaches the consumer naming the file; destroying a loader mid-stream
// neither hangs nor leaks a running thread; the number of batches ahead stays bounded; a
// data-parallel shard is its rows of the global batch.
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include <filesystem>
#include <fstream>
#include <random>

#include "lsformer/data/image_decode.h"
#include "lsformer/data/image_folder.h"
#include "lsformer/data/image_loader.h"
#include "helpers.h"

using namespace lsf;
using namespace lsf::data;

namespace {

// A synthetic dataset: image i is a 12×10 RGB pattern of i; optional per-image delay, a sample
// that fails, and a count of images decoded.
class SyntheticDataset : public ImageDataset {
 public:
  SyntheticDataset(int64_t n, int64_t failing = -1, int delay_ms = 0) : n_(n), failing_(failing), delay_ms_(delay_ms) {
    name_ = "synthetic";
    channels_ = 3;
    for (int c = 0; c < 5; ++c) class_names_.push_back("class" + std::to_string(c));
  }
  int64_t size() const override { return n_; }
  Image image(int64_t index) const override {
    check_image_index(*this, index);
    ++decoded;
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    LSF_CHECK(index != failing_) << "decode_image: '" << describe(index) << "' is corrupt: test failure";
    Image image(12, 10, 3);
    for (size_t p = 0; p < image.pixels.size(); ++p) image.pixels[p] = uint8_t((index * 37 + int64_t(p) * 11) % 256);
    return image;
  }
  int32_t label(int64_t index) const override { return int32_t(index % 5); }
  std::string describe(int64_t index) const override { return "img_" + std::to_string(index) + ".jpg"; }
  mutable std::atomic<int64_t> decoded{0};

 private:
  int64_t n_, failing_;
  int delay_ms_;
};

ImagePipelineOptions small_train() {
  ImagePipelineOptions o;
  o.image_size = 8;
  return o;  // the full recipe: crop, flip, RandAugment, erasing, Mixup/CutMix
}

void check_same(const ImageBatch& a, const ImageBatch& b) {
  REQUIRE(a.images.shape() == b.images.shape());
  CHECK(a.images.to_vector<float>() == b.images.to_vector<float>());
  CHECK(a.labels.to_vector<int64_t>() == b.labels.to_vector<int64_t>());
  REQUIRE(a.soft_targets.defined() == b.soft_targets.defined());
  if (a.soft_targets.defined()) CHECK(a.soft_targets.to_vector<float>() == b.soft_targets.to_vector<float>());
}

}  // namespace

TEST_CASE("image batches: shapes, labels, soft targets, evaluation batches", "[data][image]") {
  auto data = std::make_shared<SyntheticDataset>(10);
  const ImagePipeline train(small_train(), 5);
  const ImageBatch b = train.batch(*data, {3, 7, 1, 0}, /*epoch=*/0, /*seed=*/1, /*batch_index=*/0);
  CHECK(b.images.shape() == Shape{4, 3, 8, 8});
  CHECK(b.images.dtype() == kF32);
  CHECK(b.labels.to_vector<int64_t>() == std::vector<int64_t>{3, 2, 1, 0});
  REQUIRE(b.soft_targets.defined());
  CHECK(b.soft_targets.shape() == Shape{4, 5});
  const auto t = b.soft_targets.to_vector<float>();
  for (int i = 0; i < 4; ++i) {
    double row = 0;
    for (int k = 0; k < 5; ++k) row += t[size_t(i * 5 + k)];
    CHECK(std::fabs(row - 1) < 1e-6);
  }
  ImagePipelineOptions eval_options;
  eval_options.train = false;
  eval_options.image_size = 8;
  const ImagePipeline eval(eval_options, 5);
  const ImageBatch e = eval.batch(*data, {0, 1, 2}, 0, 1, 0);
  CHECK(e.images.shape() == Shape{3, 3, 8, 8});
  CHECK_FALSE(e.soft_targets.defined());
  check_same(e, eval.batch(*data, {0, 1, 2}, 4, 99, 7));  // evaluation has no randomness
  // Gray conversion on request, and per-channel statistics must match it.
  eval_options.channels = 1;
  CHECK_THROWS_WITH(ImagePipeline(eval_options, 5).batch(*data, {0}, 0, 0, 0), Catch::Contains("mean/std"));
  eval_options.mean = {0.5f};
  eval_options.std = {0.25f};
  CHECK(ImagePipeline(eval_options, 5).batch(*data, {0}, 0, 0, 0).images.shape() == Shape{1, 1, 8, 8});
  CHECK_THROWS_WITH(ImagePipeline(ImagePipelineOptions{.image_size = 0}, 5), Catch::Contains("image_size"));
  CHECK_THROWS_WITH(ImagePipeline(ImagePipelineOptions{.rand_augment = "rand-q1"}, 5), Catch::Contains("q1"));
}

TEST_CASE("image loader: batch k is the same for any worker count, streamed or resumed", "[data][image]") {
  auto data = std::make_shared<SyntheticDataset>(22);
  const ImageLoaderOptions base{.batch_size = 4, .seed = 5, .num_workers = 0};
  ImageLoader reference(data, ImagePipeline(small_train(), 5), base);
  CHECK(reference.batches_per_epoch() == 5);  // drop_last: 22 // 4
  // Each epoch visits 20 distinct samples in a seeded order that differs between epochs.
  std::set<int64_t> seen;
  for (int64_t k = 0; k < 5; ++k)
    for (int64_t i : reference.batch_indices(k)) CHECK(seen.insert(i).second);
  CHECK(seen.size() == 20);
  CHECK(reference.batch_indices(5) != reference.batch_indices(0));
  std::vector<ImageBatch> expected;
  for (int64_t k = 0; k < 12; ++k) expected.push_back(reference.batch(k));
  for (int workers : {0, 1, 3}) {
    INFO("workers " << workers);
    ImageLoaderOptions o = base;
    o.num_workers = workers;
    o.prefetch = 3;
    ImageLoader loader(data, ImagePipeline(small_train(), 5), o);
    loader.start(0, 12);
    for (int64_t k = 0; k < 12; ++k) {
      const ImageBatch b = loader.next();
      CHECK(b.index == k);
      check_same(b, expected[size_t(k)]);
    }
    CHECK_THROWS_WITH(loader.next(), Catch::Contains("ended"));
    // A resume at batch 7 (mid-epoch 1) continues exactly.
    loader.start(7);
    for (int64_t k = 7; k < 10; ++k) check_same(loader.next(), expected[size_t(k)]);
    CHECK(loader.stats().batches == 15);
  }
}

TEST_CASE("image loader: a worker's error reaches the consumer naming the file", "[data][image]") {
  auto data = std::make_shared<SyntheticDataset>(16, /*failing=*/6);
  ImageLoader loader(data, ImagePipeline(small_train(), 5),
                     {.batch_size = 4, .shuffle = false, .num_workers = 2, .prefetch = 2});
  loader.start();
  CHECK(loader.next().index == 0);
  CHECK_THROWS_WITH(loader.next(), Catch::Contains("batch 1") && Catch::Contains("img_6.jpg") &&
                                       Catch::Contains("corrupt"));
  CHECK(loader.next().index == 2);  // the stream goes on after the failed batch
  CHECK_THROWS_WITH(ImageLoader(data, ImagePipeline(small_train(), 5), {.batch_size = 3}),
                    Catch::Contains("even batch_size"));
  CHECK_THROWS_WITH(ImageLoader(data, ImagePipeline(small_train(), 5), {.batch_size = 32}),
                    Catch::Contains("only 16 samples"));
  CHECK_THROWS_WITH(ImageLoader(data, ImagePipeline(small_train(), 5), {.num_workers = -1}),
                    Catch::Contains("num_workers"));
  ImageLoader idle(data, ImagePipeline(small_train(), 5), {.batch_size = 4});
  CHECK_THROWS_WITH(idle.next(), Catch::Contains("not started"));
}

TEST_CASE("image loader: bounded prefetch and clean shutdown mid-stream", "[data][image]") {
  // 10 ms per image, 4 images per batch: each batch takes ≥ 40 ms of a worker.
  auto slow = std::make_shared<SyntheticDataset>(400, -1, /*delay_ms=*/10);
  {
    ImageLoader loader(slow, ImagePipeline(small_train(), 5),
                       {.batch_size = 4, .num_workers = 3, .prefetch = 2});
    loader.start();
    loader.next();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    // The consumer took 1 batch; at most prefetch = 2 more exist or are being built.
    CHECK(slow->decoded.load() <= (1 + 2) * 4);
    const auto t0 = std::chrono::steady_clock::now();
    loader.stop();
    const double stop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(stop_s < 1.0);  // at most one batch in progress per worker (≈ 40 ms) is finished
  }
  // Destroying a running loader (no explicit stop), with batches in flight, returns promptly.
  const auto t0 = std::chrono::steady_clock::now();
  {
    ImageLoader loader(slow, ImagePipeline(small_train(), 5), {.batch_size = 4, .num_workers = 4, .prefetch = 8});
    loader.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 1.0);
  // The consumer does not wait when it is slower than the loader: after the first batch,
  // waiting totals (much) less than the consumer's own 100 ms per step.
  ImageLoader loader(slow, ImagePipeline(small_train(), 5), {.batch_size = 4, .num_workers = 2, .prefetch = 4});
  loader.start(0, 6);
  loader.next();
  const double first_wait = loader.stats().wait_seconds;
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // "the training step"
    loader.next();
  }
  CHECK(loader.stats().wait_seconds - first_wait < 0.1);
}

TEST_CASE("image loader over a JPEG folder: a corrupt file's path reaches the consumer", "[data][image]") {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("lsf_loader_folder_" + std::to_string(std::random_device{}()));
  for (int c = 0; c < 2; ++c) {
    std::filesystem::create_directories(root / ("class" + std::to_string(c)));
    for (int i = 0; i < 4; ++i) {
      Image image(20 + 4 * i, 30, 3);
      for (size_t p = 0; p < image.pixels.size(); ++p)
        image.pixels[p] = uint8_t((p * 7 + size_t(i) * 50 + size_t(c) * 90) % 256);
      write_jpeg((root / ("class" + std::to_string(c)) / ("img" + std::to_string(i) + ".jpg")).string(), image, 90);
    }
  }
  // Replace class1/img2.jpg (sample 6: classes sorted, files sorted) by a truncated copy.
  const std::string victim = (root / "class1" / "img2.jpg").string();
  std::string bytes;
  {
    std::ifstream in(victim, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ofstream(victim, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size() / 2));
  auto data = std::make_shared<ImageFolderDataset>(root.string());
  REQUIRE(data->size() == 8);
  CHECK(data->path(6) == victim);
  ImagePipelineOptions o = small_train();
  ImageLoader loader(data, ImagePipeline(o, data->num_classes()),
                     {.batch_size = 2, .shuffle = false, .num_workers = 2, .prefetch = 4});
  loader.start(0, 4);
  for (int64_t k = 0; k < 3; ++k) CHECK(loader.next().images.shape() == Shape{2, 3, 8, 8});
  CHECK_THROWS_WITH(loader.next(), Catch::Contains("batch 3") && Catch::Contains(victim) &&
                                       (Catch::Contains("corrupt or truncated") || Catch::Contains("not a readable JPEG")));
  loader.stop();
  std::filesystem::remove_all(root);
}

TEST_CASE("image loader: a data-parallel shard is its rows of the global batch", "[data][image][distributed]") {
  auto data = std::make_shared<SyntheticDataset>(24);
  ImagePipelineOptions plain = small_train();
  plain.mixup.mixup_alpha = 0, plain.mixup.cutmix_alpha = 0;  // Mixup pairs within a shard: rows differ
  const ImagePipeline pipeline(plain, 5);
  ImageLoader whole(data, pipeline, {.batch_size = 6, .num_workers = 0});
  for (int shard = 0; shard < 3; ++shard) {
    ImageLoader part(data, pipeline, {.batch_size = 6, .num_workers = 0, .shard = shard, .shards = 3});
    CHECK(part.batches_per_epoch() == whole.batches_per_epoch());  // the global batch's stream
    for (int64_t k : {0, 5}) {
      const ImageBatch all = whole.batch(k), mine = part.batch(k);
      REQUIRE(mine.images.size(0) == 2);
      CHECK(mine.images.to_vector<float>() == all.images.narrow(0, 2 * shard, 2).contiguous().to_vector<float>());
      CHECK(mine.labels.to_vector<int64_t>() == all.labels.narrow(0, 2 * shard, 2).contiguous().to_vector<int64_t>());
    }
  }
  CHECK_THROWS_WITH(ImageLoader(data, pipeline, {.batch_size = 6, .shard = 0, .shards = 4}),
                    Catch::Contains("does not split into 4 equal shards"));
  CHECK_THROWS_WITH(ImageLoader(data, pipeline, {.batch_size = 6, .shard = 3, .shards = 3}),
                    Catch::Contains("shard 3 of 3 does not exist"));
  // With Mixup/CutMix each shard pairs its own rows: it needs an even count.
  CHECK_NOTHROW(ImageLoader(data, ImagePipeline(small_train(), 5), {.batch_size = 12, .shards = 3}));  // 4 rows each
  CHECK_THROWS_WITH(ImageLoader(data, ImagePipeline(small_train(), 5), {.batch_size = 6, .shards = 2}),
                    Catch::Contains("within each of the 2 shards, so each needs an even number of rows, got 3"));
}
