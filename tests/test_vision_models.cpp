// Tests of the vision family's common parts: the CNN baseline (names, shapes, a few training
// steps, f64 gradient check), the factory (every name, the spec replacing a preset's, errors),
// and measure_cost against hand-computed multiply-adds.
#include "helpers.h"
#include "lsformer/models/optim/sgd.h"
#include "lsformer/models/vision/cnn.h"
#include "lsformer/models/vision/factory.h"
#include "lsformer/models/vision/cvt_ls.h"
#include "lsformer/models/vision/vil.h"

using namespace lsf;

namespace {

// Analytic counts, written from the architecture descriptions (vil.h, cvt_ls*.h) and the
// convention of ops/flops.h, independently of the modules: a per-block sum of the products.
struct Counts {
  int64_t macs = 0, params = 0;
};

// ViL: patch conv N·d·C_in·p²; per block on n = g + N tokens: qkv 3nd², proj nd², MLP 8nd²;
// long-short: W_P N·d·h·r, K̄ and V̄ 2·r·N·d, patch attention 2·N·d·(r + T² + g), global update
// 2·N·d; full attention 2·n²·d. Head d·classes.
Counts vil_counts(const vision::ViLOptions& o) {
  Counts c;
  int64_t side = o.image_size, cin = o.in_channels;
  for (const auto& s : vision::parse_vil_arch(o.arch)) {
    const int64_t d = s.dim, g = s.global_tokens, h = s.heads, r = s.long_short ? s.rank : 0;
    side /= s.patch;
    const int64_t N = side * side, n = N + g, T = s.window + 2 * std::max<int64_t>(s.window / 2, 1);
    c.macs += N * d * cin * s.patch * s.patch;
    c.params += d * cin * s.patch * s.patch + d + 2 * d + g * d;  // conv, norm_embed, cls_token
    if (s.absolute_pos) c.params += g * d + side * d;               // cls_pos, x_pos + y_pos halves
    for (int64_t b = 0; b < s.blocks; ++b) {
      c.macs += 3 * n * d * d + n * d * d + 8 * n * d * d;
      c.params += 2 * d + 3 * d * d + 3 * d + d * d + d + 2 * d + 8 * d * d + 5 * d;  // norms, qkv, proj, MLP
      if (s.long_short) {
        c.macs += N * d * h * r + 2 * r * N * d + 2 * N * d * (r + T * T + g) + (g ? 2 * N * d : 0);
        c.params += 4 * d + (r ? d * h * r + h * r : 0);  // DualLN, W_P
        if (!s.absolute_pos) {
          const int64_t w = s.window, p = w / 2;
          c.params += (2 * (w + p - 1) * (2 * p + w + 1) + 1) * h;
        }
      } else {
        c.macs += 2 * n * n * d;
        if (!s.absolute_pos) c.params += (2 * side - 1) * (2 * side - 1) * h + (g ? 2 * h * g + h * g * g : 0);
      }
    }
    cin = d;
  }
  c.macs += cin * o.num_classes;
  c.params += 2 * cin + cin * o.num_classes + o.num_classes;
  return c;
}

// CvT*-LS: embedding conv N·d·C_in·k²; per block on n = g + N tokens: depthwise q/k/v convs
// 3·N·d·9, proj_q/k/v 3nd², W_P (on Ns = ⌈nx/s⌉² positions) Ns·d·k_P² + Ns·d·h·r, K̄ and V̄
// 2·r·Ns·d, patch attention 2·N·d·(r + T² + g), global update 2·N·d, proj nd², MLP 8nd².
Counts cvt_counts(const vision::CvTLSOptions& o) {
  Counts c;
  int64_t side = o.image_size, cin = o.in_channels;
  for (const auto& s : o.stages) {
    const int64_t d = s.dim, h = s.heads, r = s.rank, g = s.cls_token ? 1 : 0, k = s.patch_size;
    side = (side + 2 * s.patch_padding - k) / s.patch_stride + 1;
    const int64_t N = side * side, n = N + g, T = s.window + 2 * std::max<int64_t>(s.window / 2, 1);
    const int64_t ns = (side + o.kv_stride - 1) / o.kv_stride, Ns = ns * ns, kp = o.dp_kernel * o.dp_kernel;
    c.macs += N * d * cin * k * k;
    c.params += d * cin * k * k + d + 2 * d + g * d;  // conv, norm, cls_token
    for (int64_t b = 0; b < s.depth; ++b) {
      c.macs += 3 * N * d * 9 + 3 * n * d * d + Ns * d * kp + Ns * d * h * r + 2 * r * Ns * d +
                2 * N * d * (r + T * T + g) + (g ? 2 * N * d : 0) + n * d * d + 2 * s.mlp_ratio * n * d * d;
      c.params += 2 * d + 3 * (9 * d + 2 * d) + 3 * (d * d + d)        // norm1, conv projections, proj_q/k/v
                  + d * kp + (o.batch_norm_projection ? 2 * d : 0) + d * h * r + h * r  // W_P
                  + d * d + d + 4 * d + 2 * d                           // proj, DualLN, norm2
                  + 2 * s.mlp_ratio * d * d + s.mlp_ratio * d + d;      // MLP
    }
    cin = d;
  }
  c.macs += cin * o.num_classes;
  c.params += 2 * cin + cin * o.num_classes + o.num_classes;
  return c;
}

}  // namespace

