// Tests of CvT*-LS (models/vision/cvt_ls*.h, transformer-ls.md §4.6): state_dict names; logits,
// gradients and BatchNorm running statistics of tiny models against a PyTorch implementation of
// the documented design (tests/fixtures/gen_cvt_ls_model.py) in f64 and f32, in train mode (batch
// statistics, weight-standardised W_P) and eval mode (kv_stride 2, BatchNorm W_P); an f64 gradient
// check; the presets' structure; image-size errors.
#include <set>

#include "helpers.h"
#include "lsformer/models/nn/std_conv2d.h"
#include "lsformer/models/vision/cvt_ls.h"

using namespace lsf;
using vision::CvTLSClassifier;
using vision::CvTLSOptions;

namespace {

CvTLSOptions options_of(const nlohmann::json& c) {
  CvTLSOptions o;
  for (const auto& s : c["stages"]) {
    o.stages.push_back({.patch_size = 3, .patch_stride = 2, .patch_padding = 1, .dim = s["d"], .heads = s["h"],
                        .depth = s["depth"], .window = s["w"], .rank = s["r"], .cls_token = s["cls"]});
  }
  o.image_size = c["image_size"];
  o.in_channels = c["in_channels"];
  o.num_classes = c["num_classes"];
  o.kv_stride = c["kv_stride"];
  o.batch_norm_projection = c["batch_norm_projection"];
  return o;
}

// As for ViL (test_vil_model.cpp): S ≈ 14 rounding stages per block here (three convolutional
// projections and their BatchNorms run side by side, W_P adds a depthwise conv with its
// standardisation and a pointwise conv) and ≈ 6 around them; reductions of length ≤ L = 72 (the
// stage-1 embedding conv: 8 channels × 9 taps; attention rows ≤ 13 slots, MLP hidden 32;
// BatchNorm statistics over 2·36 = 72 values). Gradients run the chain twice.
struct Tolerance {
  double forward, backward;
};
Tolerance tolerance(int64_t blocks, DType dtype) {
  const double u = dtype == kF64 ? 0x1p-53 : 0x1p-24, S = 14.0 * double(blocks) + 6.0, L = 72.0;
  return {S * L * u, 2 * S * L * u};
}

int64_t blocks_of(const CvTLSOptions& o) {
  int64_t n = 0;
  for (const auto& s : o.stages) n += s.depth;
  return n;
}

}  // namespace

TEST_CASE("CvT*-LS uses the official CvT names plus the long-short parts", "[cvt_ls]") {
  for (const char* key : {"a", "b"}) {
    const auto& c = test::cached_fixture("cvt_ls_model")[key];
    INFO("model " << key);
    CvTLSClassifier model(options_of(c));
    std::set<std::string> ours, theirs;
    for (const auto& [name, t] : model.state_dict()) ours.insert(name);
    for (auto it = c["state"].begin(); it != c["state"].end(); ++it) theirs.insert(it.key());
    CHECK(ours == theirs);
    CHECK(model.check_state_dict(test::fixture_state(c["state"])).ok());
  }
  CvTLSClassifier a(options_of(test::cached_fixture("cvt_ls_model")["a"]));
  auto* ws = dynamic_cast<nn::StdConv2d*>(a.stages[0]->blocks[0]->attn->dynamic_projection->depthwise.get());
  CHECK(ws != nullptr);  // W_P's depthwise kernel is weight-standardised (no BatchNorm)
  CHECK(!a.stages[0]->blocks[0]->attn->dynamic_projection->bn);
  CHECK(a.stages[1]->cls_token.shape() == Shape{1, 1, 8});
  CHECK(!a.stages[0]->cls_token.defined());
}

TEST_CASE("CvT*-LS logits, gradients and BatchNorm statistics match the PyTorch implementation", "[cvt_ls]") {
  for (const char* key : {"a", "b"}) {
    const auto& c = test::cached_fixture("cvt_ls_model")[key];
    const bool train = c["train"];
    for (DType dtype : {kF64, kF32}) {
      INFO("model " << key << (train ? " (train mode)" : " (eval mode)") << ", " << dtype);
      CvTLSOptions o = options_of(c);
      CvTLSClassifier model(o);
      model.to(dtype);
      model.load_state_dict(test::fixture_state(c["state"]));
      model.train(train);
      const Tolerance tol = tolerance(blocks_of(o), dtype);
      Tensor x = test::fixture_tensor(c["x"]).to(dtype).requires_grad_(true);
      Tensor y = model.forward(x);
      test::check_close(y, test::fixture_tensor(c["y"]), tol.forward, tol.forward);
      y.backward(test::fixture_tensor(c["gy"]).to(dtype));
      test::check_close(x.grad(), test::fixture_tensor(c["dx"]), tol.backward, tol.backward);
      for (const auto& [name, p] : model.named_parameters()) {
        INFO(name);
        REQUIRE(p.grad().defined());
        test::check_close(p.grad(), test::fixture_tensor(c["grads"][name]), tol.backward, tol.backward);
      }
      if (train) {
        std::map<std::string, Tensor> ours;
        for (const auto& [name, t] : model.state_dict()) ours[name] = t;
        for (const auto& [name, expected] : test::fixture_state(c["running"])) {
          INFO(name);
          if (name.ends_with("num_batches_tracked")) CHECK(ours[name].item<int64_t>() == expected.item<int64_t>());
          else test::check_close(ours[name], expected, tol.forward, tol.forward);
        }
      }
    }
  }
}

