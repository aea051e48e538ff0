// What the trainer (trainer.cpp) does differently when it runs as one rank of a data-parallel
// job (`mpirun -np N lsf train ...`; docs/architecture.md, "Data-parallel training"). With a
// single-process group every call is a no-op or the identity, so one code path serves both.
//
// The scheme, rank r of N:
//   * batches: train.batch_size B stays the global batch; the task computes rows
//     [r·B/N, (r+1)·B/N) of every global batch (Task::set_data_shard). B must divide by N.
//   * start: every rank builds the model from the same seed; rank 0's parameters and buffers are
//     then broadcast, so the ranks start identical whatever happened before.
//   * step: the task's forward and loss on the shard; backward, with the gradient reducer
//     (models/dist/gradient_reducer.h) averaging gradients across ranks in buckets while backward
//     runs; then clipping and the optimizer step, identical on every rank. One small all-reduce
//     per step sums what is logged (the loss, the units, the task's tally) and the stop flag of
//     SIGINT / SIGTERM, so that every rank stops after the same step.
//   * dropout: rank 0 keeps the generator of a single process (its state is what checkpoints
//     save); rank r > 0 draws from its own stream, seed mix(seed, r) at the same offset, derived
//     again after every start or resume (seed_rank_generator), so the ranks' masks differ and a
//     resumed run redraws what an uninterrupted one draws.
//   * files: rank 0 alone writes the run directory (config.json, metrics.jsonl, checkpoints,
//     TensorBoard, curves.svg, summary.json) and prints; the others print one line at start and
//     their errors. Every rank reads last.safetensors to resume (the run directory must be on a
//     filesystem all ranks see), so a run can resume under any N that divides the batch
//     (task state, the char-LM's memory [B, C, d], is joined over the ranks for a checkpoint and
//     cut again on resume).
//   * evaluation: on rank 0 alone, its EvalResult broadcast to the others (the whole split, as
//     one process computes it: numbers identical to a single-process run's and to `lsf eval`).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lsformer/engine/distributed.h"
#include "lsformer/engine/safetensors.h"
#include "lsformer/models/dist/gradient_reducer.h"
#include "lsformer/models/nn/module.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/task.h"

namespace lsf::train {

class DataParallel {
 public:
  // Checks that train.batch_size splits over the group's ranks (the error says why it must).
  // world: null means a single process.
  DataParallel(std::shared_ptr<dist::ProcessGroup> world, const RunConfig& config, int64_t bucket_bytes);

  bool active() const { return world_->size() > 1; }
  bool is_root() const { return world_->rank() == 0; }
  int rank() const { return world_->rank(); }
  int size() const { return world_->size(); }
  DataShard shard() const { return {world_->rank(), world_->size()}; }
  const char* backend() const { return world_->backend(); }

  // When active and neither train.threads nor OMP_NUM_THREADS sets the CPU threads:
  // dist::default_threads_per_rank (the cores / the ranks on this machine).
  void apply_default_threads(const RunConfig& config) const;
  // Rank 0's string on every rank (the run directory it resolved, ...).
  std::string broadcast_string(std::string s) const;
  // Rank 0's parameters and buffers on every rank.
  void broadcast_module(nn::Module& model) const;
  // Rank r > 0: the default generator continues at its offset under seed mix(seed, r).
  void seed_rank_generator() const;

  // Starts averaging `model`'s gradients (its parameters must be on their training device).
  void attach(const nn::Module& model);
  void before_backward();
  // Waits for the gradient all-reduces; every rank's grads are then the mean over the ranks.
  void after_backward();
  // Seconds the last after_backward() waited for communication (0 for one process).
  double last_wait_seconds() const { return reducer_ ? reducer_->last_wait_seconds() : 0.0; }

  // The step's numbers over all ranks: loss → the mean of the ranks' losses (the global batch's
  // mean loss), units and tally → sums, stop → whether any rank was asked to stop.
  void reduce_step(float& loss, TrainStep& step, bool& stop) const;
  // Rank 0's evaluation result on every rank.
  EvalResult share(const EvalResult& result) const;
  // The task state of the whole batch from every rank's rows (rank order on dim 0); every rank
  // calls it, every rank gets the result.
  NamedTensors join_state(const NamedTensors& local) const;
  // This rank's rows of a task state of the whole batch.
  NamedTensors cut_state(const NamedTensors& whole) const;

 private:
  std::shared_ptr<dist::ProcessGroup> world_;
  int64_t bucket_bytes_;
  std::unique_ptr<dist::GradientReducer> reducer_;
};

}  // namespace lsf::train
