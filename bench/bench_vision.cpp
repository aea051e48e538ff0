// bench_vision: training speed (images/s) and peak memory of the vision models on the CPU —
// ViL-LS, CvT*-LS and the CNN baseline at small-image sizes that train on a CPU — and the
// forward GFLOPs per image of every preset (measure_cost). bench/torch_vision.py is the PyTorch
// side (the same models written from the spec, loading this program's weights and inputs);
// bench/run_vision.py runs both and writes the "vision speed on the CPU" section of
// bench/RESULTS.md.
//
// Cases (random N(0,1) images, labels (7·b + 3) mod classes, weights from lsf::manual_seed(kSeed)):
//   cnn/28       the CNN baseline (channels 32, 64, 128; 2 convs per block), 28×28 grey, 10
//                classes, batch 64 (Fashion-MNIST's shape)
//   vil-ls/32    ViL-LS, 32×32 RGB, 10 classes, batch 64: the first three stages of
//                ViL-LS-Medium at depth 1, 2, 2 on 16, 8, 4 maps (w 4 so the maps hold
//                windows): kArchVil below
//   cvt-ls/32    CvT*-LS, 32×32 RGB, 10 classes, batch 64: CvT-13's widths (64/192/384, heads
//                1/3/6) at depth 1, 2, 2 with 3×3 stride-2 token embeddings (16, 8, 4 maps),
//                w (4, 4, 2), r (16, 8, 4), a CLS in the last stage; the documented defaults
//                of the open choices (kv_stride 1, weight-standardised 3×3 W_P)
// No dropout or drop path (0 everywhere), so the step is deterministic.
//
// One training step = drop every gradient (set to none), logits = model(x) in train mode (batch
// norm on batch statistics), loss = cross_entropy(logits, labels), loss.backward(), AdamW step
// (lr 1e-3, weight decay 0.05, one group). Method (bench_timing.h, as the other benchmarks):
// --warmup steps (the first creates the optimizer state), then samples of one step each until
// ≥ --min-samples and ≥ --sample-time seconds, or --max-samples. Reported per case: the median,
// min and max ms per step; images/s = batch / step time (median and fastest). Peak memory:
// after the timing, lsf::reset_peak_memory() and one more step; peak_bytes = the allocator's
// high-water mark of live tensor bytes during that step (weights, optimizer state, inputs
// included: baseline_bytes before it), and rss_peak_bytes = the process's VmHWM (peak resident
// set) at the end, which also counts the runtime and the allocator's cache.
//
// --dump DIR writes, per selected case, DIR/<case with / as _>.weights.safetensors (the
// model's state_dict before any step) and .io.safetensors: x, labels, the step's logits and
// loss, and grad.<name> of every parameter after the first backward (the weights not yet
// updated), and after.<buffer> for the batch-norm running statistics after that forward;
// metadata: case, model, image_size, in_channels, num_classes, batch, arch / config text.
// --cost prints measure_cost (parameters, multiply-adds of one 1-image forward) of every
// preset of make_image_classifier (structure only: SkipRandomInit).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <lsformer/lsformer.h>

#include "bench_cli.h"
#include "bench_timing.h"

namespace {

constexpr uint64_t kSeed = 1234;

constexpr const char* kArchVil =
    "l1,h3,d96,n1,s1,g1,p2,f4,a0,r8_l2,h3,d192,n2,s1,g1,p2,f4,a0,r8_l3,h6,d384,n2,s0,g0,p2,f4,a0,r0";

// ---- options, from one table (so --help cannot drift from the parser) ----------------------

struct Options {
  int threads = 0;  // 0: all processors
  std::string filter;
  double sample_s = 5.0;  // sampling time per case
  int warmup = 2;
  int min_samples = 5;
  int max_samples = 200;
  double min_sample_ms = 1.0;
  bool cpu_clock = false;
  bool list = false;
  bool meta = false;  // --meta
  bool cost = false;
  int64_t batch = 0;  // 0: the case's batch
  std::string dump;
};

using Flag = lsf::bench::Flag<Options>;

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = [] {
    std::vector<Flag> t = lsf::bench::common_flags<Options>("only cases whose name contains TEXT (cnn, vil, cvt)");
    std::vector<Flag> own = {
        lsf::bench::meta_flag<Options>(),
        {"--sample-time", "SECONDS", "sampling time per case (default 5.0)",
         [](Options& o, const std::string& v) { o.sample_s = lsf::bench::number_at_least(v, 0); }},
        {"--batch", "B", "batch size of every case (default: the case's, 64)",
         [](Options& o, const std::string& v) { o.batch = std::stoll(v); }},
        {"--dump", "DIR", "write each selected case's weights, inputs, logits, loss and gradients to DIR",
         [](Options& o, const std::string& v) { o.dump = v; }},
        {"--cost", nullptr, "print parameters and forward GFLOPs of every preset (measure_cost) and exit",
         [](Options& o, const std::string&) { o.cost = true; }},
    };
    t.insert(t.end(), own.begin(), own.end());
    return t;
  }();
  return table;
}