TEST_CASE("the CNN baseline has torchvision-style names and classifies any channel count and size", "[vision]") {
  vision::CnnClassifier cnn({.channels = {8, 16}, .convs_per_block = 2, .image_size = 28, .in_channels = 1,
                             .num_classes = 10});
  auto state = cnn.state_dict();
  CHECK(state[0].first == "features.0.weight");  // conv 1 (no bias)
  CHECK(state[1].first == "features.1.weight");  // its BatchNorm
  CHECK(state[3].first == "features.1.running_mean");
  CHECK(state[5].first == "features.1.num_batches_tracked");
  CHECK(state.back().first == "classifier.bias");
  CHECK(cnn.features->size() == 2 * (2 * 3 + 1));  // per block: 2 × (conv, bn, relu) + pool
  CHECK(cnn.forward(randn({4, 1, 28, 28})).shape() == Shape{4, 10});
  vision::CnnClassifier rgb({.channels = {4, 8, 8, 8, 8, 8}, .image_size = 32, .in_channels = 3, .num_classes = 7});
  CHECK(rgb.forward(randn({2, 3, 32, 32})).shape() == Shape{2, 7});  // 32 → 1: the last pool is skipped
  CHECK_THROWS_WITH(cnn.forward(randn({4, 3, 28, 28})), Catch::Contains("CNN") && Catch::Contains("[B, 1, 28, 28]"));
  CHECK_THROWS_WITH(vision::CnnClassifier({.channels = {}}), Catch::Contains("at least one block"));
}

TEST_CASE("the CNN baseline learns a small batch and passes an f64 gradient check", "[vision]") {
  manual_seed(3);
  vision::CnnClassifier cnn({.channels = {6, 8}, .convs_per_block = 1, .image_size = 8, .in_channels = 1,
                             .num_classes = 3});
  Generator g(4);
  Tensor images = randn({12, 1, 8, 8}, {}, &g);
  Tensor labels = tensor(std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2});
  optim::SGD opt(cnn.named_parameters(), {.lr = 0.1, .momentum = 0.9});
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(cnn.forward(images), labels);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  CHECK(last < 0.5 * first);

  cnn.to(kF64);
  Tensor x = test::grad_input({3, 1, 8, 8}, 6);
  TensorList inputs{x};
  for (const Tensor& p : cnn.parameters()) inputs.push_back(p);
  for (bool training : {true, false}) {
    INFO("training " << training);
    cnn.train(training);
    // Train mode updates the running statistics on every call; eval reads them: both are fine
    // for gradcheck, which only needs each call to be the same function of x and the parameters.
    auto r = testing::gradcheck([&](const TensorList& in) { return cnn.forward(in[0]); }, inputs);
    INFO(r.message);
    CHECK(r.ok);
  }
}

