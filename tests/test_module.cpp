// nn::Module with real layers: state_dict keys, shapes and dtypes of a toy model (nested
// modules, ModuleList and Sequential numbering, bare parameters, buffers) equal PyTorch's
// (tests/fixtures/layers.json); train()/eval() propagation; to(dtype) keeping handles valid;
// zero_grad; the printout; parameter_count; load_state_dict reports in strict and non-strict
// mode; and the save → load round trip through safetensors.
#include <filesystem>
#include <functional>
#include <sstream>
#include <unistd.h>

#include "helpers.h"
#include "lsformer/models/nn/activation.h"
#include "lsformer/models/nn/conv2d.h"
#include "lsformer/models/nn/dropout.h"
#include "lsformer/models/nn/embedding.h"
#include "lsformer/models/nn/layer_norm.h"
#include "lsformer/models/nn/linear.h"
#include "lsformer/models/nn/mlp.h"
#include "lsformer/models/nn/module_list.h"
#include "lsformer/models/nn/sequential.h"

using namespace lsf;

namespace {

const nlohmann::json& fixture() {
  static const nlohmann::json j = test::load_fixture("layers");
  return j;
}

// The toy models of tests/fixtures/gen_layers.py, built from lsformer's layers.
class Block : public nn::Module {
 public:
  Block() : Module("Block") {
    norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(8));
    mlp = register_module("mlp", std::make_shared<nn::Mlp>(8, nn::MlpOptions{.hidden_features = 32}));
    norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(8, 1e-5, /*elementwise_affine=*/false));
  }
  Tensor forward(const Tensor& x) { return norm2->forward(x + mlp->forward(norm1->forward(x))); }
  std::shared_ptr<nn::LayerNorm> norm1, norm2;
  std::shared_ptr<nn::Mlp> mlp;
};

class Toy : public nn::Module {
 public:
  Toy() : Module("Toy") {
    cls_token = register_parameter("cls_token", zeros({1, 1, 8}));
    embed = register_module("embed", std::make_shared<nn::Embedding>(16, 8, /*padding_idx=*/0));
    conv = register_module("conv", std::make_shared<nn::Conv2d>(3, 8, 3, Conv2dOptions{.padding = 1}));
    dwconv = register_module("dwconv", std::make_shared<nn::Conv2d>(8, 8, 3, Conv2dOptions{.padding = 1, .groups = 8},
                                                                    /*bias=*/false));
    blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
    for (int i = 0; i < 2; ++i) blocks->push_back(std::make_shared<Block>());
    seq = register_module("seq", std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
                                     std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::ReLU>(),
                                     std::make_shared<nn::Dropout>(0.1), std::make_shared<nn::Linear>(16, 8)}));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(Shape{2, 8}));
    head = register_module("head", std::make_shared<nn::Linear>(8, 10, /*bias=*/false));
  }
  // ids [B, 2] (i64), images [B, 3, H, W] → logits [B, 2, 10].
  Tensor forward(const Tensor& ids, const Tensor& images) {
    Tensor pooled = mean(dwconv->forward(conv->forward(images)), {2, 3});  // [B, 8]
    Tensor h = embed->forward(ids) + cls_token + pooled.unsqueeze(1);
    for (size_t i = 0; i < blocks->size(); ++i) h = blocks->at<Block>(i)->forward(h);
    return head->forward(norm->forward(seq->forward(h)));
  }
  Tensor cls_token;
  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::Conv2d> conv, dwconv;
  std::shared_ptr<nn::ModuleList> blocks;
  std::shared_ptr<nn::Sequential> seq;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;
};

class WithBuffers : public nn::Module {
 public:
  WithBuffers() : Module("WithBuffers") {
    lin = register_module("lin", std::make_shared<nn::Linear>(2, 2));
    running_mean = register_buffer("running_mean", zeros({2}));
    scale = register_parameter("scale", ones({2}));
    table = register_buffer("table", zeros({3}), /*persistent=*/false);
    steps = register_buffer("steps", scalar_tensor(0, kI64));
  }
  std::shared_ptr<nn::Linear> lin;
  Tensor running_mean, scale, table, steps;
};

const char* torch_dtype(DType t) { return t == kF32 ? "float32" : t == kF64 ? "float64" : t == kI64 ? "int64" : "?"; }

std::vector<nlohmann::json> keys_of(const NamedTensors& named) {
  std::vector<nlohmann::json> out;
  for (const auto& [name, t] : named) out.push_back(nlohmann::json::array({name, t.shape(), torch_dtype(t.dtype())}));
  return out;
}

std::map<std::string, Tensor> as_map(const NamedTensors& named) {
  return std::map<std::string, Tensor>(named.begin(), named.end());
}

std::string temp_path(const std::string& stem) {
  return (std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(::getpid()) + ".safetensors")).string();
}

}  // namespace

