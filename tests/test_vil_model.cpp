// Tests of ViL-LS (models/vision/vil.h, transformer-ls.md §4.4–4.5): the arch-string parser and
// its errors; official state_dict names; logits and gradients of tiny models against a PyTorch
// re-implementation of the official MsViT (tests/fixtures/gen_vil_model.py) in f64 and f32; an
// f64 gradient check of a whole tiny model; the presets' exact parameter counts (§9.4); the
// drop-path schedule; image-size constraints.
#include <set>

#include "helpers.h"
#include "lsformer/models/attention/long_short_2d.h"
#include "lsformer/models/vision/vil.h"
#include "lsformer/models/vision/vil_attention.h"

using namespace lsf;
using vision::ViLClassifier;
using vision::ViLOptions;

namespace {

ViLOptions options_of(const nlohmann::json& c) {
  return {.arch = c["arch"], .image_size = c["image_size"], .in_channels = c["in_channels"],
          .num_classes = c["num_classes"]};
}

// Model vs PyTorch (f64 reference from the same float32-representable parameters and images).
// The computation chains S ≈ 12 rounding stages per block (LayerNorms, projections, DualLN,
// softmaxes, weighted sums, MLP) and ≈ 6 around them (patch conv, norm, pooling, head); each is a
// reduction of length at most L = 64 (the MLP's hidden width 4d = 32 doubled for headroom: the
// attention rows have ≤ 21 slots, the patch conv 12 taps, d = 8). With O(1) values, |error| ≤
// S·L·u, where S = 12·blocks + 6 and u = 2⁻⁵³ (f64) or 2⁻²⁴ (f32); gradients run the chain twice
// (forward and backward), so 2S. The same bound serves as the relative part.
struct Tolerance {
  double forward, backward;
};
Tolerance tolerance(int64_t blocks, DType dtype) {
  const double u = dtype == kF64 ? 0x1p-53 : 0x1p-24, S = 12.0 * double(blocks) + 6.0, L = 64.0;
  return {S * L * u, 2 * S * L * u};
}

}  // namespace

// ---- arch strings -------------------------------------------------------------------------------

TEST_CASE("ViL arch strings parse as the official MsViT reads them", "[vil]") {
  auto stages = vision::parse_vil_arch("l1,h3,d96,n1,s1,g1,p4,f7,a0,r8_l2,h3,d192,n4,s1,g1,p2,f7,a0,r8_"
                                       "l3,h6,d384,n16,s0,g1,p2,f7,a0,r8_l4,h12,d768,n1,s0,g0,p2,f7,a0,r8");
  REQUIRE(stages.size() == 4);
  CHECK(stages[0] == vision::ViLStageConfig{.id = 1, .heads = 3, .dim = 96, .blocks = 1, .long_short = true,
                                            .global_tokens = 1, .patch = 4, .window = 7, .absolute_pos = false,
                                            .rank = 8});
  CHECK(stages[2].long_short == false);
  CHECK(stages[3].global_tokens == 0);
  CHECK(stages[3].dim == 768);
  // Left-out fields take the official defaults: h3, d192, n1, s1, g1, p2, f7, a1, r0.
  auto defaults = vision::parse_vil_arch("l1");
  CHECK(defaults[0] == vision::ViLStageConfig{});
  CHECK(defaults[0].absolute_pos);
  // Canonical printing round-trips.
  CHECK(vision::parse_vil_arch(vision::format_vil_arch(stages)) == stages);
  CHECK(vision::format_vil_arch(defaults) == "l1,h3,d192,n1,s1,g1,p2,f7,a1,r0");
}

TEST_CASE("bad ViL arch strings are errors naming the stage and the field", "[vil]") {
  using Catch::Contains;
  auto fails = [](const std::string& arch, const std::string& what) {
    INFO(arch);
    CHECK_THROWS_WITH(vision::parse_vil_arch(arch), Contains(what));
  };
  fails("", "empty");
  fails("l1,h3,x5", "unknown field 'x5'");
  fails("l1,h3,dd", "field 'dd' needs an integer");
  fails("l1,h", "field 'h' needs an integer");
  fails("l1,h3,h4", "field 'h' is given twice");
  fails("l1,h3,,d6", "empty field");
  fails("l1_", "stage 2");
  fails("l1__l2", "empty stage");
  fails("l1,h3,d96_l3,h3,d96", "must equal the stage's position 2");
  fails("l1,h3,d95", "divisible by the heads");
  fails("l1,h1,d5,a1", "must be even");
  fails("l1,h0", "'h0' must be ≥ 1");
  fails("l1,s2", "'s2' must be 0 (full) or 1 (long-short)");
  fails("l1,a3", "'a3' must be 0 or 1");
  fails("l1,g2,s1", "long-short stages take 0 or 1 global tokens");
  fails("l1,p0", "'p0' must be ≥ 1");
  fails("l1,f0,s1", "'f0' (the window) must be ≥ 1");
  fails("l1,f1,s1,a0", "'f1' with relative position biases");
  fails("l1,r-1", "'r-1' must be ≥ 0");
  fails("l1,n-2", "'n-2' must be ≥ 0");
  fails("l1,h3,d96,n1_l2,h3,d9x", "stage 2");
}

