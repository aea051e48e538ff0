// Training checkpoints: a run resumed from a checkpoint continues bit-identically to an
// uninterrupted one (model, AdamW moments, step, RNG); mismatches are refused without changing
// anything; a file that is not a training checkpoint is reported as such.
#include <filesystem>

#include "helpers.h"
#include "lsformer/models/optim/adam.h"
#include "lsformer/models/train/checkpoint.h"

using namespace lsf;

namespace {

// A two-layer perceptron with dropout written from primitives, so that the default generator
// is used by the forward pass and its state matters for resuming.
class TinyNet : public nn::Module {
 public:
  TinyNet() : Module("TinyNet") {
    Generator g(5);
    w1 = register_parameter("w1", randn({4, 8}, kF32, &g));
    b1 = register_parameter("b1", zeros({8}));
    w2 = register_parameter("w2", randn({8, 3}, kF32, &g));
    register_buffer("calls", zeros({1}, kI64));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = dropout(relu(matmul(x, w1) + b1), 0.25, is_training());
    return matmul(h, w2);
  }
  Tensor w1, b1, w2;
};

struct Run {
  TinyNet net;
  optim::AdamW opt{net.named_parameters(), optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.1}};
  void steps(int64_t from, int64_t to) {
    for (int64_t s = from; s < to; ++s) {
      Generator data(100 + uint64_t(s));  // the batch depends on the step only
      Tensor x = randn({16, 4}, kF32, &data);
      Tensor y = (rand({16}, kF32, &data) * 2.99).to(kI64);
      Tensor loss = cross_entropy(net.forward(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  }
};

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace

TEST_CASE("a run resumed from a checkpoint continues bit-identically", "[checkpoint]") {
  const std::string path = temp_path("resume.safetensors");
  manual_seed(77);
  Run straight;
  straight.steps(0, 20);

  manual_seed(77);
  Run first;
  first.steps(0, 12);
  save_checkpoint(path, first.net, &first.opt, {.step = 12, .config = R"({"lr": 0.01})", .extra = {{"note", "mid"}}});
  manual_seed(999);  // the restore must undo this
  {
    Run resumed;
    CheckpointInfo info = load_checkpoint(path, resumed.net, &resumed.opt);
    CHECK(info.step == 12);
    CHECK(info.config == R"({"lr": 0.01})");
    CHECK(info.extra.at("note") == "mid");
    resumed.steps(12, 20);
    for (auto& [name, p] : straight.net.named_parameters()) {
      INFO(name);
      Tensor q;
      for (auto& [n2, p2] : resumed.net.named_parameters())
        if (n2 == name) q = p2;
      CHECK(p.to_vector<float>() == q.to_vector<float>());  // bit-identical
    }
    CHECK(resumed.opt.step_count() == straight.opt.step_count());
  }
  std::filesystem::remove(path);
}

TEST_CASE("checkpoints hold PyTorch weight names and refuse mismatches without side effects", "[checkpoint]") {
  const std::string path = temp_path("names.safetensors");
  Run run;
  run.steps(0, 2);
  save_checkpoint(path, run.net, &run.opt, {.step = 2});
  auto file = load_safetensors(path);
  CHECK(file.tensors.count("w1"));
  CHECK(file.tensors.count("calls"));
  CHECK(file.tensors.count("optimizer.w1.exp_avg"));
  CHECK(file.metadata.at("format") == "pt");

  // A model with a different shape: nothing is loaded, the optimizer is untouched.
  class Other : public nn::Module {
   public:
    Other() : Module("Other") {
      register_parameter("w1", zeros({4, 9}));
      register_parameter("b1", zeros({8}));
      register_parameter("w2", zeros({8, 3}));
      register_buffer("calls", zeros({1}, kI64));
    }
  } other;
  CHECK_THROWS_WITH(load_checkpoint(path, other, nullptr), Catch::Contains("does not match") && Catch::Contains("w1"));

  Run fresh;
  std::vector<float> before = fresh.net.w1.to_vector<float>();
  save_safetensors(path + ".weights", run.net.state_dict());  // weights only, no training state
  CHECK_THROWS_WITH(load_checkpoint(path + ".weights", fresh.net, &fresh.opt), Catch::Contains("lsformer.step"));
  CHECK(fresh.net.w1.to_vector<float>() == before);

  save_checkpoint(path, run.net, nullptr, {.step = 2});  // saved without an optimizer
  CHECK_THROWS_WITH(load_checkpoint(path, fresh.net, &fresh.opt), Catch::Contains("no optimizer state"));
  CHECK(fresh.net.w1.to_vector<float>() == before);
  CHECK_NOTHROW(load_checkpoint(path, fresh.net, nullptr));
  CHECK(fresh.net.w1.to_vector<float>() == run.net.w1.to_vector<float>());
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".weights");
}
