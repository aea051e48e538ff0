// bench_attention: CPU time and peak memory of the forward + backward pass of ONE attention layer
// versus the sequence length n, for the bidirectional long-short attention
// (nn::LongShortAttention, docs/transformer-ls.md §2.3) and full softmax attention (nn::FullAttention);
// and the LRA configuration that bench/torch_long_short.py reimplements in PyTorch.
// bench/run_attention.py runs both and writes the "attention-cpu" section of bench/RESULTS.md.
//
// Cases (batch 1 unless said; e = d / h):
//   scale/<variant>/d<d>h<h>/n<n>   n = 1K, 2K, 4K, ... up to --max-n (default 64K), for
//       d 64 with 2 heads and d 512 with 8 heads, variants ls-w8-r32, ls-w128-r32 (long-short
//       with window w and rank r) and full. Full attention is skipped where its logits
//       (B·h·n² floats) exceed --max-bytes; any case whose predicted time exceeds --budget is
//       skipped (prediction: the previous n's time × 2 for long-short, × 4 for full).
//   lra/ls-w8-r32   batch 4, n 4096, d 64, 2 heads, w 8, r 32, with a padding mask (sequence b
//       has its last 37·b tokens padded, as LRA's inputs are padded), the configuration of the
//       PyTorch comparison. --dump DIR writes its weights (DIR/weights.safetensors, via
//       Module::save) and DIR/io.safetensors: x, mask, dy, y = layer(x), dx and every parameter's
//       gradient ("grad.<name>") after y.backward(dy).
//
// Weights: every module is built right after lsf::manual_seed(kSeed) (Linear's default
// initialisation), then its LayerNorm affines are set to 1 + 0.1·N(0,1) and 0.1·N(0,1), so the
// comparison also exercises them. Inputs x ~ N(0,1) [B, n, d] (requires grad) and a fixed
// upstream gradient dy ~ N(0,1) from a generator seeded with kSeed.
//
// Method (as bench_ops.cpp; torch_long_short.py mirrors it): one forward+backward call = drop
// the gradients of x and of every parameter (undefined: fresh allocation, no accumulation),
// y = layer(x), y.backward(dy). `--warmup` calls, then a calibration of calls per sample so one
// sample lasts ≥ --min-sample-ms, then samples (steady_clock, or with --clock cpu the process's
// CPU time) until ≥ --min-samples and ≥ --sample-time seconds, or --max-samples. Reported: median
// (min, max) per call. Peak memory: after the timing, lsf::reset_peak_memory() and one more call;
// peak_bytes is the allocator's high-water mark during it (live buffers, including the weights,
// x and dy that exist before the call: baseline_bytes), extra_bytes = peak − baseline.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <lsformer/lsformer.h>

#include "bench_cli.h"
#include "bench_timing.h"
#include "lsformer/engine/machine_limits.h"

#include "lsformer/models/attention/full_attention.h"
#include "lsformer/models/attention/long_short.h"

namespace {

constexpr uint64_t kSeed = 1234;

// ---- options, from one table (so --help cannot drift from the parser) ----------------------

struct Options {
  int threads = 0;  // 0: all processors
  std::string filter;         // substring of the case name to select
  double sample_s = 1.0;      // sampling time per measurement
  double budget_s = 60.0;     // skip cases predicted to take longer (warm-up + min samples)
  double max_bytes = 8.0 * (1 << 30);  // full attention: skip when B·h·n²·4 exceeds it
  int64_t min_n = 1024, max_n = 65536;
  int warmup = 1;
  int min_samples = 3;
  int max_samples = 50;
  double min_sample_ms = 1.0;
  bool cpu_clock = false;
  bool list = false;
  bool meta = false;  // --meta
  std::string dump;  // directory for the LRA case's weights and tensors
};

using Flag = lsf::bench::Flag<Options>;

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = [] {
    std::vector<Flag> t = lsf::bench::common_flags<Options>("only cases whose name contains TEXT (e.g. lra, scale/full, d64h2/n4096)");
    std::vector<Flag> own = {
        lsf::bench::meta_flag<Options>(),
        {"--sample-time", "SECONDS", "sampling time per measurement (default 1.0)",
         [](Options& o, const std::string& v) { o.sample_s = lsf::bench::number_at_least(v, 0); }},
        {"--budget", "SECONDS", "skip a case predicted to take longer than this (default 60)",
         [](Options& o, const std::string& v) { o.budget_s = lsf::bench::number_at_least(v, 0); }},
        {"--max-bytes", "BYTES", "skip full attention when its n×n logits exceed this (default 8 GiB = 8589934592)",
         [](Options& o, const std::string& v) { o.max_bytes = lsf::bench::number_at_least(v, 0); }},
        {"--min-n", "N", "smallest n of the scaling cases (default 1024)",
         [](Options& o, const std::string& v) { o.min_n = std::stoll(v); }},
        {"--max-n", "N", "largest n of the scaling cases (default 65536)",
         [](Options& o, const std::string& v) { o.max_n = std::stoll(v); }},
        {"--dump", "DIR", "write the LRA case's weights, inputs, outputs and gradients to DIR",
         [](Options& o, const std::string& v) { o.dump = v; }},
    };
    t.insert(t.end(), own.begin(), own.end());
    return t;
  }();
  return table;
}