TEST_CASE("ViL arch strings accept full-attention stages with several global tokens", "[vil]") {
  CHECK_NOTHROW(vision::parse_vil_arch("l1,h2,d6,a1"));
  auto s = vision::parse_vil_arch("l1,s0,g3,f1,a1");
  CHECK(s[0].global_tokens == 3);
  // Two global tokens with relative biases (g2g [h, 2, 2], g2l [2, h, 2]) then a CLS readout.
  ViLClassifier model({.arch = "l1,h2,d8,n1,s0,g2,p2,a0_l2,h2,d8,n1,s0,g1,p2,a0", .image_size = 8,
                       .in_channels = 3, .num_classes = 4});
  auto* full = dynamic_cast<vision::ViLFullAttention*>(model.layers[0]->attn_blocks[0]->attn.get());
  REQUIRE(full != nullptr);
  CHECK(full->g2g_relative_position_bias.shape() == Shape{2, 2, 2});
  CHECK(full->g2l_relative_position_bias.shape() == Shape{2, 2, 2});
  CHECK(model.forward(randn({2, 3, 8, 8})).shape() == Shape{2, 4});
}

// ---- names and the PyTorch reference ------------------------------------------------------------------

TEST_CASE("ViL has the official MsViT state_dict names", "[vil]") {
  for (const char* key : {"a", "b"}) {
    const auto& c = test::cached_fixture("vil_model")[key];
    INFO("model " << key);
    ViLClassifier model(options_of(c));
    std::set<std::string> ours, theirs;
    for (const auto& [name, t] : model.state_dict()) ours.insert(name);
    for (auto it = c["state"].begin(); it != c["state"].end(); ++it) theirs.insert(it.key());
    CHECK(ours == theirs);
    // Loading the state of the official structure strictly: every name and shape matches.
    CHECK(model.check_state_dict(test::fixture_state(c["state"])).ok());
  }
  // PyTorch's order within a module: its own parameters, its buffers, then the children.
  ViLClassifier a(options_of(test::cached_fixture("vil_model")["a"]));
  auto state = a.state_dict();
  CHECK(state[0].first == "layer1.0.cls_token");
  CHECK(state[1].first == "layer1.0.proj.weight");
  CHECK(state[5].first == "layer1.1.norm.weight");
  CHECK(state[7].first == "layer1.1.attn.local_relative_position_bias_table");
  CHECK(state[8].first == "layer1.1.attn.relative_position_index");
  CHECK(state.back().first == "head.bias");
}

TEST_CASE("ViL logits and gradients match the PyTorch MsViT in f64 and f32", "[vil]") {
  for (const char* key : {"a", "b"}) {
    const auto& c = test::cached_fixture("vil_model")[key];
    ViLClassifier probe(options_of(c));
    int64_t blocks = 0;
    for (const auto& s : probe.stages()) blocks += s.blocks;
    for (DType dtype : {kF64, kF32}) {
      INFO("model " << key << ", " << dtype);
      ViLClassifier model(options_of(c));
      model.to(dtype);
      model.load_state_dict(test::fixture_state(c["state"]));  // strict
      model.eval();
      const Tolerance tol = tolerance(blocks, dtype);
      Tensor x = test::fixture_tensor(c["x"]).to(dtype).requires_grad_(true);
      Tensor y = model.forward(x);
      REQUIRE(y.dtype() == dtype);
      test::check_close(y, test::fixture_tensor(c["y"]), tol.forward, tol.forward);
      y.backward(test::fixture_tensor(c["gy"]).to(dtype));
      test::check_close(x.grad(), test::fixture_tensor(c["dx"]), tol.backward, tol.backward);
      const auto& grads = c["grads"];
      for (const auto& [name, p] : model.named_parameters()) {
        INFO(name);
        REQUIRE(grads.contains(name));
        const Tensor expected = test::fixture_tensor(grads[name]);
        if (expected.numel() == 0) continue;  // the zero-sized cls_pos_embed of a g0 stage with a1
        REQUIRE(p.grad().defined());
        test::check_close(p.grad(), expected, tol.backward, tol.backward);
      }
    }
  }
}