TEST_CASE("make_image_classifier builds every name with the data's spec", "[vision]") {
  for (const std::string& name : vision::image_classifier_names()) {
    INFO(name);
    const vision::ImageSpec preset = vision::default_spec(name);
    CHECK(preset.num_classes >= 1);
    if (name == "cnn") {
      auto m = vision::make_image_classifier(name, {.num_classes = 10, .image_size = 28, .in_channels = 1});
      CHECK(m->spec().image_size == 28);
      CHECK(m->forward(randn({2, 1, 28, 28})).shape() == Shape{2, 10});
    } else {
      nn::init::SkipRandomInit skip;  // full-size presets: structure only
      auto m = vision::make_image_classifier(name, {.num_classes = 7, .image_size = preset.image_size, .in_channels = 2});
      CHECK(m->spec().num_classes == 7);
      CHECK(m->spec().in_channels == 2);
    }
  }
  auto vil = vision::make_image_classifier("vil:l1,h2,d16,n1,s1,g1,p2,f7,a0,r4_l2,h2,d32,n1,s0,g0,p2,f7,a0",
                                           {.num_classes = 10, .image_size = 28, .in_channels = 1});
  CHECK(vil->forward(randn({1, 1, 28, 28})).shape() == Shape{1, 10});
  CHECK(vision::default_spec("vil_ls_medium_384").image_size == 384);
  CHECK_THROWS_WITH(vision::make_image_classifier("resnet50", {}), Catch::Contains("unknown model 'resnet50'") &&
                                                                      Catch::Contains("cvt_ls_13_224"));
  CHECK_THROWS_WITH(vision::make_image_classifier("vil:l1,h3,q2", {}), Catch::Contains("unknown field 'q2'"));
  CHECK_THROWS_WITH(vision::make_image_classifier("vil_ls_medium_224", {.num_classes = 10, .image_size = 28}),
                    Catch::Contains("multiple of the long-short window"));
}

TEST_CASE("ClassifierOptions set what a family has and refuse what it lacks", "[vision]") {
  const std::string arch = "vil:l1,h2,d16,n2,s1,g1,p2,f7,a0,r4_l2,h2,d32,n1,s0,g0,p2,f7,a0";
  const vision::ImageSpec spec{.num_classes = 10, .image_size = 28, .in_channels = 1};
  CHECK(vision::classifier_family(arch) == vision::ClassifierFamily::ViL);
  CHECK(vision::classifier_family("cvt_ls_13_224") == vision::ClassifierFamily::CvTLS);
  CHECK(vision::classifier_family("cnn") == vision::ClassifierFamily::Cnn);
  CHECK_THROWS_WITH(vision::classifier_family("vit"), Catch::Contains("unknown model 'vit'"));
  // ViL: DualLN off drops both LayerNorms of every long-short layer (two stage-1 blocks).
  auto with = vision::make_image_classifier(arch, spec);
  auto without = vision::make_image_classifier(arch, spec, {.dual_ln = false});
  CHECK(with->parameter_count() - without->parameter_count() == 2 * 4 * 16);
  for (const auto& [name, t] : without->named_parameters()) CHECK(name.find("dual_ln") == std::string::npos);
  const auto configured = vision::make_image_classifier(arch, spec, {.drop_path = 0.2, .qkv_bias = false});
  auto& vil = dynamic_cast<vision::ViLClassifier&>(*configured);  // (ASan: a reference into a temporary)
  CHECK(vil.options().drop_path_rate == 0.2);
  CHECK_FALSE(vil.options().qkv_bias);
  CHECK(dynamic_cast<vision::ViLClassifier&>(*vision::make_image_classifier(arch, spec)).options().drop_path_rate == 0.0);
  {
    nn::init::SkipRandomInit skip;  // full-size presets: structure only
    // A preset keeps its own rate unless told otherwise.
    auto preset = vision::make_image_classifier("vil_ls_medium_224", {.num_classes = 10});
    CHECK(dynamic_cast<vision::ViLClassifier&>(*preset).options().drop_path_rate == 0.3);
    auto cvt = vision::make_image_classifier("cvt_ls_13_224", {.num_classes = 10},
                                             {.drop_path = 0.2, .dual_ln = false, .kv_stride = 2, .dp_kernel = 5});
    const auto& o = dynamic_cast<vision::CvTLSClassifier&>(*cvt).options();
    CHECK((o.stages.back().drop_path == 0.2 && o.stages.front().drop_path == 0.0));
    CHECK((!o.dual_ln && o.kv_stride == 2 && o.dp_kernel == 5 && !o.batch_norm_projection));
  }
  CHECK_THROWS_WITH(vision::make_image_classifier("cnn", spec, {.dual_ln = false}),
                    Catch::Contains("'cnn': option dual_ln does not apply"));
  CHECK_THROWS_WITH(vision::make_image_classifier(arch, spec, {.kv_stride = 2}), Catch::Contains("option kv_stride does not apply (CvT*-LS only)"));
  CHECK_NOTHROW(vision::make_image_classifier("cnn", spec, {.drop_rate = 0.1}));
}