// ---- timing (bench_timing.h) --------------------------------------------------------------------

using lsf::bench::Timing;

Timing time_call(const std::function<void()>& call, const Options& opt) {
  return lsf::bench::time_call(call, lsf::bench::sampling_plan(opt, opt.sample_s));
}

// ---- the cases -------------------------------------------------------------------------------

struct Variant {
  std::string name;  // "ls-w8-r32" or "full"
  int64_t window = 0, rank = 0;
  bool full = false;
};

struct Case {
  std::string name;  // "scale/ls-w8-r32/d64h2/n4096", "lra/ls-w8-r32"
  Variant variant;
  int64_t batch, n, dim, heads;
  bool masked = false;  // LRA-style padding: sequence b has its last 37·b tokens padded
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {{"ls-w8-r32", 8, 32, false}, {"ls-w128-r32", 128, 32, false},
                                         {"full", 0, 0, true}};
  return v;
}

// Scaling cases grouped by series (variant × width) in increasing n, so a series can stop early.
std::vector<std::vector<Case>> scaling_series(const Options& opt) {
  std::vector<std::vector<Case>> out;
  for (auto [d, h] : {std::pair<int64_t, int64_t>{64, 2}, {512, 8}}) {
    for (const Variant& v : variants()) {
      std::vector<Case> series;
      for (int64_t n = opt.min_n; n <= opt.max_n; n *= 2) {
        std::string name = "scale/" + v.name + "/d" + std::to_string(d) + "h" + std::to_string(h) + "/n" +
                           std::to_string(n);
        series.push_back({name, v, 1, n, d, h});
      }
      out.push_back(series);
    }
  }
  return out;
}

Case lra_case() { return {"lra/ls-w8-r32", variants()[0], 4, 4096, 64, 2, true}; }

std::shared_ptr<lsf::nn::Attention> make_layer(const Case& c) {
  lsf::manual_seed(kSeed);
  std::shared_ptr<lsf::nn::Attention> layer;
  if (c.variant.full) {
    layer = std::make_shared<lsf::nn::FullAttention>(lsf::nn::FullAttentionOptions{.dim = c.dim, .heads = c.heads});
  } else {
    auto ls = std::make_shared<lsf::nn::LongShortAttention>(lsf::nn::LongShortOptions{
        .dim = c.dim, .heads = c.heads, .window = c.variant.window, .rank = c.variant.rank});
    // Non-trivial LayerNorm affines, so the PyTorch comparison checks them too.
    lsf::Generator gen(kSeed + 1);
    lsf::NoGradGuard no_grad;
    for (auto& ln : {ls->dual_ln_s, ls->dual_ln_l}) {
      ln->weight.copy_(lsf::add(lsf::mul(lsf::randn(ln->weight.shape(), {}, &gen), 0.1), 1.0));
      ln->bias.copy_(lsf::mul(lsf::randn(ln->bias.shape(), {}, &gen), 0.1));
    }
    layer = ls;
  }
  return layer;
}