TEST_CASE("a tiny ViL-LS passes an f64 gradient check over its images and every parameter", "[vil]") {
  const auto& c = test::cached_fixture("vil_model")["a"];
  ViLClassifier model(options_of(c));
  model.to(kF64);
  model.load_state_dict(test::fixture_state(c["state"]));
  Tensor x = test::grad_input({1, 3, 12, 12}, 5);
  auto forward = [&](const TensorList& in) { return model.forward(in[0]); };
  // The images: the full Jacobian (432 inputs × 5 logits).
  auto rx = testing::gradcheck(forward, {x});
  INFO(rx.message);
  CHECK(rx.ok);
  // Every parameter at once (gradcheck perturbs them in place, the closure reads them through
  // the model): 16 random projections uᵀJv over all ≈ 2400 parameters.
  TensorList inputs{x.detach()};
  for (const Tensor& p : model.parameters()) inputs.push_back(p);
  auto rp = testing::gradcheck(forward, inputs, {.max_jacobian_entries = 0, .projections = 16});
  INFO(rp.message);
  CHECK(rp.ok);
}

// ---- presets ------------------------------------------------------------------------------------

TEST_CASE("ViL-LS presets have the published parameter counts, exactly", "[vil]") {
  // Exact counts of the official module structure (the PyTorch MsViT of gen_vil_model.py built at
  // full size), which round to the paper's 39.8M / 55.8M / 39.9M and §9.4's 39,799k / 55,834k / 39,948k.
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"vil_ls_medium_224", 39799423}, {"vil_ls_base_224", 55834363}, {"vil_ls_medium_384", 39947653}};
  nn::init::SkipRandomInit skip;  // counting only: the random fills of 40–56M weights take seconds
  for (const auto& [name, count] : expected) {
    INFO(name);
    ViLClassifier model(vision::vil_preset(name));
    CHECK(model.parameter_count() == count);
    CHECK((model.parameter_count() + 500) / 1000 == (count + 500) / 1000);
  }
  CHECK(vision::vil_preset_names().size() == 3);
  CHECK_THROWS_WITH(vision::vil_preset("vil_ls_tiny"), Catch::Contains("unknown preset") && Catch::Contains("vil_ls_base_224"));
}

TEST_CASE("ViL-LS-Medium is built as the launch script describes", "[vil]") {
  nn::init::SkipRandomInit skip;  // structure only (the initialisation is checked on a small model below)
  ViLClassifier model(vision::vil_preset("vil_ls_medium_224"));
  REQUIRE(model.layers.size() == 4);
  CHECK(model.layers[0]->map_side() == 56);
  CHECK(model.layers[1]->map_side() == 28);
  CHECK(model.layers[2]->map_side() == 14);
  CHECK(model.layers[3]->map_side() == 7);
  CHECK(model.layers[2]->attn_blocks.size() == 16);
  auto* ls = dynamic_cast<nn::LongShortAttention2d*>(model.layers[0]->attn_blocks[0]->attn.get());
  REQUIRE(ls != nullptr);
  CHECK(ls->span() == 13);
  CHECK(ls->options().rank == 8);
  auto* full = dynamic_cast<vision::ViLFullAttention*>(model.layers[2]->attn_blocks[0]->attn.get());
  REQUIRE(full != nullptr);
  CHECK(full->local_relative_position_bias_table.shape() == Shape{27 * 27, 6});
  CHECK(full->g2l_relative_position_bias.shape() == Shape{2, 6, 1});
  CHECK(full->g2g_relative_position_bias.shape() == Shape{6, 1, 1});
  CHECK(full->relative_position_index.shape() == Shape{196, 196});
  CHECK(!dynamic_cast<vision::ViLFullAttention*>(model.layers[3]->attn_blocks[0]->attn.get())
             ->g2l_relative_position_bias.defined());  // g0 in stage 4
  // Drop path: linspace(0, 0.3, 22 blocks); stage 3's first block is block 5.
  CHECK(model.layers[0]->attn_blocks[0]->drop_path->p() == 0.0);
  CHECK(model.layers[2]->attn_blocks[0]->drop_path->p() == Approx(0.3 * 5 / 21));
  CHECK(model.layers[2]->mlp_blocks[0]->drop_path->p() == model.layers[2]->attn_blocks[0]->drop_path->p());
  CHECK(model.layers[3]->mlp_blocks[0]->drop_path->p() == Approx(0.3));
  CHECK(vision::vil_drop_path_rates(1, 0.5) == std::vector<double>{0.0});
  CHECK(vision::vil_drop_path_rates(3, 0.5) == std::vector<double>{0.0, 0.25, 0.5});
}

