// Data-parallel training in one process: the gradient-ready hooks of the autograd engine, the
// gradient reducer's buckets and launch order (against a recording process group that plays a
// second rank), the launch-environment detection, the batch-split check and the task shards.
// The multi-process tests (equivalence with one process, resume across rank counts, timeouts, a
// killed rank) run under mpirun: tests/mpi/.
#include <cstdlib>

#include "helpers.h"
#include "lsformer/engine/distributed.h"
#include "lsformer/engine/grad_hooks.h"
#include "lsformer/models/dist/gradient_reducer.h"
#include "lsformer/models/nn/linear.h"
#include "lsformer/models/train/data_parallel.h"

using namespace lsf;

TEST_CASE("a gradient-ready hook runs once per backward with the leaf's summed gradient", "[distributed][autograd]") {
  Tensor x = tensor(std::vector<double>{1, 2}).requires_grad_(true);
  Tensor unused = tensor(std::vector<double>{5}).requires_grad_(true);
  std::vector<std::vector<double>> seen;
  const int id = autograd::add_grad_ready_hook(x, [&](const Tensor& leaf) { seen.push_back(leaf.grad().to_vector<double>()); });
  autograd::add_grad_ready_hook(unused, [&](const Tensor&) { FAIL("a leaf without a gradient got a hook call"); });
  // x is used on two paths: the hook sees the sum of both (2x + 3), not one contribution.
  sum(add(mul(x, x), mul(x, 3.0))).backward();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == std::vector<double>{5, 7});
  sum(mul(x, 2.0)).backward();  // a second pass: accumulated, one more call
  REQUIRE(seen.size() == 2);
  CHECK(seen[1] == std::vector<double>{7, 9});
  CHECK(autograd::grad_ready_hook_count(x) == 1);
  autograd::remove_grad_ready_hook(x, id);
  CHECK(autograd::grad_ready_hook_count(x) == 0);
  sum(x).backward();
  CHECK(seen.size() == 2);
  CHECK_THROWS_WITH(autograd::remove_grad_ready_hook(x, id), Catch::Contains("has no hook"));
  Tensor y = mul(x, 2.0);
  CHECK_THROWS_WITH(autograd::add_grad_ready_hook(y, [](const Tensor&) {}), Catch::Contains("must be a leaf"));
}

namespace {

// A process group of "2 ranks" in one process: the other rank's gradient is taken to be 3× this
// one's, so an Average leaves 2× the local gradient. Records every launch with the number of
// parameters whose gradient was ready at that moment (counted by the test's own hooks).
class RecordingGroup final : public dist::ProcessGroup {
 public:
  explicit RecordingGroup(const int* ready) : ready_(ready) {}
  struct Launch {
    int64_t numel;
    int ready_then;
  };
  std::vector<Launch> launches;
  int waits = 0;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  int local_size() const override { return 2; }
  const char* backend() const override { return "recording"; }
  bool supports(Device d) const override { return d.is_cpu(); }
  std::unique_ptr<dist::Work> allreduce_async(const Tensor& t, dist::ReduceOp op) override {
    REQUIRE(op == dist::ReduceOp::Average);
    launches.push_back({t.numel(), *ready_});
    class W final : public dist::Work {
     public:
      W(Tensor t, int* waits) : t_(std::move(t)), waits_(waits) {}
      bool test() override { return false; }
      void wait(double, const std::string&) override {
        ++*waits_;
        double* p = t_.data_ptr<double>();
        for (int64_t i = 0; i < t_.numel(); ++i) p[i] = (p[i] + 3 * p[i]) / 2;
      }
      Tensor t_;
      int* waits_;
    };
    return std::make_unique<W>(t, &waits);
  }
  void broadcast(const Tensor&, int) override {}
  void broadcast_bytes(std::string&, int) override {}
  void abort(int) override {}

 private:
  const int* ready_;
};

}  // namespace

