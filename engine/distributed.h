// Process groups for data-parallel training: the ranks of one job and the collectives the
// trainer needs between them (docs/architecture.md, "Data-parallel training").
//
//   std::shared_ptr<dist::ProcessGroup> world = dist::init_world();  // MPI under mpirun/srun, else one process
//   auto work = world->allreduce_async(grads, dist::ReduceOp::Average);   // [n] f32, in place
//   ...more backward...
//   work->wait(dist::collective_timeout());
//
// Backends:
//   * "single": one process; every collective is the identity (world size 1). Always built.
//   * "mpi":    host tensors over MPI (engine/mpi_process_group.cpp, built with LSF_MPI).
//               All-reduces are MPI_Iallreduce; the host polls them (MPI_Test) so that a dead
//               peer becomes an error after collective_timeout() instead of a hang.
//   * "nccl":   device tensors over NCCL (cuda/nccl_process_group.cu, built with CUDA), its
//               communicator bootstrapped through another group's broadcast (the MPI world).
// The backends register themselves at load time (like the CUDA backend of engine/cuda_api.h),
// so the engine names neither MPI nor NCCL and a build without them links unchanged.
//
// Contracts: every rank calls the same collectives in the same order (the gradient reducer,
// engine/grad_reducer.h, launches its buckets in a fixed order for that reason); tensors are
// contiguous and live on the group's device kind; an all-reduce's result is bit-identical on
// every rank (MPI and NCCL reduce in an order that does not depend on the rank that reads it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "lsformer/engine/tensor.h"

namespace lsf::dist {

enum class ReduceOp {
  Sum,
  Average,  // the sum divided by the world size (a power of two divides exactly)
};

// An in-flight collective.
class Work {
 public:
  virtual ~Work();
  // Drives the operation (MPI progresses non-blocking collectives only inside MPI calls) and
  // says whether it has completed.
  virtual bool test() = 0;
  // Waits until it completes; after timeout_s seconds (≤ 0: forever) throws lsf::Error saying
  // that a peer has stopped. `what` names the operation in that message.
  virtual void wait(double timeout_s, const std::string& what) = 0;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Ranks of this job on this machine (they share its cores).
  virtual int local_size() const = 0;
  virtual const char* backend() const = 0;  // "single", "mpi", "nccl"
  // Whether `device` tensors can be reduced by this group (CPU for mpi, CUDA for nccl).
  virtual bool supports(Device device) const = 0;

  // Starts an in-place all-reduce of `t` (contiguous; f32 or f64, also bf16 / f16 on nccl).
  virtual std::unique_ptr<Work> allreduce_async(const Tensor& t, ReduceOp op) = 0;
  // Overwrites `t` on every rank with rank `root`'s (contiguous, same shape and dtype everywhere).
  virtual void broadcast(const Tensor& t, int root) = 0;
  // Every rank gets rank `root`'s bytes (any length).
  virtual void broadcast_bytes(std::string& bytes, int root) = 0;
  // Ends the whole job at once (every rank, exit status `code`): after an error that only this
  // rank saw, so that no peer waits forever in a collective. Returns only for one process.
  virtual void abort(int code) = 0;

  // allreduce_async + wait(collective_timeout()).
  void allreduce(const Tensor& t, ReduceOp op, const std::string& what);
  bool is_root() const { return rank() == 0; }
};

// The single-process group: rank 0 of 1; collectives leave tensors as they are.
std::shared_ptr<ProcessGroup> single_process_group();

// ---- the launch environment ----

// What the environment says about this process's job, read from the variables launchers set:
// OMPI_COMM_WORLD_SIZE / _RANK (Open MPI's mpirun), PMI_SIZE / PMI_RANK (MPICH, Intel MPI,
// srun --mpi=pmi2), PMIX_RANK with PMIX_SIZE... and SLURM_NTASKS / SLURM_PROCID inside an srun
// step (SLURM_STEP_ID set). size 1 when none is set.
struct LaunchEnvironment {
  int size = 1;
  int rank = 0;
  std::string source;  // the variable the size came from ("" when single)
};
LaunchEnvironment detect_launch_environment();

// Whether this build has the MPI backend (LSF_MPI).
bool mpi_built();
// Whether this build has the NCCL backend (CUDA with NCCL).
bool nccl_built();

// The job's world: the MPI group when a launcher started more than one rank, the single-process
// group otherwise. The first call initialises MPI (finalised at exit); later calls return the
// same group. Throws naming the launcher's variable when several ranks were launched but this
// build has no MPI backend (each would otherwise train alone and overwrite the others' files).
std::shared_ptr<ProcessGroup> init_world();

// The group that reduces gradients of `device` tensors: `world` itself for CPU tensors; for CUDA
// tensors a NCCL communicator over the same ranks, its unique id broadcast through `world`.
// Throws when the build has no backend for the device. Cached per device.
std::shared_ptr<ProcessGroup> gradient_group(const std::shared_ptr<ProcessGroup>& world, Device device);

// Seconds a rank waits for its peers in a collective before it declares one dead:
// LSF_DIST_TIMEOUT when set (a positive number), else 300.
double collective_timeout();

// CPU threads for one rank when the user set none: the cores this process may run on (its
// affinity mask, which launchers that bind ranks restrict) and at most the machine's cores
// divided by the ranks on this machine. At least 1.
int default_threads_per_rank(const ProcessGroup& world);

namespace detail {
// Installed at load time by the backends' files (engine/mpi_process_group.cpp,
// cuda/nccl_process_group.cu).
using MpiWorldFactory = std::shared_ptr<ProcessGroup> (*)();
using NcclFactory = std::shared_ptr<ProcessGroup> (*)(ProcessGroup& bootstrap, Device device);
void set_mpi_world_factory(MpiWorldFactory factory);
void set_nccl_factory(NcclFactory factory);
// Polls `done` until it returns true, sleeping a little longer each time (from a few µs to a
// millisecond) so that a waiting rank leaves its core to the others; throws after timeout_s
// (≤ 0: never) with `message`. Shared by the backends' Work::wait.
void poll_until(const std::function<bool()>& done, double timeout_s, const std::function<std::string()>& message);
}  // namespace detail

}  // namespace lsf::dist