// ---- the cases -------------------------------------------------------------------------------

struct Case {
  std::string name;   // "cnn/28"
  std::string model;  // "cnn", "vil", "cvt"
  int64_t image_size, in_channels, num_classes, batch;
  std::string config;  // arch string or a description, for the dump's metadata
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"cnn/28", "cnn", 28, 1, 10, 64, "channels 32,64,128; convs_per_block 2"},
      {"vil-ls/32", "vil", 32, 3, 10, 64, kArchVil},
      {"cvt-ls/32", "cvt", 32, 3, 10, 64,
       "stages (k3 s2 p1, d64 h1 n1 w4 r16) (k3 s2 p1, d192 h3 n2 w4 r8) (k3 s2 p1, d384 h6 n2 w2 r4 cls); kv_stride 1, "
       "dp_kernel 3, weight-standardised W_P"},
  };
  return c;
}

lsf::vision::CvTLSOptions cvt_options(const Case& c) {
  using lsf::vision::CvTLSStageConfig;
  lsf::vision::CvTLSOptions o;
  o.stages = {
      CvTLSStageConfig{.patch_size = 3, .patch_stride = 2, .patch_padding = 1, .dim = 64, .heads = 1, .depth = 1,
                       .window = 4, .rank = 16},
      CvTLSStageConfig{.patch_size = 3, .patch_stride = 2, .patch_padding = 1, .dim = 192, .heads = 3, .depth = 2,
                       .window = 4, .rank = 8},
      CvTLSStageConfig{.patch_size = 3, .patch_stride = 2, .patch_padding = 1, .dim = 384, .heads = 6, .depth = 2,
                       .window = 2, .rank = 4, .cls_token = true},
  };
  o.image_size = c.image_size;
  o.in_channels = c.in_channels;
  o.num_classes = c.num_classes;
  return o;
}

std::shared_ptr<lsf::vision::ImageClassifier> make_model(const Case& c) {
  lsf::manual_seed(kSeed);
  const lsf::vision::ImageSpec spec{c.num_classes, c.image_size, c.in_channels};
  if (c.model == "cnn") return lsf::vision::make_image_classifier("cnn", spec);
  if (c.model == "vil") return lsf::vision::make_image_classifier(std::string("vil:") + kArchVil, spec);
  return std::make_shared<lsf::vision::CvTLSClassifier>(cvt_options(c));
}

// The model, its optimizer, the inputs and one training step.
struct Prepared {
  std::shared_ptr<lsf::vision::ImageClassifier> model;
  std::unique_ptr<lsf::optim::AdamW> optimizer;
  lsf::Tensor x, labels;  // [B, C, S, S] f32; [B] i64

  lsf::Tensor forward_backward(lsf::Tensor* logits_out = nullptr) {
    model->zero_grad();
    lsf::Tensor logits = model->forward(x);
    lsf::Tensor loss = lsf::cross_entropy(logits, labels);
    loss.backward();
    if (logits_out != nullptr) *logits_out = logits.detach();
    return loss;
  }
  void step() {
    (void)forward_backward();
    optimizer->step();
  }
};

Prepared prepare(const Case& c, int64_t batch) {
  Prepared p;
  p.model = make_model(c);
  p.model->train();
  p.optimizer = std::make_unique<lsf::optim::AdamW>(p.model->named_parameters(),
                                                    lsf::optim::AdamWOptions{.lr = 1e-3, .weight_decay = 0.05});
  lsf::Generator gen(kSeed);
  p.x = lsf::randn({batch, c.in_channels, c.image_size, c.image_size}, {}, &gen);
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) labels[size_t(b)] = (7 * b + 3) % c.num_classes;
  p.labels = lsf::tensor(labels, {batch});
  return p;
}

// ---- output ----------------------------------------------------------------------------------

// The process's peak resident set (VmHWM), in bytes; 0 when /proc is not there.
int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:   123 kB"
  }
  return 0;
}

