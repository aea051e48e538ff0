// The backend-neutral half of engine/distributed.h: the single-process group, the launch
// environment, the registry the MPI and NCCL backends install themselves into, and polling.
#include "lsformer/engine/distributed.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "lsformer/engine/error.h"

namespace lsf::dist {

Work::~Work() = default;
ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::allreduce(const Tensor& t, ReduceOp op, const std::string& what) {
  allreduce_async(t, op)->wait(collective_timeout(), what);
}

namespace {

class DoneWork final : public Work {
 public:
  bool test() override { return true; }
  void wait(double, const std::string&) override {}
};

class SingleProcessGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_size() const override { return 1; }
  const char* backend() const override { return "single"; }
  bool supports(Device) const override { return true; }
  // The sum and the mean over one rank are the tensor itself.
  std::unique_ptr<Work> allreduce_async(const Tensor& t, ReduceOp) override {
    LSF_CHECK(t.defined() && t.is_contiguous()) << "dist::allreduce: the tensor must be defined and contiguous";
    return std::make_unique<DoneWork>();
  }
  void broadcast(const Tensor& t, int root) override {
    LSF_CHECK(root == 0) << "dist::broadcast: root " << root << " is not a rank of a single-process group";
    LSF_CHECK(t.defined()) << "dist::broadcast: undefined tensor";
  }
  void broadcast_bytes(std::string&, int root) override {
    LSF_CHECK(root == 0) << "dist::broadcast_bytes: root " << root << " is not a rank of a single-process group";
  }
  void abort(int) override {}  // one process: the caller's error ends it
};

detail::MpiWorldFactory g_mpi_factory = nullptr;
detail::NcclFactory g_nccl_factory = nullptr;

// A non-negative integer from the environment variable `name`; −1 when unset or not one.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return (*end == '\0' && x >= 0 && x < (1 << 30)) ? int(x) : -1;
}

}  // namespace

std::shared_ptr<ProcessGroup> single_process_group() {
  static const std::shared_ptr<ProcessGroup> group = std::make_shared<SingleProcessGroup>();
  return group;
}

LaunchEnvironment detect_launch_environment() {
  // (size variable, rank variable), in the order a launcher that sets several is best read.
  const std::pair<const char*, const char*> pairs[] = {
      {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
      {"PMIX_SIZE", "PMIX_RANK"},
      {"PMI_SIZE", "PMI_RANK"},
      {"MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK"},
  };
  for (const auto& [size_var, rank_var] : pairs) {
    const int size = env_int(size_var);
    if (size < 1) continue;
    return {size, std::max(0, env_int(rank_var)), size_var};
  }
  // srun without an MPI plugin: only inside a job step are SLURM_NTASKS tasks this job's ranks.
  if (std::getenv("SLURM_STEP_ID") && env_int("SLURM_NTASKS") >= 1 && env_int("SLURM_PROCID") >= 0)
    return {env_int("SLURM_NTASKS"), env_int("SLURM_PROCID"), "SLURM_NTASKS"};
  return {};
}

bool mpi_built() { return g_mpi_factory != nullptr; }
bool nccl_built() { return g_nccl_factory != nullptr; }

std::shared_ptr<ProcessGroup> init_world() {
  static std::mutex mutex;
  static std::shared_ptr<ProcessGroup> world;
  std::lock_guard<std::mutex> lock(mutex);
  if (world) return world;
  const LaunchEnvironment env = detect_launch_environment();
  if (env.size <= 1) {
    world = single_process_group();
    return world;
  }
  LSF_CHECK(g_mpi_factory != nullptr)
      << "the launcher started " << env.size << " ranks (" << env.source << "=" << env.size
      << "), but this build has no MPI backend (configured with LSF_MPI=OFF, or MPI was not found: apt-get install "
         "libopenmpi-dev and reconfigure); each rank would train alone and overwrite the others' run directory";
  world = g_mpi_factory();
  LSF_CHECK(world->size() == env.size) << "MPI reports a world of " << world->size() << " ranks but " << env.source << " is "
                                       << env.size << ": the launcher and the MPI library disagree (mixed MPI installs?)";
  return world;
}

std::shared_ptr<ProcessGroup> gradient_group(const std::shared_ptr<ProcessGroup>& world, Device device) {
  LSF_CHECK(world != nullptr) << "dist::gradient_group: no world group";
  if (world->supports(device)) return world;
  LSF_CHECK(device.is_cuda()) << "dist::gradient_group: the " << world->backend() << " group cannot reduce " << device
                              << " tensors";
  LSF_CHECK(g_nccl_factory != nullptr)
      << "data-parallel training on " << device << " needs the NCCL backend, which this build lacks (build with "
      << "CUDA: -DLSF_CUDA=ON, and the toolkit's nccl.h / libnccl)";
  static std::mutex mutex;
  static std::map<std::pair<const ProcessGroup*, int>, std::shared_ptr<ProcessGroup>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& group = cache[{world.get(), device.index}];
  if (!group) group = g_nccl_factory(*world, device);
  return group;
}

double collective_timeout() {
  const char* v = std::getenv("LSF_DIST_TIMEOUT");
  if (!v || !*v) return 300.0;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  LSF_CHECK(*end == '\0' && t > 0) << "LSF_DIST_TIMEOUT must be a positive number of seconds, got '" << v << "'";
  return t;
}

int default_threads_per_rank(const ProcessGroup& world) {
  const int machine = std::max(1, int(std::thread::hardware_concurrency()));
  int allowed = machine;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) allowed = std::max(1, CPU_COUNT(&set));
  return std::max(1, std::min(allowed, machine / std::max(1, world.local_size())));
}

namespace detail {

void set_mpi_world_factory(MpiWorldFactory factory) { g_mpi_factory = factory; }
void set_nccl_factory(NcclFactory factory) { g_nccl_factory = factory; }

void poll_until(const std::function<bool()>& done, double timeout_s, const std::function<std::string()>& message) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto pause = std::chrono::microseconds(2);
  while (!done()) {
    if (timeout_s > 0 && std::chrono::duration<double>(Clock::now() - start).count() > timeout_s)
      LSF_FAIL() << message();
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

}  // namespace detail
}  // namespace lsf::dist