// The inputs and one forward + backward call of a case.
struct Prepared {
  std::shared_ptr<lsf::nn::Attention> layer;
  lsf::Tensor x, dy, mask;  // x [B, n, d] requires grad; dy [B, n, d]; mask [B, n] bool or undefined
  lsf::Tensor call() const {
    x.set_grad(lsf::Tensor());
    layer->zero_grad();
    lsf::nn::AttentionArgs args;
    args.mask = mask;
    lsf::Tensor y = layer->forward(x, args);
    y.backward(dy);
    return y;
  }
};

Prepared prepare(const Case& c) {
  Prepared p;
  p.layer = make_layer(c);
  lsf::Generator gen(kSeed);
  p.x = lsf::randn({c.batch, c.n, c.dim}, lsf::TensorOptions(lsf::kF32).requires_grad(true), &gen);
  p.dy = lsf::randn({c.batch, c.n, c.dim}, {}, &gen);
  if (c.masked) {
    std::vector<bool> real(static_cast<size_t>(c.batch * c.n));
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t t = 0; t < c.n; ++t) real[static_cast<size_t>(b * c.n + t)] = t < c.n - 37 * b;
    p.mask = lsf::tensor(real, {c.batch, c.n});
  }
  return p;
}

// Multiply-add FLOPs (2 per multiply-add) of one forward pass, counted from the shapes; the
// softmaxes, LayerNorms and elementwise ops are not counted (they are bandwidth, not FLOPs).
// Forward + backward is counted as 3 × forward (each product has two gradient products).
//   long-short (e = d/h; s = w + 2·max(⌊w/2⌋, 1) window keys per query, docs/transformer-ls.md
//   §2.3 step 8, 2w for even w): Q, K, V, O projections 4·2·B·n·d², the
//   projection logits 2·B·n·d·h·r, the compression P·K and P·V 2·2·B·h·r·n·e, the global
//   logits and context 2·2·B·h·n·r·e, the window logits and context 2·2·B·h·n·s·e;
//   full: the projections and 2·2·B·h·n²·e.
double forward_gflop(const Case& c) {
  const double B = double(c.batch), n = double(c.n), d = double(c.dim), h = double(c.heads), e = d / h;
  const double projections = 4 * 2 * B * n * d * d;
  if (c.variant.full) return (projections + 2 * 2 * B * h * n * n * e) * 1e-9;
  const double r = double(c.variant.rank), w = double(c.variant.window);
  const double s = c.variant.window > 0 ? w + 2 * double(std::max<int64_t>(c.variant.window / 2, 1)) : 0;
  return (projections + 2 * B * n * d * h * r + 2 * 2 * B * h * r * n * e + 2 * 2 * B * h * n * r * e +
          2 * 2 * B * h * n * s * e) *
         1e-9;
}

double logits_bytes(const Case& c) { return 4.0 * double(c.batch) * double(c.heads) * double(c.n) * double(c.n); }

// ---- output ----------------------------------------------------------------------------------

std::string case_fields(const Case& c) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "\"impl\": \"lsformer\", \"case\": \"%s\", \"variant\": \"%s\", \"batch\": %lld, \"n\": %lld, "
                "\"dim\": %lld, \"heads\": %lld, \"window\": %lld, \"rank\": %lld, \"masked\": %s, "
              "\"gflop\": %.6f",
                c.name.c_str(), c.variant.name.c_str(), (long long)c.batch, (long long)c.n, (long long)c.dim,
                (long long)c.heads, (long long)c.variant.window, (long long)c.variant.rank,
                c.masked ? "true" : "false", 3 * forward_gflop(c));
  return buf;
}

void emit_skip(const Case& c, const std::string& reason) {
  std::printf("{%s, \"skipped\": \"%s\"}\n", case_fields(c).c_str(), reason.c_str());
  std::fflush(stdout);
}

void emit(const Options& opt, const Case& c, const Timing& t, const lsf::MemoryStats& mem, int64_t baseline) {
  std::printf("{%s, \"phase\": \"forward_backward\", \"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, "
              "\"samples\": %d, \"inner\": %d, \"threads\": %d, \"clock\": \"%s\", \"peak_bytes\": %lld, "
              "\"baseline_bytes\": %lld, \"extra_bytes\": %lld}\n",
              case_fields(c).c_str(), t.median_ms, t.min_ms, t.max_ms, t.samples, t.inner, lsf::get_num_threads(),
              opt.cpu_clock ? "cpu" : "wall", (long long)mem.peak_bytes, (long long)baseline,
              (long long)(mem.peak_bytes - baseline));
  std::fflush(stdout);
}

