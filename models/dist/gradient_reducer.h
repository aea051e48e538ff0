// Averages a model's gradients across the ranks of a process group (engine/distributed.h) in
// buckets, overlapping the communication with the backward pass — the scheme of PyTorch's
// DistributedDataParallel:
//
//   GradientReducer reducer(group, model.named_parameters(), {.bucket_bytes = 25 << 20});
//   reducer.prepare();      // before backward
//   loss.backward();        // each bucket's all-reduce starts once its gradients are final
//   reducer.finish();       // waits; every parameter's grad is now the mean over the ranks
//   optimizer.step();       // identical on every rank
//
// Buckets: parameters are taken in reverse registration order (backward produces the last
// layers' gradients first) and packed into buckets of about `bucket_bytes` (a bucket closes once
// it holds at least that many bytes; a parameter larger than that is a bucket of its own; dtype or
// device changes start a new bucket). Each bucket owns one flat buffer [numel] of its parameters'
// dtype on their device.
//
// Launch: a gradient-ready hook (engine/autograd.h) copies each parameter's final gradient into
// its bucket's buffer; when a bucket is full, it and every full bucket after it in bucket order
// are launched (ReduceOp::Average, MPI_Iallreduce / ncclAllReduce). Buckets launch strictly in
// bucket order on every rank — collectives must match across ranks — so a bucket that fills early
// waits for its predecessors. The hooks also test the in-flight requests, which is what makes
// Open MPI progress them during backward.
//
// finish(): parameters that received no gradient in this pass (unused in this step's graph) enter
// their bucket as their current grad, or zeros when they have none; the remaining buckets are
// launched, all are waited for (collective_timeout(), a dead peer is an error), and the averages
// are copied back into each parameter's grad (a parameter that had none then gets one: the mean
// of the other ranks' gradients, zeros when no rank had one — unlike a single process, which
// leaves it undefined; the optimizers here treat zeros as a real gradient, so an unused parameter
// decays under weight decay where a single process would skip it).
//
// Numerics: the mean of N per-rank gradients, each the mean over the rank's b = B/N rows, equals
// the gradient of the mean over the global batch B up to float rounding (a different summation
// order); N a power of two divides exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lsformer/engine/distributed.h"
#include "lsformer/engine/safetensors.h"
#include "lsformer/engine/tensor.h"

namespace lsf::dist {

struct ReducerOptions {
  int64_t bucket_bytes = int64_t(25) << 20;  // ≥ 1: about this many bytes per all-reduce
  double timeout_s = 0;                      // > 0: the wait for peers; 0: collective_timeout()
};

class GradientReducer {
 public:
  // `params`: the model's trainable parameters in registration order (leaves requiring grad).
  GradientReducer(std::shared_ptr<ProcessGroup> group, const NamedTensors& params, const ReducerOptions& options = {});
  ~GradientReducer();  // removes its hooks
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Arms the hooks for one backward pass. Throws when the previous pass was not finished.
  void prepare();
  // Completes the pass: see the header comment. Throws (naming the bucket) when a peer times out.
  void finish();

  struct Bucket {
    std::vector<size_t> params;  // indices into the constructor's list, in bucket order
    std::vector<int64_t> offsets;  // each parameter's first element in `flat`
    Tensor flat;                 // [numel] the bucket's gradients, reduced in place
    int64_t bytes = 0;
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Buckets launched from inside the last backward pass (before finish()), in launch order: the
  // communication that overlapped the backward.
  const std::vector<size_t>& launched_during_backward() const { return launched_in_backward_; }
  // Seconds finish() spent waiting for the all-reduces in the last pass (the exposed communication).
  double last_wait_seconds() const { return last_wait_seconds_; }

 private:
  void on_ready(size_t param);
  void launch_full_buckets();
  void launch(size_t bucket);

  std::shared_ptr<ProcessGroup> group_;
  ReducerOptions options_;
  NamedTensors params_;
  std::vector<int> hook_ids_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_, slot_of_;  // per parameter: its bucket, its index in that bucket
  // Per pass:
  bool armed_ = false, in_backward_ = false;
  std::vector<bool> ready_;            // per parameter
  std::vector<int64_t> pending_;       // per bucket: parameters not yet ready
  size_t next_launch_ = 0;             // buckets [0, next_launch_) are launched
  std::vector<std::unique_ptr<Work>> work_;  // per bucket
  std::vector<size_t> launched_in_backward_;
  double last_wait_seconds_ = 0;
};

}  // namespace lsf::dist