TEST_CASE("measure_cost counts parameters and the multiply-adds of one image", "[vision]") {
  // CNN, 8×8 grey, widths (6, 8), one conv per block: conv 1·6·9 per output position on 8×8,
  // pool to 4×4, conv 6·8·9 per position on 4×4, pool, global average, Linear 8 → 3.
  vision::CnnClassifier cnn({.channels = {6, 8}, .convs_per_block = 1, .image_size = 8, .in_channels = 1,
                             .num_classes = 3});
  cnn.train();
  const vision::ModelCost cost = vision::measure_cost(cnn);
  CHECK(cost.multiply_adds == 8 * 8 * 6 * 1 * 9 + 4 * 4 * 8 * 6 * 9 + 8 * 3);
  CHECK(cost.parameters == 6 * 9 + 2 * 6 + 8 * 6 * 9 + 2 * 8 + 8 * 3 + 3);
  CHECK(cnn.is_training());  // the mode is restored
  CHECK(cost.gflops() == Approx(double(cost.multiply_adds) * 1e-9));
}

TEST_CASE("measured multiply-adds equal the analytic count for small ViL and CvT*-LS models", "[vision]") {
  const vision::ViLOptions vil{.arch = "l1,h2,d16,n2,s1,g1,p2,f7,a0,r4_l2,h2,d32,n1,s0,g1,p2,f7,a0_l3,h4,d32,n1,s0,g0,p1,a1",
                               .image_size = 28, .in_channels = 1, .num_classes = 10};
  vision::ViLClassifier vm(vil);
  const vision::ModelCost vc = vision::measure_cost(vm);
  CHECK(vc.multiply_adds == vil_counts(vil).macs);
  CHECK(vc.parameters == vil_counts(vil).params);
  for (int64_t kv_stride : {1, 2}) {
    INFO("kv_stride " << kv_stride);
    vision::CvTLSOptions o = vision::cvt_ls_preset("cvt_ls_13_224");
    o.image_size = 32;  // maps 8, 4, 2
    o.in_channels = 1;
    o.num_classes = 10;
    o.kv_stride = kv_stride;
    o.batch_norm_projection = kv_stride == 2;
    o.stages[0].window = 4;
    o.stages[0].rank = 4;
    o.stages[1].depth = 1;
    o.stages[2].depth = 1;
    vision::CvTLSClassifier cm(o);
    const vision::ModelCost cc = vision::measure_cost(cm);
    CHECK(cc.multiply_adds == cvt_counts(o).macs);
    CHECK(cc.parameters == cvt_counts(o).params);
  }
}

