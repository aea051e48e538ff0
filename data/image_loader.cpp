// ImageLoader: ordered delivery of batches computed ahead on worker threads (data/image_loader.h).
#include "lsformer/data/image_loader.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "lsformer/data/batch.h"
#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

ImageLoader::ImageLoader(std::shared_ptr<const ImageDataset> dataset, ImagePipeline pipeline,
                         ImageLoaderOptions options)
    : dataset_(std::move(dataset)), pipeline_(std::move(pipeline)), options_(options) {
  LSF_CHECK(dataset_ != nullptr) << "ImageLoader: no dataset given";
  const int64_t n = dataset_->size();
  LSF_CHECK(n > 0) << "ImageLoader: dataset '" << dataset_->name() << "' is empty";
  LSF_CHECK(options_.batch_size >= 1) << "ImageLoader: batch_size must be ≥ 1, got " << options_.batch_size;
  LSF_CHECK(options_.prefetch >= 1) << "ImageLoader: prefetch must be ≥ 1, got " << options_.prefetch;
  LSF_CHECK(options_.num_workers >= 0) << "ImageLoader: num_workers must be ≥ 0, got " << options_.num_workers;
  batches_per_epoch_ = options_.drop_last ? n / options_.batch_size : (n + options_.batch_size - 1) / options_.batch_size;
  LSF_CHECK(batches_per_epoch_ > 0) << "ImageLoader: drop_last with batch_size " << options_.batch_size
                                    << " but dataset '" << dataset_->name() << "' has only " << n << " samples";
  const int64_t channels = pipeline_.output_channels(*dataset_);
  LSF_CHECK(int64_t(pipeline_.options().mean.size()) == channels)
      << "ImageLoader: the pipeline's mean/std have " << pipeline_.options().mean.size() << " values but its images have "
      << channels << " channels (dataset '" << dataset_->name() << "')";
  LSF_CHECK(options_.shards >= 1 && options_.shard >= 0 && options_.shard < options_.shards)
      << "ImageLoader: shard " << options_.shard << " of " << options_.shards << " does not exist";
  LSF_CHECK(options_.shards == 1 || (options_.drop_last && options_.batch_size % options_.shards == 0))
      << "ImageLoader: a batch_size of " << options_.batch_size << " does not split into " << options_.shards
      << " equal shards (sharding needs drop_last and batch_size divisible by the shards)";
  if (pipeline_.mixing()) {
    LSF_CHECK(options_.batch_size % 2 == 0)
        << "ImageLoader: Mixup/CutMix needs an even batch_size, got " << options_.batch_size;
    LSF_CHECK(options_.batch_size / options_.shards % 2 == 0)
        << "ImageLoader: Mixup/CutMix pairs the samples within each of the " << options_.shards
        << " shards, so each needs an even number of rows, got " << options_.batch_size / options_.shards;
    LSF_CHECK(options_.drop_last || n % options_.batch_size % 2 == 0)
        << "ImageLoader: Mixup/CutMix needs even batches, but without drop_last the last batch has "
        << n % options_.batch_size << " samples";
  }
}

ImageLoader::~ImageLoader() { stop(); }

std::vector<int64_t> ImageLoader::batch_indices(int64_t k) const {
  LSF_CHECK(k >= 0) << "ImageLoader: batch index must be ≥ 0, got " << k;
  const int64_t epoch = k / batches_per_epoch_, position = k % batches_per_epoch_;
  const int64_t n = dataset_->size();
  const int64_t begin = position * options_.batch_size, end = std::min(n, begin + options_.batch_size);
  std::lock_guard<std::mutex> lock(order_mutex_);
  if (cached_epoch_ != epoch) {
    cached_order_ = epoch_permutation(n, options_.seed, epoch, options_.shuffle);
    cached_epoch_ = epoch;
  }
  return std::vector<int64_t>(cached_order_.begin() + begin, cached_order_.begin() + end);
}

