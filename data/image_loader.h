// ImageLoader: decodes and augments the next batches on worker threads while the model trains
// on the current one.
//
// The stream: batch k covers positions [p·B, p·B + B) of epoch e's order, e = k / batches_per_epoch,
// p = k % batches_per_epoch, the order being epoch_permutation(N, seed, e) (data/batch.h, the
// same shuffle as BatchLoader) and the batch built by ImagePipeline::batch(dataset, indices, e,
// seed, k). So batch k is a pure function of (dataset, pipeline options, loader options, k):
// batch(k) computes it on the caller's thread, and the streamed next() returns exactly the same
// tensors whatever the number of workers, their scheduling or a resume at any k.
//
// Threads: start(first, end) launches num_workers std::threads. Each claims the lowest batch
// index not yet claimed, as long as it is below end and fewer than `prefetch` batches ahead of
// the consumer (the bound on memory: at most prefetch batches exist at once, ready or in
// progress), computes it and files it under its index; next() waits for the batch it expects,
// so batches come out in order even when workers finish out of order. num_workers = 0 computes
// each batch inside next() (no threads).
//
// Coexistence with the model's OpenMP pool: the workers are plain std::threads running plain
// loops (decoders, data/image_*.cpp); they never enter an OpenMP parallel region or a BLAS call,
// so they do not grow or share the pool the model's ops use. They do compete for cores: with
// T OpenMP threads and W workers on C cores, W + T ≤ C keeps both at full speed; when decoding
// is cheaper than the step (the aim), W can be small (stats() shows whether the consumer waits).
//
// Errors: an exception in a worker (e.g. a corrupt JPEG) is kept with its batch and re-thrown
// by next() on the consumer's thread when that batch is due, as an lsf::Error naming the batch
// and the worker's message (which names the file). Shutdown: stop() — and the destructor —
// tell the workers to stop, wake them, and join them; a worker finishes the batch it is
// computing (bounded by one batch's work) and exits without starting another, so destroying a
// loader mid-epoch never hangs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lsformer/data/image_pipeline.h"

namespace lsf::data {

struct ImageLoaderOptions {
  int64_t batch_size = 128;
  bool shuffle = true;
  bool drop_last = true;  // training: true; evaluation: false (the last batch may be smaller)
  uint64_t seed = 0;
  int num_workers = 2;    // 0: next() computes on the caller's thread
  int64_t prefetch = 4;   // batches allowed to exist ahead of the consumer (≥ 1)
  // Data-parallel training: batch k is only rows [shard·B/shards, (shard+1)·B/shards) of the
  // global batch k of B = batch_size rows (the same images a single process puts there, with the
  // same augmentation; Mixup/CutMix pairs them within the shard, with the global batch's λ), so a
  // rank decodes only its own images. batch_size must divide by shards (evenly by 2 per shard
  // when mixing). 1: the whole batch.
  int shard = 0;
  int shards = 1;
};

struct LoaderStats {
  int64_t batches = 0;           // batches handed out by next()
  double wait_seconds = 0;       // total time next() waited for a batch not yet ready
  double compute_seconds = 0;    // total time spent building batches (all workers together)
};

class ImageLoader {
 public:
  // Checks the options (batch size ≥ 1, prefetch ≥ 1, num_workers ≥ 0, a non-empty dataset,
  // an even batch size when the pipeline mixes, at least one full batch with drop_last).
  ImageLoader(std::shared_ptr<const ImageDataset> dataset, ImagePipeline pipeline, ImageLoaderOptions options);
  ~ImageLoader();
  ImageLoader(const ImageLoader&) = delete;
  ImageLoader& operator=(const ImageLoader&) = delete;

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  // Dataset indices of batch k, in batch order.
  std::vector<int64_t> batch_indices(int64_t k) const;
  // Batch k, computed on the calling thread (what next() returns for k, bit for bit).
  ImageBatch batch(int64_t k) const;

  // Streams batches first, first + 1, … up to end (exclusive; −1 = endless). Restarts a running
  // stream (its prepared batches are dropped).
  void start(int64_t first = 0, int64_t end = -1);
  // The next batch of the stream; waits for it; re-throws its worker's error.
  ImageBatch next();
  // Stops and joins the workers (idempotent).
  void stop();

  LoaderStats stats() const;
  const ImageDataset& dataset() const { return *dataset_; }
  const ImagePipeline& pipeline() const { return pipeline_; }
  const ImageLoaderOptions& options() const { return options_; }

 private:
  struct Slot {
    ImageBatch batch;
    std::exception_ptr error;
  };
  void worker_loop();
  Slot compute(int64_t k) const;  // never throws: errors go into the slot

  std::shared_ptr<const ImageDataset> dataset_;
  ImagePipeline pipeline_;
  ImageLoaderOptions options_;
  int64_t batches_per_epoch_ = 0;

  // The last epoch's order, cached (consecutive batches share it).
  mutable std::mutex order_mutex_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_order_;

  // Stream state, guarded by mutex_.
  mutable std::mutex mutex_;
  std::condition_variable work_cv_;   // workers wait for room or stop
  std::condition_variable ready_cv_;  // the consumer waits for its batch
  std::vector<std::thread> workers_;
  bool running_ = false;
  bool stop_ = false;
  int64_t next_claim_ = 0;     // lowest batch index no worker has claimed
  int64_t next_deliver_ = 0;   // the batch next() returns next
  int64_t end_ = -1;           // exclusive end of the stream, −1 = endless
  std::map<int64_t, Slot> ready_;
  LoaderStats stats_;
};

// Times the loader alone: starts a stream at `first`, takes `batches` batches doing nothing
// else, and returns the stats (compute and wait totals) and the wall time in *seconds.
LoaderStats time_loader(ImageLoader& loader, int64_t batches, double* seconds, int64_t first = 0);

}  // namespace lsf::data