TEST_CASE("state_dict keys, shapes and dtypes equal PyTorch's for a toy model", "[module]") {
  Toy toy;
  const auto& f = fixture()["toy_model"];
  CHECK(keys_of(toy.state_dict()) == f["keys"].get<std::vector<nlohmann::json>>());
  CHECK(keys_of(toy.named_parameters()) == f["keys"].get<std::vector<nlohmann::json>>());  // no buffers here
  CHECK(toy.parameter_count() == f["parameter_count"].get<int64_t>());
  CHECK(toy.parameters().size() == toy.named_parameters().size());
  CHECK(toy.parameters()[1].is_same(toy.embed->weight));

  WithBuffers wb;
  const auto& b = fixture()["buffers_model"];
  CHECK(keys_of(wb.state_dict()) == b["keys"].get<std::vector<nlohmann::json>>());
  std::vector<std::string> buffers;
  for (const auto& [name, t] : wb.named_buffers()) buffers.push_back(name);
  CHECK(buffers == b["buffers"].get<std::vector<std::string>>());
  CHECK(wb.named_buffers(/*persistent_only=*/true).size() == 2);
}

TEST_CASE("train() and eval() reach every submodule and switch Dropout", "[module]") {
  manual_seed(4);
  Toy toy;
  Tensor ids = tensor(std::vector<int64_t>{1, 2, 0, 5}, {2, 2});
  Tensor images = randn({2, 3, 4, 4});
  int modules = 0;
  toy.apply([&](const nn::Module& m) {
    ++modules;
    CHECK(m.is_training());
  });
  CHECK(modules == 30);  // Toy, embed, conv, dwconv, blocks; 2 × (Block, norm1, mlp + 5, norm2); seq + 4; norm; head
  auto named = toy.named_modules();  // the same tree without the root, with dotted paths
  CHECK(named.size() == 29);
  CHECK(std::find_if(named.begin(), named.end(), [](const auto& p) { return p.first == "blocks.1.mlp.fc2"; }) != named.end());
  toy.eval();
  toy.apply([](const nn::Module& m) { CHECK(!m.is_training()); });
  const auto a = toy.forward(ids, images).to_vector<float>();
  CHECK(toy.forward(ids, images).to_vector<float>() == a);  // no dropout: deterministic
  toy.train();
  toy.apply([](const nn::Module& m) { CHECK(m.is_training()); });
  // Dropout(0.1) on 64 hidden values per call: two calls share a mask with probability far
  // below 10⁻⁶, and a kept mask changes the output.
  CHECK(toy.forward(ids, images).to_vector<float>() != toy.forward(ids, images).to_vector<float>());
  toy.seq->eval();  // a subtree alone
  CHECK(!(*toy.seq)[2]->is_training());
  CHECK(toy.is_training());
  CHECK(toy.blocks->at<Block>(0)->mlp->drop1->is_training());
}

TEST_CASE("to(dtype) converts in place and keeps every handle valid", "[module]") {
  manual_seed(6);
  Toy toy;
  const Tensor w = toy.head->weight;  // handles taken before the conversion
  const TensorList params = toy.parameters();
  const auto before = w.to_vector<double>();
  toy.to(kF64);
  CHECK(w.dtype() == kF64);
  CHECK(toy.head->weight.is_same(w));
  for (const Tensor& p : params) {
    CHECK(p.dtype() == kF64);
    CHECK(p.requires_grad());
  }
  CHECK(w.to_vector<double>() == before);  // f32 → f64 is exact
  // The model runs in f64 and the old handles receive the gradients.
  Tensor ids = tensor(std::vector<int64_t>{1, 2, 0, 5}, {2, 2});
  Tensor out = toy.forward(ids, randn({2, 3, 4, 4}, kF64));
  CHECK(out.dtype() == kF64);
  sum(out).backward();
  CHECK(w.grad().defined());
  CHECK(w.grad().dtype() == kF64);
  toy.to(kF32);
  CHECK(params[0].dtype() == kF32);
  // Buffers convert only when floating-point.
  WithBuffers wb;
  wb.to(kF64);
  CHECK(wb.running_mean.dtype() == kF64);
  CHECK(wb.table.dtype() == kF64);
  CHECK(wb.steps.dtype() == kI64);
  CHECK_THROWS_WITH(wb.to(kI64), Catch::Contains("to(") && Catch::Contains("i64"));
}

TEST_CASE("zero_grad drops every gradient", "[module]") {
  Toy toy;
  Tensor ids = tensor(std::vector<int64_t>{1, 2, 3, 5}, {2, 2});
  sum(toy.forward(ids, randn({2, 3, 4, 4}))).backward();
  for (const auto& [name, p] : toy.named_parameters()) {
    INFO(name);
    CHECK(p.grad().defined());
  }
  toy.zero_grad();
  for (const Tensor& p : toy.parameters()) CHECK(!p.grad().defined());
}