TEST_CASE("ViL accepts any channel count and image size the arch allows, and names the constraint otherwise", "[vil]") {
  // A small ViL-LS for 28×28 grey images (Fashion-MNIST): 14×14 long-short (w 7) then 7×7 full.
  ViLClassifier small({.arch = "l1,h2,d16,n1,s1,g1,p2,f7,a0,r4_l2,h2,d32,n1,s0,g0,p2,f7,a0", .image_size = 28,
                       .in_channels = 1, .num_classes = 10, .drop_path_rate = 0.2});
  // ViL initialisation (§4.4): every Linear weight trunc-normal(0.02) (the MLPs', the head's and
  // the attention's), biases 0, LayerNorms (1, 0), position tables trunc-normal(0.02).
  for (const auto& [name, p] : small.named_parameters()) {
    INFO(name);
    const bool linear = name.find("qkv.weight") != std::string::npos || name.find("fc1.weight") != std::string::npos ||
                        name.find("fc2.weight") != std::string::npos || name == "head.weight" ||
                        name.find("attn.proj.weight") != std::string::npos;
    if (linear) {
      // Sample standard deviation of n ≥ 320 draws (the head): its standard error is 0.02/√(2n)
      // ≤ 4%, so 25% is over 6 standard errors.
      CHECK(std::sqrt(var(p).item<double>()) == Approx(0.02).epsilon(0.25));
      CHECK(amax(abs(p)).item<double>() < 0.02 * 6);
    }
    if (name.ends_with(".bias") && name.find("norm") == std::string::npos && name.find("layer1.0.proj") == std::string::npos &&
        name.find("layer2.0.proj") == std::string::npos)
      CHECK(sum(abs(p)).item<double>() == 0.0);  // Linear biases (the patch convs keep PyTorch's default)
    if (name.ends_with("norm.weight") || (name.find("dual_ln") != std::string::npos && name.ends_with("weight")))
      CHECK(p.to_vector<float>() == std::vector<float>(size_t(p.numel()), 1.0f));
  }
  Tensor images = randn({3, 1, 28, 28});
  small.eval();
  Tensor logits = small.forward(images);
  CHECK(logits.shape() == Shape{3, 10});
  test::check_close(small.forward(images), logits, 0, 0);  // eval: deterministic
  small.train();
  CHECK(small.forward(images).shape() == Shape{3, 10});
  // The medium preset at 28×28: the stage-2 map is 3×3, not a multiple of w = 7.
  ViLOptions o = vision::vil_preset("vil_ls_medium_224");
  o.image_size = 28;
  CHECK_THROWS_WITH(ViLClassifier(o), Catch::Contains("stage 2") && Catch::Contains("multiple of the long-short window f = 7"));
  o.image_size = 3;  // 3 / 4 leaves no 4×4 patch
  CHECK_THROWS_WITH(ViLClassifier(o), Catch::Contains("stage 1") && Catch::Contains("no patches"));
  CHECK_THROWS_WITH(small.forward(randn({1, 3, 28, 28})), Catch::Contains("ViL") && Catch::Contains("[B, 1, 28, 28]"));
  CHECK_THROWS_WITH(small.forward(randn({1, 1, 32, 32})), Catch::Contains("[B, 1, 28, 28]"));
}

TEST_CASE("a checkpoint converted by scripts/convert_vil_checkpoint.py loads strictly", "[vil]") {
  // gen_vil_model.py saved model "a" as the official Checkpointer does ({"net": "module."-prefixed
  // state, "arch", "epoch"}) and converted it: f32 weights, the i64 index buffers, metadata.
  const auto& c = test::cached_fixture("vil_model")["a"];
  ViLClassifier model(options_of(c));
  const std::string path = std::string(LSF_FIXTURE_DIR) + "/vil_model_a.safetensors";
  CHECK(model.load(path).ok());  // strict: throws on any missing, unexpected or mis-shaped name
  CHECK(load_safetensors(path).metadata.at("arch") == c["arch"].get<std::string>());
  model.eval();
  const Tolerance tol = tolerance(2, kF32);
  test::check_close(model.forward(test::fixture_tensor(c["x"]).to(kF32)), test::fixture_tensor(c["y"]), tol.forward,
                    tol.forward);
}