// Times one case; returns its median ms. Peak memory comes from one extra call after the timing.
double measure(const Options& opt, const Case& c) {
  Prepared p = prepare(c);
  Timing t = time_call([&p] { (void)p.call(); }, opt);
  lsf::reset_peak_memory();
  int64_t baseline = lsf::memory_stats().current_bytes;
  (void)p.call();
  lsf::MemoryStats mem = lsf::memory_stats();
  emit(opt, c, t, mem, baseline);
  // LSF_PROFILE=1: ten more calls under the built-in profiler, its table on stderr (after the
  // timing, so the profiler's own cost never reaches the reported times).
  if (lsf::profiler::enable_from_environment()) {
    lsf::profiler::reset();
    for (int i = 0; i < 10; ++i) (void)p.call();
    lsf::profiler::disable();
    std::fprintf(stderr, "%s, 10 calls:\n%s", c.name.c_str(),
                 lsf::profiler::format_table(lsf::profiler::snapshot(), 40).c_str());
  }
  return t.median_ms;
}

void dump(const Options& opt, const Case& c) {
  Prepared p = prepare(c);
  lsf::Tensor y = p.call();
  p.layer->save(opt.dump + "/weights.safetensors", {{"case", c.name}});
  lsf::NamedTensors io = {{"x", p.x.detach()}, {"mask", p.mask}, {"dy", p.dy}, {"y", y.detach()},
                          {"dx", p.x.grad()}};
  for (const auto& [name, param] : p.layer->named_parameters()) io.push_back({"grad." + name, param.grad()});
  lsf::save_safetensors(opt.dump + "/io.safetensors", io,
                        {{"case", c.name},
                         {"window", std::to_string(c.variant.window)},
                         {"rank", std::to_string(c.variant.rank)},
                         {"heads", std::to_string(c.heads)}});
  std::fprintf(stderr, "bench_attention: wrote %s/weights.safetensors and %s/io.safetensors\n", opt.dump.c_str(),
               opt.dump.c_str());
}

bool selected(const Options& opt, const Case& c) { return lsf::bench::case_selected(opt.filter, c.name); }

int run(const Options& opt) {
  std::vector<std::vector<Case>> series = scaling_series(opt);
  Case lra = lra_case();
  std::vector<std::string> names = {lra.name};
  for (const auto& s : series)
    for (const Case& c : s) names.push_back(c.name);
  const std::vector<std::string> chosen = lsf::bench::filtered_cases(names, opt.filter);
  if (opt.list) {
    for (const std::string& n : chosen) std::printf("%s\n", n.c_str());
    return 0;
  }
  LSF_CHECK(opt.dump.empty() || opt.filter.empty() || selected(opt, lra))
      << "--dump writes the LRA case, but --filter '" << opt.filter << "' excludes " << lra.name;
  lsf::set_num_threads(opt.threads > 0 ? opt.threads : int(std::max(1u, std::thread::hardware_concurrency())));
  lsf::bench::print_meta_line("\"machine\": " + lsf::machine_limits_json(lsf::measure_machine_limits()));
  if (opt.meta) return 0;
  if (!opt.dump.empty()) dump(opt, lra);
  if (selected(opt, lra)) measure(opt, lra);
  for (const auto& s : series) {
    double last_ms = 0;  // the previous n's median (0: none measured yet)
    bool over_budget = false;
    for (const Case& c : s) {
      if (!selected(opt, c)) continue;
      if (c.variant.full && logits_bytes(c) > opt.max_bytes) {
        emit_skip(c, "logits exceed --max-bytes");
        continue;
      }
      // Warm-up + calibration + min samples ≈ (warmup + 1 + min_samples) calls.
      double predicted_s = last_ms * (c.variant.full ? 4.0 : 2.0) * 1e-3 * (opt.warmup + 1 + opt.min_samples);
      if (over_budget || predicted_s > opt.budget_s) {
        over_budget = true;
        emit_skip(c, "predicted time exceeds --budget");
        continue;
      }
      last_ms = measure(opt, c);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return lsf::bench::run_main<Options>(argc, argv, "bench_attention", "usage: bench_attention [options]   (JSON lines on stdout)", flags(), run);
}
