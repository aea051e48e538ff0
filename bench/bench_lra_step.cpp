// bench_lra_step: the whole LRA ListOps training step of lsformer (issue #17) on the CPU;
// bench/torch_lra_step.py is the PyTorch implementation of the same model and optimizer that
// bench/run_lra_step.py times side by side with it (the "lra-step" section of bench/RESULTS.md).
//
// Case train/listops: lra::LraClassifier with the ListOps settings of configs/lra/listops_ls.json
// (docs/transformer-ls.md §2.4–2.6): vocab_size 512, max_seq_len 2048, d 64, 2 heads, 2 layers,
// FFN 128, long-short attention w 8, r 32 (fused core), pooling "cls" (the CLS in the last layer
// only), head Linear(64→128) → ReLU → Linear(128→10); dropout and attention dropout 0 (as the
// config; and so that the PyTorch run computes the same function). Batch 32, every batch padded
// to n = 2048 with a seeded real length per example, uniform in [500, 2048] (the paper's ListOps
// expressions are 500–2000 tokens long, padded to 2048), so the mask matters: real tokens are
// ids in [1, 16) (the ListOps vocabulary, data/listops.h; 0 is the padding id), labels in [0, 10).
// The steps cycle through kBatches such batches.
//
// One step = optimizer.zero_grad() (set to none), logits = model(tokens, mask),
// loss = cross_entropy(logits, labels) (mean over the batch), loss.backward(), AdamW step with the
// config's hyper-parameters: lr 1e-4 (the OneCycle peak; held constant here, a schedule is one
// scalar per step on either side), betas (0.9, 0.999), eps 1e-6, weight decay 0 (ListOps, §2.5).
// Reported: per-step time, samples/s = 32 / step time, peak memory.
//
// Weights: the model is built after lsf::manual_seed(kSeed) and its parameters are then redrawn
// (gate_init) so that every path matters to the loss and the gradients: Linear weights
// N(0, 1/fan_in), biases N(0, 0.1²), LayerNorm gains N(1, 0.1²) and shifts N(0, 0.1²), both
// embedding tables N(0, 0.5²), the CLS N(0, 1). (The §2.6 initialisation, embeddings N(0, 0.02²)
// and a zero CLS, gives a weaker correctness gate; the speed does not depend on values.)
//
// --dump DIR: DIR/weights.safetensors (Module::save: the official state_dict names, the initial
// weights) and DIR/io.safetensors: "tokens.<k>", "mask.<k>" (u8, 1 = real token), "labels.<k>"
// for the kBatches batches the steps cycle through; and, after one step on batch 0 from the
// dumped weights, "logits", "loss", "grad.<name>" of every parameter (after backward) and
// "after.<name>" (every parameter after the AdamW update). Metadata: the configuration and the
// optimizer's hyper-parameters, which torch_lra_step.py reads rather than repeating them.
//
// Method: bench_timing.h (warm-up, calls per sample, median, min, max), wall-clock time, or the
// process CPU time with --clock cpu. Memory: the allocator's high-water mark during the timed
// steps (peak_bytes; the live bytes before the first step: baseline_bytes), and the process's
// resident set: VmRSS before the first step and VmHWM (peak) after the last one, read from
// /proc/self/status exactly as torch_lra_step.py reads its own. LSF_PROFILE=1: after the timed
// steps, kProfileSteps more under the built-in profiler, its tables on stderr.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <lsformer/lsformer.h>

#include "bench_cli.h"
#include "bench_timing.h"
#include "lsformer/engine/machine_limits.h"

