// A small model trains the same on the CPU and on the GPU: Linear → LayerNorm → GELU → Linear,
// cross-entropy, AdamW, 20 steps from identical weights and data; the two loss curves must
// agree within a tolerance derived below. It exercises every kernel family of issue #6 at
// once (GEMM, elementwise, reductions, layer norm, fused cross-entropy, the AdamW update),
// so it passes only once all of them have CUDA implementations; without a GPU it skips.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "run_helpers.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/trainer.h"

using namespace lsf;

namespace {

constexpr int64_t kBatch = 64, kIn = 16, kHidden = 32, kClasses = 5;
constexpr int kSteps = 20;

std::shared_ptr<nn::Sequential> make_model() {
  manual_seed(2024);  // both devices start from the same CPU-initialised weights
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(kIn, kHidden));
  model->push_back(std::make_shared<nn::LayerNorm>(kHidden));
  model->push_back(std::make_shared<nn::GELU>());
  model->push_back(std::make_shared<nn::Linear>(kHidden, kClasses));
  return model;
}

std::vector<double> loss_curve(Device device) {
  auto model = make_model();
  model->to(device);
  Generator gen(7);
  const Tensor x = randn({kBatch, kIn}, TensorOptions(kF32), &gen).to(device);
  const Tensor y = (rand({kBatch}, TensorOptions(kF64), &gen) * double(kClasses)).to(kI64).to(device);
  optim::AdamW opt(model->named_parameters(), optim::AdamWOptions{.lr = 1e-2, .eps = 1e-6, .weight_decay = 1e-2});
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    const Tensor loss = cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

}  // namespace

TEST_CASE("cuda: a small model trains the same on CPU and GPU", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  const std::vector<double> cpu = loss_curve(kCPU);
  const std::vector<double> gpu = loss_curve(kCUDA);
  REQUIRE(cpu.size() == gpu.size());
  CHECK(cpu.back() < cpu.front());  // it does train
  // Tolerance. Both run in f32 (u = 2^-24); the devices differ only in summation order, whose
  // error per reduction of length n is ≤ n·u relative, the longest here being the batch
  // (n = 64: bias gradients, the mean loss). AdamW's step is bounded by lr per element whatever
  // the gradient, and eps = 1e-6 keeps a near-zero gradient's rounding from flipping a full step,
  // so the difference grows at most linearly over the steps: rtol = steps · n · u · 8 (safety
  // for the LayerNorm and softmax chains) = 20 · 64 · 2^-24 · 8 ≈ 6.1e-4.
  const double rtol = double(kSteps) * double(kBatch) * std::ldexp(1.0, -24) * 8.0;
  for (int s = 0; s < kSteps; ++s) {
    INFO("step " << s << ": cpu " << cpu[size_t(s)] << ", gpu " << gpu[size_t(s)]);
    CHECK(std::fabs(gpu[size_t(s)] - cpu[size_t(s)]) <= rtol * std::fabs(cpu[size_t(s)]));
  }
}

// `lsf train` on train.device = "cuda": the whole loop (the task's batches moved to the model's
// device, the optimizer's state beside the parameters, checkpoints written from the GPU) against
// the same run on the CPU, and the GPU run's checkpoint evaluated on the CPU.
TEST_CASE("cuda: lsf train on train.device = cuda tracks the CPU run, and its checkpoint evaluates on the CPU", "[cuda][trainer]") {
  LSF_REQUIRE_CUDA_DEVICE();
  namespace fs = std::filesystem;
  // test_train's tiny ListOps run, without dropout (the devices need not draw the same masks),
  // 10 steps with one loss per logged step, evaluated at the end only.
  const std::vector<std::string> tiny = {"model.dropout=0.0", "train.steps=10", "train.eval_every=0",
                                         "train.log_every=1", "train.checkpoint_every=0"};
  std::vector<std::string> on_gpu = tiny;
  on_gpu.push_back("train.device=cuda");
  auto losses = [](const fs::path& dir) {
    std::vector<double> out;
    std::ifstream in(dir / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json m = nlohmann::json::parse(line);
      if (m.at("split") == "train") out.push_back(m.at("loss").get<double>());
    }
    return out;
  };
  const fs::path cpu_dir = testing::fresh_dir("cuda_train", "cpu"), gpu_dir = testing::fresh_dir("cuda_train", "gpu");
  std::ostringstream log;
  const train::TrainSummary cpu = testing::run_training(train::parse_config(testing::kTinyListOps, tiny), cpu_dir, log);
  const train::TrainSummary gpu = testing::run_training(train::parse_config(testing::kTinyListOps, on_gpu), gpu_dir, log);
  INFO(log.str());
  CHECK_THAT(log.str(), Catch::Contains(", on cuda:0"));
  const std::vector<double> a = losses(cpu_dir), b = losses(gpu_dir);
  REQUIRE(a.size() == 10);
  REQUIRE(b.size() == a.size());
  CHECK(a.back() < a.front());
  // Tolerance: as the case above, rtol = steps · n · u · 8 with the longest reduction n = the
  // batch's tokens (≤ 32 · 20 = 640: the bias and LayerNorm parameter gradients).
  const double rtol = 10.0 * 640.0 * std::ldexp(1.0, -24) * 8.0;
  for (size_t s = 0; s < a.size(); ++s) {
    INFO("step " << s + 1 << ": cpu " << a[s] << ", gpu " << b[s]);
    CHECK(std::fabs(b[s] - a[s]) <= rtol * std::fabs(a[s]));
  }
  // The GPU's checkpoint on the CPU: one forward per batch, rtol = n · u · 8.
  const train::EvalResult again = train::evaluate_checkpoint(gpu.best_checkpoint, "dev", 0, {"train.device=cpu"});
  CHECK(std::fabs(again.loss - gpu.dev.loss) <= 640.0 * std::ldexp(1.0, -24) * 8.0 * std::fabs(gpu.dev.loss));
  CHECK(cpu.dev.metric("examples") == gpu.dev.metric("examples"));
  fs::remove_all(cpu_dir);
  fs::remove_all(gpu_dir);
}