TEST_CASE("a tiny CvT*-LS passes an f64 gradient check in both modes", "[cvt_ls]") {
  for (const char* key : {"a", "b"}) {
    const auto& c = test::cached_fixture("cvt_ls_model")[key];
    INFO("model " << key);
    CvTLSClassifier model(options_of(c));
    model.to(kF64);
    model.load_state_dict(test::fixture_state(c["state"]));
    model.train(c["train"].get<bool>());
    // One image (train-mode BatchNorm still sees ≥ 9 values per channel): the full Jacobian in the
    // image, then 16 random projections uᵀJv over every parameter at once (gradcheck perturbs them
    // in place; the closure reads them through the model).
    Tensor x = test::grad_input({1, c["in_channels"].get<int64_t>(), c["image_size"], c["image_size"]}, 17);
    auto forward = [&](const TensorList& in) { return model.forward(in[0]); };
    auto rx = testing::gradcheck(forward, {x});
    INFO(rx.message);
    CHECK(rx.ok);
    TensorList inputs{x.detach()};
    for (const Tensor& p : model.parameters()) inputs.push_back(p);
    auto rp = testing::gradcheck(forward, inputs, {.max_jacobian_entries = 0, .projections = 16});
    INFO(rp.message);
    CHECK(rp.ok);
  }
}

TEST_CASE("CvT*-LS presets follow CvT-13 / CvT-21 and the paper's (r, w)", "[cvt_ls]") {
  nn::init::SkipRandomInit skip;  // structure only
  CvTLSClassifier m13(vision::cvt_ls_preset("cvt_ls_13_224"));
  REQUIRE(m13.stages.size() == 3);
  CHECK(m13.stages[0]->map_side() == 56);
  CHECK(m13.stages[1]->map_side() == 28);
  CHECK(m13.stages[2]->map_side() == 14);
  CHECK(m13.stages[1]->blocks.size() == 2);
  CHECK(m13.stages[2]->blocks.size() == 10);
  CHECK(m13.stages[2]->cls_token.defined());
  const auto& ls0 = m13.stages[0]->blocks[0]->attn->ls->options();
  CHECK(ls0.window == 8);
  CHECK(ls0.rank == 64);
  CHECK(m13.stages[2]->blocks[0]->attn->ls->options().window == 2);
  CHECK(m13.stages[2]->blocks[9]->drop_path->p() == Approx(0.1));
  CvTLSClassifier m448(vision::cvt_ls_preset("cvt_ls_21_448"));
  CHECK(m448.stages[0]->map_side() == 112);
  CHECK(m448.stages[2]->blocks.size() == 16);
  CHECK(m448.stages[0]->blocks[0]->attn->ls->options().rank == 128);
  CHECK(m448.stages[2]->blocks[0]->attn->ls->options().window == 4);
  CHECK_THROWS_WITH(vision::cvt_ls_preset("cvt_ls_99"), Catch::Contains("unknown preset") && Catch::Contains("cvt_ls_21_384"));
}

TEST_CASE("CvT*-LS names the window constraint for unsuitable image sizes", "[cvt_ls]") {
  CvTLSOptions o = vision::cvt_ls_preset("cvt_ls_13_224");
  o.image_size = 28;  // maps 7, 4, 2: 7 is not a multiple of w = 8
  CHECK_THROWS_WITH(CvTLSClassifier(o), Catch::Contains("stage 0") && Catch::Contains("multiple of the window w = 8"));
  // The same layout with windows that fit 28×28 grey images works (maps 7, 4, 2).
  o.in_channels = 1;
  o.num_classes = 10;
  o.stages[0].window = 7;
  o.stages[1].window = 4;
  o.stages[2].window = 2;
  o.stages[1].depth = 1;
  o.stages[2].depth = 1;
  CvTLSClassifier small(o);
  small.eval();
  CHECK(small.forward(randn({2, 1, 28, 28})).shape() == Shape{2, 10});
  CHECK_THROWS_WITH(small.forward(randn({2, 3, 28, 28})), Catch::Contains("CvT-LS") && Catch::Contains("[B, 1, 28, 28]"));
}