namespace {

constexpr uint64_t kSeed = 1234;      // the ListOps config's train.seed
constexpr int64_t kBatches = 4;       // distinct batches the timed steps cycle through
constexpr int64_t kBatch = 32;        // examples per step
constexpr int64_t kLength = 2048;     // n: every batch padded to it
constexpr int64_t kMinReal = 500;     // default --min-real: real tokens per example uniform in [min_real, kLength]
constexpr int64_t kDataVocab = 16;    // ListOps token ids (0 = padding), data/listops.h
constexpr int kProfileSteps = 5;      // LSF_PROFILE=1: steps under the profiler after the timing

// configs/lra/listops_ls.json's optimizer (docs/transformer-ls.md §2.5, §2.6).
constexpr double kLr = 1e-4, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-6, kWeightDecay = 0.0;

struct Options {
  int threads = 0;
  std::string filter;
  double sample_s = 10.0;  // sampling time per measurement
  int warmup = 1;
  int min_samples = 5;
  int max_samples = 50;
  double min_sample_ms = 1.0;
  bool cpu_clock = false;
  bool list = false;
  bool meta = false;  // --meta
  std::string dump;
  int64_t min_real = kMinReal;  // real tokens per example: uniform in [min_real, kLength]
  bool padded = false;          // the model's padded path (LraModelOptions::packed = false)
};

using Flag = lsf::bench::Flag<Options>;

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = [] {
    std::vector<Flag> t = lsf::bench::common_flags<Options>("only cases whose name contains TEXT (train/listops)");
    std::vector<Flag> own = {
        lsf::bench::meta_flag<Options>(),
        {"--sample-time", "SECONDS", "sampling time per measurement (default 10)",
         [](Options& o, const std::string& v) { o.sample_s = lsf::bench::number_at_least(v, 0); }},
        {"--dump", "DIR",
         "write the initial weights, the batches, and one step's loss, gradients and updated parameters to DIR "
         "(no timing)",
         [](Options& o, const std::string& v) { o.dump = v; }},
        {"--min-real", "N",
         "real tokens per example uniform in [N, 2048] (default 500; 2048: no padding)",
         [](Options& o, const std::string& v) {
           o.min_real = std::stoll(v);
           if (o.min_real < 1 || o.min_real > kLength)
             throw std::invalid_argument("--min-real expects an integer in [1, 2048], got " + v);
         }},
        {"--padded", nullptr,
         "run the model's padded path (every position-wise layer on all 2048 positions, as the official "
         "code) instead of the packed one (real tokens only)",
         [](Options& o, const std::string&) { o.padded = true; }},
    };
    t.insert(t.end(), own.begin(), own.end());
    return t;
  }();
  return table;
}

// configs/lra/listops_ls.json's model, dropout 0.
lsf::lra::LraModelOptions model_options(const Options& opt) {
  lsf::lra::LraModelOptions o;
  o.vocab_size = 512;
  o.max_seq_len = kLength;
  o.dim = 64;
  o.heads = 2;
  o.layers = 2;
  o.ffn_dim = 128;
  o.num_classes = 10;
  o.attention = lsf::lra::AttentionKind::LongShort;
  o.window = 8;
  o.rank = 32;
  o.dropout = 0.0;
  o.attention_dropout = 0.0;
  o.pooling = lsf::lra::Pooling::Cls;
  o.head_hidden = 128;
  o.packed = !opt.padded;
  return o;
}

// The configuration's JSON fields.
std::string config_fields(const lsf::lra::LraModelOptions& o, int64_t min_real) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "\"batch\": %lld, \"n\": %lld, \"dim\": %lld, \"heads\": %lld, \"layers\": %lld, \"ffn_dim\": %lld, "
                "\"vocab_size\": %lld, \"window\": %lld, \"rank\": %lld, \"num_classes\": %lld, \"pooling\": \"%s\", "
                "\"head_hidden\": %lld, \"min_real\": %lld, \"lr\": %g, \"beta1\": %g, \"beta2\": %g, \"eps\": %g, "
                "\"weight_decay\": %g, \"packed\": %s",
                (long long)kBatch, (long long)kLength, (long long)o.dim, (long long)o.heads, (long long)o.layers,
                (long long)o.ffn_dim, (long long)o.vocab_size, (long long)o.window, (long long)o.rank,
                (long long)o.num_classes, lsf::lra::to_string(o.pooling), (long long)o.head_hidden,
                (long long)min_real, kLr, kBeta1, kBeta2, kEps, kWeightDecay, o.packed ? "true" : "false");
  return buf;
}

// ---- the model, its optimizer and its data ----------------------------------------------------

// Parameters redrawn so that every path matters to the loss (see the header).
void gate_init(lsf::lra::LraClassifier& model) {
  lsf::Generator g(kSeed + 1);
  lsf::NoGradGuard no_grad;
  for (const auto& [name, t] : model.named_parameters()) {
    const bool norm = name.find("norm") != std::string::npos || name.find("dual_ln") != std::string::npos;
    if (name.ends_with("cls_embed")) lsf::nn::init::normal_(t, 0.0, 1.0, &g);
    else if (name.find("embeddings") != std::string::npos) lsf::nn::init::normal_(t, 0.0, 0.5, &g);
    else if (norm) lsf::nn::init::normal_(t, name.ends_with("weight") ? 1.0 : 0.0, 0.1, &g);
    else if (name.ends_with("bias")) lsf::nn::init::normal_(t, 0.0, 0.1, &g);
    else lsf::nn::init::normal_(t, 0.0, 1.0 / std::sqrt(double(t.size(1))), &g);
  }
}

std::unique_ptr<lsf::lra::LraClassifier> make_model(const Options& opt) {
  lsf::manual_seed(kSeed);
  auto model = std::make_unique<lsf::lra::LraClassifier>(model_options(opt));
  gate_init(*model);
  model->train();  // dropout is 0: the same function as eval, and the mode a training step runs in
  return model;
}