TEST_CASE("the reducer fills buckets in reverse order and launches them during backward", "[distributed]") {
  manual_seed(3);
  nn::Linear l1(4, 8), l2(8, 8), l3(8, 2);
  NamedTensors params;
  for (auto* l : {&l1, &l2, &l3})
    for (auto& [name, p] : l->named_parameters()) {
      p.set_data(p.to(kF64));
      params.emplace_back(name, p);
    }
  int ready = 0;
  for (auto& [name, p] : params) autograd::add_grad_ready_hook(p, [&](const Tensor&) { ++ready; });
  auto group = std::make_shared<RecordingGroup>(&ready);
  // 8×8 f64 weights are 512 bytes: buckets of ≥ 600 bytes hold l3's weight and bias with l2's bias
  // and weight (16 + 128 + 64 + 512 bytes, closing at 720), then l1 (8 + 256 + 64 bytes: the rest).
  dist::GradientReducer reducer(group, params, {.bucket_bytes = 600});
  REQUIRE(reducer.buckets().size() == 2);
  CHECK(reducer.buckets()[0].params == std::vector<size_t>{5, 4, 3, 2});
  CHECK(reducer.buckets()[1].params == std::vector<size_t>{1, 0});

  Tensor x = randn({3, 4}, TensorOptions(kF64));
  auto loss = [&] { return sum(l3.forward(relu(l2.forward(relu(l1.forward(x)))))); };
  // The reference: the local gradients of one process.
  loss().backward();
  std::vector<std::vector<double>> local;
  for (auto& [name, p] : params) local.push_back(p.grad().to_vector<double>()), p.set_grad(Tensor());
  ready = 0;

  reducer.prepare();
  loss().backward();
  // Bucket 0 (l3, l2) left while l1's gradients were still being computed.
  REQUIRE(group->launches.size() == 2);
  CHECK(reducer.launched_during_backward() == std::vector<size_t>{0, 1});
  CHECK(group->launches[0].ready_then < int(params.size()));
  CHECK(group->launches[0].numel == 2 * 8 + 2 + 8 * 8 + 8);
  reducer.finish();
  CHECK(group->waits == 2);
  for (size_t k = 0; k < params.size(); ++k) {
    std::vector<double> expected = local[k];
    for (double& v : expected) v *= 2;  // the mean of this rank's g and the other's 3g
    test::check_close(params[k].second.grad(), expected, 0, 0);  // exact: ×2 and ÷2 of doubles
  }
  CHECK_THROWS_WITH(reducer.finish(), Catch::Contains("without prepare()"));
}

TEST_CASE("a parameter without a gradient enters the reduction as zeros", "[distributed]") {
  nn::Linear used(2, 1), unused(2, 1);
  used.weight.set_data(used.weight.to(kF64));
  unused.weight.set_data(unused.weight.to(kF64));
  NamedTensors params = {{"used.weight", used.weight}, {"unused.weight", unused.weight}};
  int ready = 0;
  auto group = std::make_shared<RecordingGroup>(&ready);
  dist::GradientReducer reducer(group, params, {.bucket_bytes = 1});  // one bucket per parameter
  CHECK(reducer.buckets().size() == 2);
  reducer.prepare();
  sum(matmul(ones({1, 2}, TensorOptions(kF64)), used.weight.t())).backward();
  // Only the used parameter's bucket (the second: buckets run in reverse order) is ready, and
  // buckets launch in order, so nothing left during backward.
  CHECK(reducer.launched_during_backward().empty());
  reducer.finish();
  REQUIRE(unused.weight.grad().defined());
  test::check_close(unused.weight.grad(), std::vector<double>{0, 0}, 0, 0);
}