TEST_CASE("print shows the tree with shapes and the parameter count", "[module]") {
  nn::Sequential seq({std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::ReLU>()});
  std::ostringstream os;
  os << seq;
  CHECK(os.str() ==
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=true\n"
        "    weight: {3, 2} f32\n"
        "    bias: {3} f32\n"
        "  )\n"
        "  (1): ReLU()\n"
        ")  # 9 parameters");
  WithBuffers wb;
  std::ostringstream ob;
  ob << wb;
  CHECK(ob.str() ==
        "WithBuffers(\n"
        "  scale: {2} f32\n"
        "  running_mean: {2} f32 (buffer)\n"
        "  table: {3} f32 (buffer, not saved)\n"
        "  steps: {} i64 (buffer)\n"
        "  (lin): Linear(in_features=2, out_features=2, bias=true\n"
        "    weight: {2, 2} f32\n"
        "    bias: {2} f32\n"
        "  )\n"
        ")  # 8 parameters");
}

TEST_CASE("load_state_dict reports missing, unexpected and mis-shaped names", "[module]") {
  manual_seed(7);
  Toy source, target;
  std::map<std::string, Tensor> state = as_map(source.state_dict());
  CHECK(target.load_state_dict(state).ok());
  CHECK(target.load_state_dict(state).str() == "all names and shapes match");
  CHECK(target.conv->weight.to_vector<float>() == source.conv->weight.to_vector<float>());

  // Values in another floating dtype are converted to the module's.
  state["conv.weight"] = full({8, 3, 3, 3}, 0.25, kF64);
  state.erase("head.weight");
  state["extra.weight"] = zeros({2});
  state["norm.weight"] = zeros({8});
  const auto norm_before = target.norm->weight.to_vector<float>();
  const auto head_before = target.head->weight.to_vector<float>();
  using Catch::Contains;
  CHECK_THROWS_WITH(target.load_state_dict(state), Contains("Toy") && Contains("strict") && Contains("head.weight") &&
                                                       Contains("extra.weight") && Contains("norm.weight"));
  // Strict mode loads nothing when it throws.
  CHECK(target.conv->weight.to_vector<float>() == source.conv->weight.to_vector<float>());

  nn::LoadReport r = target.load_state_dict(state, /*strict=*/false);
  CHECK(!r.ok());
  CHECK(r.missing == std::vector<std::string>{"head.weight"});
  CHECK(r.unexpected == std::vector<std::string>{"extra.weight"});
  REQUIRE(r.mismatched.size() == 1);
  CHECK_THAT(r.mismatched[0], Contains("norm.weight") && Contains("{8}") && Contains("{2, 8}"));
  CHECK_THAT(r.str(), Contains("missing (1): head.weight") && Contains("unexpected (1): extra.weight"));
  // What matched was loaded (and converted); the rest is untouched.
  test::check_equal<float>(target.conv->weight, {8, 3, 3, 3}, std::vector<float>(216, 0.25f));
  CHECK(target.conv->weight.dtype() == kF32);
  CHECK(target.norm->weight.to_vector<float>() == norm_before);
  CHECK(target.head->weight.to_vector<float>() == head_before);
  CHECK(target.embed->weight.to_vector<float>() == source.embed->weight.to_vector<float>());
}

TEST_CASE("save and load round-trip every parameter and buffer through safetensors", "[module]") {
  manual_seed(8);
  Toy a;
  const std::string path = temp_path("lsf_test_module");
  a.save(path, {{"step", "7"}});
  manual_seed(9);
  Toy b;
  CHECK(b.head->weight.to_vector<float>() != a.head->weight.to_vector<float>());
  CHECK(b.load(path).ok());
  const auto sa = a.state_dict(), sb = b.state_dict();
  REQUIRE(sa.size() == sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    INFO(sa[i].first);
    CHECK(sa[i].second.to_vector<float>() == sb[i].second.to_vector<float>());  // bit-identical
  }
  const SafetensorsContents file = load_safetensors(path);
  CHECK(file.metadata.at("step") == "7");
  CHECK(file.tensors.size() == sa.size());

  // Buffers: persistent ones (including a 0-d i64) are saved, a non-persistent one is not.
  WithBuffers w1;
  {
    NoGradGuard g;
    w1.running_mean.fill_(1.5);
    w1.steps.fill_(42);
    w1.table.fill_(3);
  }
  w1.save(path);
  WithBuffers w2;
  CHECK(w2.load(path).ok());
  test::check_equal<float>(w2.running_mean, {2}, {1.5f, 1.5f});
  test::check_equal<int64_t>(w2.steps, {}, {42});
  test::check_equal<float>(w2.table, {3}, {0, 0, 0});
  CHECK(load_safetensors(path).tensors.count("table") == 0);
  std::filesystem::remove(path);
  CHECK_THROWS_WITH(w2.load(path), Catch::Contains(path));
}

TEST_CASE("registration rejects duplicate and dotted names", "[module]") {
  nn::Module m("Custom");
  m.register_parameter("w", zeros({2}));
  using Catch::Contains;
  CHECK_THROWS_WITH(m.register_parameter("w", zeros({2})), Contains("Custom") && Contains("'w'"));
  CHECK_THROWS_WITH(m.register_buffer("w", zeros({2})), Contains("'w'"));
  CHECK_THROWS_WITH(m.register_module("a.b", std::make_shared<nn::ReLU>()), Contains("a.b"));
  CHECK_THROWS_WITH(m.register_parameter("ids", zeros({2}, kI64)), Contains("floating"));
}