lsf::optim::AdamW make_optimizer(const lsf::lra::LraClassifier& model) {
  return lsf::optim::AdamW(model.named_parameters(),
                           {.lr = kLr, .betas = {kBeta1, kBeta2}, .eps = kEps, .weight_decay = kWeightDecay});
}

struct Batch {
  lsf::Tensor tokens;  // [B, n] i64, 0 after each example's real length
  lsf::Tensor mask;    // [B, n] bool, true for real tokens
  lsf::Tensor labels;  // [B] i64 in [0, num_classes)
};

// Batch k: per example a real length uniform in [min_real, kLength], ids uniform in [1, 16) up to
// it, 0 after it; a label uniform in [0, classes). Drawn from std::mt19937_64's raw output (its
// sequence is fixed by the standard; the distributions of <random> are not).
Batch make_batch(int64_t k, int64_t classes, int64_t min_real) {
  std::mt19937_64 rng(kSeed + 100 + uint64_t(k));
  std::vector<int64_t> tokens(size_t(kBatch * kLength), 0);
  std::vector<int64_t> labels(size_t(kBatch), 0);
  std::vector<uint8_t> mask(size_t(kBatch * kLength), 0);
  for (int64_t b = 0; b < kBatch; ++b) {
    const int64_t real = min_real + int64_t(rng() % uint64_t(kLength - min_real + 1));
    for (int64_t t = 0; t < real; ++t) {
      tokens[size_t(b * kLength + t)] = 1 + int64_t(rng() % uint64_t(kDataVocab - 1));
      mask[size_t(b * kLength + t)] = 1;
    }
    labels[size_t(b)] = int64_t(rng() % uint64_t(classes));
  }
  return {lsf::tensor(tokens, {kBatch, kLength}), lsf::tensor(mask, {kBatch, kLength}).to(lsf::kBool),
          lsf::tensor(labels, {kBatch})};
}

std::vector<Batch> make_batches(int64_t classes, int64_t min_real) {
  std::vector<Batch> batches;
  for (int64_t k = 0; k < kBatches; ++k) batches.push_back(make_batch(k, classes, min_real));
  return batches;
}

// One training step (see the header); returns the logits and the loss.
std::pair<lsf::Tensor, lsf::Tensor> train_step(lsf::lra::LraClassifier& model, lsf::optim::AdamW& adamw,
                                               const Batch& batch) {
  adamw.zero_grad();
  lsf::Tensor logits = model.forward(batch.tokens, batch.mask);  // [B, classes]
  lsf::Tensor loss;
  {
    lsf::profiler::PhaseScope phase("loss");
    loss = lsf::cross_entropy(logits, batch.labels);
  }
  loss.backward();
  lsf::profiler::PhaseScope phase("optimizer");
  adamw.step();
  return {logits, loss};
}

// ---- the case ----------------------------------------------------------------------------------

// v with enough digits to read back the same double (the dump's metadata is text).
std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

using lsf::bench::Timing;

void time_case(const Options& opt) {
  auto model = make_model(opt);
  lsf::optim::AdamW adamw = make_optimizer(*model);
  const std::vector<Batch> batches = make_batches(model->options().num_classes, opt.min_real);
  int64_t steps = 0;
  auto step = [&] { (void)train_step(*model, adamw, batches[size_t(steps++ % kBatches)]); };
  const int64_t rss_before = lsf::bench::proc_status_bytes("VmRSS");
  lsf::reset_peak_memory();
  const int64_t baseline = lsf::memory_stats().current_bytes;
  const Timing t = lsf::bench::time_call(step, lsf::bench::sampling_plan(opt, opt.sample_s));
  const lsf::MemoryStats mem = lsf::memory_stats();
  const int64_t hwm = lsf::bench::proc_status_bytes("VmHWM");
  // After the timing, so the profiler's own cost never reaches the reported times.
  if (lsf::profiler::enable_from_environment()) {
    lsf::profiler::reset();
    for (int i = 0; i < kProfileSteps; ++i) step();
    lsf::profiler::disable();
    std::fprintf(stderr, "train/listops, %d steps:\n%s", kProfileSteps,
                 lsf::profiler::format_table(lsf::profiler::snapshot(), 40).c_str());
  }
  int64_t real = 0;
  for (const Batch& b : batches) real += lsf::sum(b.mask.to(lsf::kI64)).item<int64_t>();
  std::printf("{\"impl\": \"lsformer\", \"case\": \"train/listops\", %s, \"real_fraction\": %.4f, "
              "\"phase\": \"train_step\", \"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, \"samples\": %d, "
              "\"inner\": %d, \"threads\": %d, \"clock\": \"%s\", \"samples_per_s\": %.4f, "
              "\"best_samples_per_s\": %.4f, \"steps\": %lld, \"peak_bytes\": %lld, \"baseline_bytes\": %lld, "
              "\"extra_bytes\": %lld, \"rss_before_bytes\": %lld, \"rss_peak_bytes\": %lld, \"rss_extra_bytes\": %lld}\n",
              config_fields(model->options(), opt.min_real).c_str(), double(real) / double(kBatches * kBatch * kLength),
              t.median_ms, t.min_ms, t.max_ms, t.samples, t.inner, lsf::get_num_threads(),
              opt.cpu_clock ? "cpu" : "wall", double(kBatch) / (t.median_ms * 1e-3),
              double(kBatch) / (t.min_ms * 1e-3), (long long)steps, (long long)mem.peak_bytes, (long long)baseline,
              (long long)(mem.peak_bytes - baseline), (long long)rss_before, (long long)hwm,
              (long long)(hwm - rss_before));
  std::fflush(stdout);
}