TEST_CASE("the launch environment is read from the launchers' variables", "[distributed]") {
  struct Env {
    std::string name;
    Env(std::string n, const char* v) : name(std::move(n)) { setenv(name.c_str(), v, 1); }
    ~Env() { unsetenv(name.c_str()); }
  };
  // This test may itself run under a launcher (tests/mpi): only when none is set is 1 expected.
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_SIZE") ||
      std::getenv("SLURM_STEP_ID"))
    return;
  CHECK(dist::detect_launch_environment().size == 1);
  {
    Env size("PMI_SIZE", "4"), rank("PMI_RANK", "3");
    const dist::LaunchEnvironment e = dist::detect_launch_environment();
    CHECK(e.size == 4);
    CHECK(e.rank == 3);
    CHECK(e.source == "PMI_SIZE");
  }
  {
    Env tasks("SLURM_NTASKS", "8"), id("SLURM_PROCID", "5");
    CHECK(dist::detect_launch_environment().size == 1);  // an allocation, not a job step
    Env step("SLURM_STEP_ID", "0");
    CHECK(dist::detect_launch_environment().size == 8);
    CHECK(dist::detect_launch_environment().rank == 5);
  }
  CHECK(dist::init_world()->size() == 1);
  CHECK(std::string(dist::init_world()->backend()) == "single");
  setenv("LSF_DIST_TIMEOUT", "0.5", 1);
  CHECK(dist::collective_timeout() == 0.5);
  setenv("LSF_DIST_TIMEOUT", "soon", 1);
  CHECK_THROWS_WITH(dist::collective_timeout(), Catch::Contains("LSF_DIST_TIMEOUT must be a positive number"));
  unsetenv("LSF_DIST_TIMEOUT");
  CHECK(dist::collective_timeout() == 300);
}

TEST_CASE("gradients of CUDA parameters go to NCCL, host ones stay on the world group", "[distributed]") {
  int ready = 0;
  auto world = std::make_shared<RecordingGroup>(&ready);
  CHECK(dist::gradient_group(world, Device(DeviceType::CPU, 0)).get() == world.get());
  // Without a GPU (or NCCL) the CUDA request is a clear error, before any communication.
  if (cuda_is_available()) return;
  CHECK_THROWS_WITH(dist::gradient_group(world, Device(DeviceType::CUDA, 0)),
                    Catch::Contains("NCCL") || Catch::Contains("sees no CUDA device"));
}

TEST_CASE("a global batch the ranks cannot split is refused, saying why", "[distributed][train]") {
  int ready = 0;
  auto world = std::make_shared<RecordingGroup>(&ready);  // 2 ranks
  train::RunConfig config = train::parse_config(R"({"data": {"task": "listops", "generate": {"enabled": true}}, "train": {"batch_size": 5}})", {}, "test");
  CHECK_THROWS_WITH(train::DataParallel(world, config, 1 << 20),
                    Catch::Contains("'train.batch_size' (5) cannot be split over 2 ranks") && Catch::Contains("e.g. 6"));
  config.train.batch_size = 6;
  train::DataParallel dp(world, config, 1 << 20);
  CHECK(dp.active());
  CHECK(dp.shard().rows(6) == 3);
  CHECK(train::DataShard{1, 2}.first(6) == 3);
}

TEST_CASE("a task family without sharding refuses several ranks", "[distributed][train]") {
  class Plain final : public train::Task {
   public:
    void load_data(const std::vector<std::string>&) override {}
    std::string describe_data() const override { return ""; }
    std::shared_ptr<nn::Module> build_model() override { return nullptr; }
    train::TrainStep train_step(nn::Module&, int64_t) override { return {}; }
    std::vector<train::Metric> window_metrics(const train::Tally&, int64_t) const override { return {}; }
    const char* throughput_unit() const override { return "samples"; }
    train::EvalResult evaluate(nn::Module&, const std::string&, int64_t) override { return {}; }
    train::Selection selection() const override { return {}; }
    std::string describe(const train::EvalResult&) const override { return ""; }
  } plain;
  plain.set_data_shard({0, 1});
  CHECK_THROWS_WITH(plain.set_data_shard({1, 2}), Catch::Contains("does not support data-parallel training"));
}