void measure(const Options& opt, const Case& c) {
  const int64_t batch = opt.batch > 0 ? opt.batch : c.batch;
  Prepared p = prepare(c, batch);
  const lsf::bench::Timing t =
      lsf::bench::time_call([&p] { p.step(); }, lsf::bench::sampling_plan(opt, opt.sample_s));
  p.model->zero_grad();  // as the step's first action: the baseline holds no gradients
  lsf::reset_peak_memory();
  const int64_t baseline = lsf::memory_stats().current_bytes;
  p.step();
  const lsf::MemoryStats mem = lsf::memory_stats();
  std::printf("{\"impl\": \"lsformer\", \"case\": \"%s\", \"model\": \"%s\", \"image_size\": %lld, \"in_channels\": %lld, "
              "\"num_classes\": %lld, \"batch\": %lld, \"parameters\": %lld, \"median_ms\": %.6f, \"min_ms\": %.6f, "
              "\"max_ms\": %.6f, \"samples\": %d, \"threads\": %d, \"clock\": \"%s\", \"images_per_s\": %.3f, "
              "\"images_per_s_fastest\": %.3f, \"peak_bytes\": %lld, \"baseline_bytes\": %lld, \"rss_peak_bytes\": %lld}\n",
              c.name.c_str(), c.model.c_str(), (long long)c.image_size, (long long)c.in_channels,
              (long long)c.num_classes, (long long)batch, (long long)p.model->parameter_count(), t.median_ms, t.min_ms,
              t.max_ms, t.samples, lsf::get_num_threads(), opt.cpu_clock ? "cpu" : "wall",
              double(batch) * 1e3 / t.median_ms, double(batch) * 1e3 / t.min_ms, (long long)mem.peak_bytes,
              (long long)baseline, (long long)peak_rss_bytes());
  std::fflush(stdout);
}

std::string file_stem(const Case& c) {
  std::string s = c.name;
  std::replace(s.begin(), s.end(), '/', '_');
  return s;
}

void dump(const Options& opt, const Case& c) {
  const int64_t batch = opt.batch > 0 ? opt.batch : c.batch;
  Prepared p = prepare(c, batch);
  const std::string stem = opt.dump + "/" + file_stem(c);
  const lsf::Metadata meta = {{"case", c.name},
                              {"model", c.model},
                              {"image_size", std::to_string(c.image_size)},
                              {"in_channels", std::to_string(c.in_channels)},
                              {"num_classes", std::to_string(c.num_classes)},
                              {"batch", std::to_string(batch)},
                              {"config", c.config}};
  p.model->save(stem + ".weights.safetensors", meta);
  lsf::Tensor logits;
  lsf::Tensor loss = p.forward_backward(&logits);
  lsf::NamedTensors io = {{"x", p.x}, {"labels", p.labels}, {"logits", logits}, {"loss", loss.detach()}};
  for (const auto& [name, param] : p.model->named_parameters()) io.push_back({"grad." + name, param.grad()});
  for (const auto& [name, buffer] : p.model->named_buffers(/*persistent_only=*/true)) {
    if (name.find("running_") != std::string::npos) io.push_back({"after." + name, buffer});
  }
  lsf::save_safetensors(stem + ".io.safetensors", io, meta);
  std::fprintf(stderr, "bench_vision: wrote %s.weights.safetensors and %s.io.safetensors\n", stem.c_str(),
               stem.c_str());
}

// measure_cost of every preset, one JSON line each.
void print_costs() {
  for (const std::string& name : lsf::vision::image_classifier_names()) {
    if (name == "cnn") continue;
    const lsf::vision::ImageSpec spec = lsf::vision::default_spec(name);
    std::shared_ptr<lsf::vision::ImageClassifier> model;
    {
      lsf::nn::init::SkipRandomInit skip;  // structure only: the count does not depend on values
      model = lsf::vision::make_image_classifier(name, spec);
    }
    const lsf::vision::ModelCost cost = lsf::vision::measure_cost(*model);
    std::printf("{\"impl\": \"lsformer\", \"preset\": \"%s\", \"image_size\": %lld, \"parameters\": %lld, "
                "\"multiply_adds\": %lld, \"gflops\": %.4f}\n",
                name.c_str(), (long long)spec.image_size, (long long)cost.parameters, (long long)cost.multiply_adds,
                cost.gflops());
    std::fflush(stdout);
  }
}

bool selected(const Options& opt, const Case& c) {
  return lsf::bench::case_selected(opt.filter, c.name);
}

int run(const Options& opt) {
  std::vector<std::string> names;
  for (const Case& c : cases()) names.push_back(c.name);
  const std::vector<std::string> chosen = lsf::bench::filtered_cases(names, opt.filter);
  if (opt.list) {
    for (const std::string& n : chosen) std::printf("%s\n", n.c_str());
    return 0;
  }
  LSF_CHECK(opt.batch >= 0) << "--batch must be positive, got " << opt.batch;
  lsf::set_num_threads(opt.threads > 0 ? opt.threads : int(std::max(1u, std::thread::hardware_concurrency())));
  lsf::bench::print_meta_line();
  if (opt.meta) return 0;
  if (opt.cost) {
    print_costs();
    return 0;
  }
  for (const Case& c : cases()) {
    if (!selected(opt, c)) continue;
    if (!opt.dump.empty()) {
      dump(opt, c);
      continue;
    }
    measure(opt, c);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return lsf::bench::run_main<Options>(argc, argv, "bench_vision",
                                       "usage: bench_vision [options]   (JSON lines on stdout)", flags(), run);
}
