// Checkpoint interchange with PyTorch (tests/fixtures/gen_torch_interop.py builds the same toy
// model in PyTorch): a PyTorch-written safetensors file loads strictly into the lsformer
// model, names and all, and reproduces PyTorch's outputs. The other direction is checked by the
// script against the files this test writes when LSF_INTEROP_DIR is set.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "helpers.h"
#include "lsformer/models/nn/activation.h"
#include "lsformer/models/nn/conv2d.h"
#include "lsformer/models/nn/embedding.h"
#include "lsformer/models/nn/layer_norm.h"
#include "lsformer/models/nn/linear.h"
#include "lsformer/models/nn/module_list.h"
#include "lsformer/models/nn/sequential.h"

using namespace lsf;

namespace {

class Block : public nn::Module {
 public:
  explicit Block(int64_t dim) : Module("Block") {
    norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim));
    mlp = register_module("mlp", std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
                                     std::make_shared<nn::Linear>(dim, 4 * dim), std::make_shared<nn::GELU>(),
                                     std::make_shared<nn::Linear>(4 * dim, dim)}));
  }
  Tensor forward(const Tensor& x) { return x + mlp->forward(norm1->forward(x)); }
  std::shared_ptr<nn::LayerNorm> norm1;
  std::shared_ptr<nn::Sequential> mlp;
};

class Toy : public nn::Module {
 public:
  Toy() : Module("Toy") {
    embed = register_module("embed", std::make_shared<nn::Embedding>(16, 8));
    blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
    for (int i = 0; i < 2; ++i) blocks->push_back(std::make_shared<Block>(8));
    conv = register_module("conv", std::make_shared<nn::Conv2d>(3, 4, 3, Conv2dOptions{.padding = 1}));
    head = register_module("head", std::make_shared<nn::Linear>(8, 5));
  }
  std::pair<Tensor, Tensor> forward(const Tensor& ids, const Tensor& image) {
    Tensor x = embed->forward(ids);
    for (size_t i = 0; i < blocks->size(); ++i) x = blocks->at<Block>(i)->forward(x);
    return {head->forward(mean(x, {1})), conv->forward(image)};
  }
  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::ModuleList> blocks;
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::Linear> head;
};

// f32 forward of two engines with ≤ 70 multiply-adds per output and |values| ≲ 4: each
// result is within ~70·2⁻²⁴·4 ≈ 2e-5 of the exact one in the worst case; 1e-5 absolute plus
// 1e-5 relative is the observed-safe, derivation-backed bound.
constexpr double kTol = 1e-5;

}  // namespace

TEST_CASE("a PyTorch-written checkpoint loads strictly and reproduces PyTorch's outputs", "[interop]") {
  auto f = test::load_fixture("torch_model");
  Toy model;
  std::vector<std::string> names;
  for (auto& [name, t] : model.state_dict()) names.push_back(name);
  CHECK(names == f["names"].get<std::vector<std::string>>());  // same names, same order
  nn::LoadReport report = model.load(std::string(LSF_FIXTURE_DIR) + "/torch_model.safetensors");
  CHECK(report.ok());
  NoGradGuard no_grad;
  auto [logits, feature] = model.forward(test::fixture_tensor(f["ids"]), test::fixture_tensor(f["image"]).to(kF32));
  test::check_close(logits, test::fixture_tensor(f["logits"]), kTol, kTol);
  test::check_close(feature, test::fixture_tensor(f["feature"]), kTol, kTol);
}

TEST_CASE("an lsformer checkpoint is written for PyTorch to load", "[interop]") {
  auto f = test::load_fixture("torch_model");
  manual_seed(123);
  Toy model;  // lsformer's own initialisation
  NoGradGuard no_grad;
  auto [logits, feature] = model.forward(test::fixture_tensor(f["ids"]), test::fixture_tensor(f["image"]).to(kF32));
  const char* env = std::getenv("LSF_INTEROP_DIR");
  namespace fs = std::filesystem;
  fs::path dir = env ? fs::path(env) : fs::temp_directory_path() / ("lsf_interop_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  model.save((dir / "lsformer_model.safetensors").string(), {{"format", "pt"}});
  auto enc = [](const Tensor& t) {
    return nlohmann::json{{"shape", t.shape()}, {"dtype", "f32"}, {"data", t.to_vector<double>()}};
  };
  std::ofstream((dir / "lsformer_outputs.json").string()) << nlohmann::json{{"logits", enc(logits)}, {"feature", enc(feature)}}.dump();
  // What PyTorch's loader relies on: the header names every state_dict entry with its shape.
  auto file = load_safetensors((dir / "lsformer_model.safetensors").string());
  CHECK(file.tensors.size() == f["names"].size());
  CHECK(file.tensors.at("blocks.1.mlp.2.weight").shape() == Shape{8, 32});
  CHECK(file.tensors.at("conv.weight").shape() == Shape{4, 3, 3, 3});
  if (!env) fs::remove_all(dir);
}