TEST_CASE("preset costs: exact parameter counts and GFLOPs against the papers", "[vision]") {
  // ViL-LS (paper Table 5: 39.8M / 8.7G, 55.8M / 13.4G, 39.9M / 28.7G). Our count (8.689G,
  // 13.345G, 28.647G) takes only the products; the papers' counters (ViL's compute_macs hooks in
  // a ptflops-style counter) also add biases, norms and activations, a few elementwise operations
  // per token and channel against 12·d multiply-adds per token and channel in every block: under
  // 0.5% here. Hence |ours − paper| ≤ 0.05G (the paper's rounding) + 0.5%.
  struct Paper {
    std::string name;
    double params_m, gflops;
  };
  nn::init::SkipRandomInit skip;  // counting only
  for (const Paper& p : std::vector<Paper>{{"vil_ls_medium_224", 39.8, 8.7}, {"vil_ls_base_224", 55.8, 13.4},
                                           {"vil_ls_medium_384", 39.9, 28.7}}) {
    INFO(p.name);
    const vision::ViLOptions o = vision::vil_preset(p.name);
    vision::ViLClassifier model(o);
    const Counts c = vil_counts(o);
    CHECK(model.parameter_count() == c.params);
    CHECK(std::fabs(double(c.params) * 1e-6 - p.params_m) <= 0.05);  // the paper rounds to 0.1M
    CHECK(std::fabs(double(c.macs) * 1e-9 - p.gflops) <= 0.05 + 0.005 * p.gflops);
  }
  // CvT*-LS (paper Table 5: 20.3M / 4.9G, 32.1M / 7.9G, 32.1M / 23.9G, 32.1M / 34.2G). No code was
  // released; our documented choices (cvt_ls_attention.h) give 20.17M / 4.92G, 31.90M / 7.84G,
  // 31.90M / 23.71G, 32.09M / 34.62G. The paper's W_P realisation is unknown (its parameter count
  // does not grow with r: 32.1M at both r = (64, 16, 4) and (128, 32, 8), where ours adds 0.19M),
  // so parameters are held to 1% and multiply-adds to 1.5% of the published numbers.
  for (const Paper& p : std::vector<Paper>{{"cvt_ls_13_224", 20.3, 4.9}, {"cvt_ls_21_224", 32.1, 7.9},
                                           {"cvt_ls_21_384", 32.1, 23.9}, {"cvt_ls_21_448", 32.1, 34.2}}) {
    INFO(p.name);
    const vision::CvTLSOptions o = vision::cvt_ls_preset(p.name);
    vision::CvTLSClassifier model(o);
    const Counts c = cvt_counts(o);
    CHECK(model.parameter_count() == c.params);
    CHECK(std::fabs(double(c.params) * 1e-6 / p.params_m - 1) <= 0.01);
    CHECK(std::fabs(double(c.macs) * 1e-9 / p.gflops - 1) <= 0.015);
  }
}

// Not in the default run (seconds of forward passes at full resolution): the counter on every
// preset equals the analytic count. Run with: test_vision_models "[.preset_flops]".
TEST_CASE("measure_cost of every preset equals its analytic count", "[.preset_flops]") {
  for (const std::string& name : vision::vil_preset_names()) {
    vision::ViLClassifier model(vision::vil_preset(name));
    const vision::ModelCost cost = vision::measure_cost(model);
    WARN(name << ": " << cost.parameters << " parameters, " << cost.multiply_adds << " multiply-adds");
    CHECK(cost.multiply_adds == vil_counts(vision::vil_preset(name)).macs);
  }
  for (const std::string& name : vision::cvt_ls_preset_names()) {
    vision::CvTLSClassifier model(vision::cvt_ls_preset(name));
    const vision::ModelCost cost = vision::measure_cost(model);
    WARN(name << ": " << cost.parameters << " parameters, " << cost.multiply_adds << " multiply-adds");
    CHECK(cost.multiply_adds == cvt_counts(vision::cvt_ls_preset(name)).macs);
  }
}