ImageBatch ImageLoader::batch(int64_t k) const {
  std::vector<int64_t> indices = batch_indices(k);
  if (options_.shards > 1) {
    const int64_t rows = options_.batch_size / options_.shards, first = options_.shard * rows;
    indices = std::vector<int64_t>(indices.begin() + first, indices.begin() + first + rows);
  }
  return pipeline_.batch(*dataset_, indices, k / batches_per_epoch_, options_.seed, k);
}

ImageLoader::Slot ImageLoader::compute(int64_t k) const {
  Slot slot;
  try {
    slot.batch = batch(k);
  } catch (const std::exception& e) {
    slot.error = std::make_exception_ptr(
        Error("ImageLoader: batch " + std::to_string(k) + " (epoch " + std::to_string(k / batches_per_epoch_) +
              ") failed: " + e.what()));
  } catch (...) {
    slot.error = std::make_exception_ptr(Error("ImageLoader: batch " + std::to_string(k) + " failed"));
  }
  return slot;
}

void ImageLoader::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_cv_.wait(lock, [&] {
      return stop_ || ((end_ < 0 || next_claim_ < end_) && next_claim_ < next_deliver_ + options_.prefetch);
    });
    if (stop_) return;
    const int64_t k = next_claim_++;
    lock.unlock();
    const Clock::time_point t0 = Clock::now();
    Slot slot = compute(k);
    const double spent = seconds_since(t0);
    lock.lock();
    if (stop_) return;  // the stream was stopped or restarted: drop the batch
    stats_.compute_seconds += spent;
    ready_.emplace(k, std::move(slot));
    ready_cv_.notify_all();
  }
}

void ImageLoader::start(int64_t first, int64_t end) {
  LSF_CHECK(first >= 0 && (end < 0 || end >= first))
      << "ImageLoader::start: need 0 ≤ first ≤ end (or end = −1), got first " << first << ", end " << end;
  stop();
  std::lock_guard<std::mutex> lock(mutex_);
  stop_ = false;
  running_ = true;
  next_claim_ = next_deliver_ = first;
  end_ = end;
  ready_.clear();
  for (int i = 0; i < options_.num_workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ImageBatch ImageLoader::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  LSF_CHECK(running_) << "ImageLoader::next: the stream is not started (call start first)";
  LSF_CHECK(end_ < 0 || next_deliver_ < end_)
      << "ImageLoader::next: the stream ended at batch " << end_ << " (start another)";
  const int64_t k = next_deliver_;
  Slot slot;
  if (options_.num_workers == 0) {
    lock.unlock();
    const Clock::time_point t0 = Clock::now();
    slot = compute(k);
    lock.lock();
    stats_.compute_seconds += seconds_since(t0);
    stats_.wait_seconds += seconds_since(t0);  // the consumer waits for all of it
  } else {
    const Clock::time_point t0 = Clock::now();
    if (ready_.count(k) == 0) {
      ready_cv_.wait(lock, [&] { return ready_.count(k) != 0; });
      stats_.wait_seconds += seconds_since(t0);
    }
    auto it = ready_.find(k);
    slot = std::move(it->second);
    ready_.erase(it);
  }
  ++next_deliver_;
  ++stats_.batches;
  work_cv_.notify_all();  // room for one more batch ahead
  lock.unlock();
  if (slot.error) std::rethrow_exception(slot.error);
  slot.batch.index = k;
  return std::move(slot.batch);
}

void ImageLoader::stop() {
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    running_ = false;
    workers.swap(workers_);
    ready_.clear();
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
  for (std::thread& t : workers) t.join();
}

LoaderStats ImageLoader::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

LoaderStats time_loader(ImageLoader& loader, int64_t batches, double* seconds, int64_t first) {
  LSF_CHECK(batches >= 1) << "time_loader: batches must be ≥ 1, got " << batches;
  const LoaderStats before = loader.stats();
  const Clock::time_point t0 = Clock::now();
  loader.start(first, first + batches);
  for (int64_t i = 0; i < batches; ++i) loader.next();
  if (seconds != nullptr) *seconds = seconds_since(t0);
  loader.stop();
  LoaderStats after = loader.stats();
  after.batches -= before.batches;
  after.wait_seconds -= before.wait_seconds;
  after.compute_seconds -= before.compute_seconds;
  return after;
}

}  // namespace lsf::data