void dump_case(const Options& opt) {
  auto model = make_model(opt);
  lsf::optim::AdamW adamw = make_optimizer(*model);
  const lsf::lra::LraModelOptions& o = model->options();
  const std::vector<Batch> batches = make_batches(o.num_classes, opt.min_real);
  std::filesystem::create_directories(opt.dump);
  const lsf::Metadata meta = {{"case", "train/listops"},
                              {"batch", std::to_string(kBatch)},
                              {"n", std::to_string(kLength)},
                              {"batches", std::to_string(kBatches)},
                              {"vocab_size", std::to_string(o.vocab_size)},
                              {"max_seq_len", std::to_string(o.max_seq_len)},
                              {"dim", std::to_string(o.dim)},
                              {"heads", std::to_string(o.heads)},
                              {"layers", std::to_string(o.layers)},
                              {"ffn_dim", std::to_string(o.ffn_dim)},
                              {"num_classes", std::to_string(o.num_classes)},
                              {"window", std::to_string(o.window)},
                              {"rank", std::to_string(o.rank)},
                              {"pooling", lsf::lra::to_string(o.pooling)},
                              {"head_hidden", std::to_string(o.head_hidden)},
                              {"min_real", std::to_string(opt.min_real)},
                              {"lr", exact(kLr)},
                              {"beta1", exact(kBeta1)},
                              {"beta2", exact(kBeta2)},
                              {"eps", exact(kEps)},
                              {"weight_decay", exact(kWeightDecay)}};
  model->save(opt.dump + "/weights.safetensors", meta);  // before the step: the initial weights
  lsf::NamedTensors io;
  for (int64_t k = 0; k < kBatches; ++k) {
    const std::string s = std::to_string(k);
    io.push_back({"tokens." + s, batches[size_t(k)].tokens});
    io.push_back({"mask." + s, batches[size_t(k)].mask.to(lsf::kU8)});
    io.push_back({"labels." + s, batches[size_t(k)].labels});
  }
  // The step of train_step, with the gradients read between backward and the update.
  adamw.zero_grad();
  lsf::Tensor logits = model->forward(batches[0].tokens, batches[0].mask);
  lsf::Tensor loss = lsf::cross_entropy(logits, batches[0].labels);
  loss.backward();
  io.push_back({"logits", logits.detach()});
  io.push_back({"loss", loss.detach()});
  for (const auto& [name, p] : model->named_parameters()) {
    LSF_CHECK(p.grad().defined()) << "bench_lra_step: parameter " << name << " received no gradient";
    io.push_back({"grad." + name, p.grad().clone()});
  }
  adamw.step();
  for (const auto& [name, p] : model->named_parameters()) io.push_back({"after." + name, p.detach().clone()});
  lsf::save_safetensors(opt.dump + "/io.safetensors", io, meta);
  std::fprintf(stderr, "bench_lra_step: wrote %s/weights.safetensors and %s/io.safetensors (loss %.6f)\n",
               opt.dump.c_str(), opt.dump.c_str(), loss.item<double>());
}

int run(const Options& opt) {
  const std::vector<std::string> chosen = lsf::bench::filtered_cases({"train/listops"}, opt.filter);
  if (opt.list) {
    for (const std::string& n : chosen) std::printf("%s\n", n.c_str());
    return 0;
  }
  lsf::set_num_threads(opt.threads > 0 ? opt.threads : int(std::max(1u, std::thread::hardware_concurrency())));
  lsf::bench::print_meta_line("\"machine\": " + lsf::machine_limits_json(lsf::measure_machine_limits()));
  if (opt.meta) return 0;
  if (!opt.dump.empty()) dump_case(opt);
  else time_case(opt);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return lsf::bench::run_main<Options>(argc, argv, "bench_lra_step",
                                       "usage: bench_lra_step [options]   (JSON lines on stdout)", flags(), run);
}
