// bench_lm: training and generation speed of the char-LM (lm::TransformerLSModel, docs/transformer-ls.md
// §3) on the CPU; bench/torch_lm.py is the PyTorch implementation of the same model that
// bench/run_lm.py times side by side with it (the "char-LM speed on the CPU" section of
// bench/RESULTS.md).
//
// Cases:
//   train/<config>     one training step = forward of one block [B, M] with the carried memory
//       (truncated BPTT, §3.4 item 7), the §3.6 loss, zero_grad (set to none), backward, one AdamW
//       step (lr 2.5e-4, weight decay 0.01, the base enwik8 recipe of §3.8). The blocks cycle
//       through kBlocks fixed random token blocks; the memory of one step feeds the next. Reported:
//       per-step time, tokens/s = B·M / step time, peak memory.
//   generate/<config>/p<P>   greedy generation with lm::IncrementalDecoder (batch 1): feed a
//       prompt of P random characters, then time `--gen-tokens` (default: one block, M) steps
//       of decoder.step(argmax). Reported: tokens/s of the generated tokens and the prompt's
//       feeding time. The per-token cost should not grow with P: the decoder keeps the memory,
//       the window and the compressed slots, so a step costs O(w + (C + t)·r/l) per layer
//       whatever came before.
// Configurations (dropout 0 on both sides, so that the PyTorch run computes the same function):
//   small   d 256, 4 heads, 2 layers, FFN 1024, V 205, M = C = 512, l 16, r 1, w 128, batch 8:
//           a model a 2-core CPU trains at a useful rate;
//   paper   d 512, 8 heads, 2 layers, FFN 2048, V 205, M = C = 1024, l 16, r 1, w 512, batch 2:
//           the paper's layer (§3.8: d 512, 8 heads, w 512), two of them, with a shorter block
//           than the paper's 2048 and fewer steps.
//
// Weights: the model is built after lsf::manual_seed(kSeed) and its parameters are then redrawn
// (gate_init) so that every path matters to the loss: Linear weights N(0, 1/fan_in), biases
// N(0, 0.1²), LayerNorm gains N(1, 0.1²) and shifts N(0, 0.1²), u and v N(0, 0.5²), the token
// table N(0, 1/d). (The §6 initialisation, N(0, 0.02²) everywhere, makes the first losses nearly
// independent of the attention, a weak correctness gate; the speed does not depend on values.)
//
// --dump DIR (train cases): DIR/<config>/weights.safetensors (Module::save: the official names)
// and DIR/<config>/io.safetensors: "memory.<i>" (every layer's memory after one untimed forward
// of block 0 from the zero memory, so the gate sees a real memory), "tokens" and "targets" of
// block 1, "log_probs" and "loss" of forward(tokens, memory), and "grad.<name>" of every
// parameter after loss.backward(); metadata: the config. bench/torch_lm.py loads them and checks
// its own loss and gradients (float32 and float64) against them before timing.
//
// Method: bench_timing.h (warm-up, calls per sample, median, min, max), wall-clock time, or the
// process CPU time with --clock cpu. Memory: the allocator's high-water mark during the timed
// steps (peak_bytes; the live bytes before the first step: baseline_bytes), and the process's
// resident set: VmRSS before the first step and VmHWM (peak) after the last one, read from
// /proc/self/status exactly as torch_lm.py reads its own (rss_extra_bytes = VmHWM − VmRSS before).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <lsformer/lsformer.h>

#include "bench_cli.h"
#include "bench_timing.h"

namespace {

constexpr uint64_t kSeed = 1234;
constexpr int64_t kBlocks = 4;  // distinct token blocks the training steps cycle through
constexpr int64_t kVocab = 205; // enwik8's dictionary size in the official runs

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
  int64_t gen_tokens = 0;  // 0: one block (M)
  std::string prompts = "256,1024,4096,16384";
};

using Flag = lsf::bench::Flag<Options>;

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = [] {
    std::vector<Flag> t =
        lsf::bench::common_flags<Options>("only cases whose name contains TEXT (e.g. train/small, generate)");
    std::vector<Flag> own = {
        lsf::bench::meta_flag<Options>(),
        {"--sample-time", "SECONDS", "sampling time per measurement (default 10)",
         [](Options& o, const std::string& v) { o.sample_s = lsf::bench::number_at_least(v, 0); }},
        {"--dump", "DIR", "write each selected train case's weights, batch, memory, loss and gradients to DIR/<config>",
         [](Options& o, const std::string& v) { o.dump = v; }},
        {"--gen-tokens", "N", "generated tokens per generation sample (default or 0: the block length M)",
         [](Options& o, const std::string& v) { o.gen_tokens = lsf::bench::int_at_least(v, 0); }},
        {"--prompts", "LIST", "prompt lengths of the generation cases (default 256,1024,4096,16384)",
         [](Options& o, const std::string& v) { o.prompts = v; }},
    };
    t.insert(t.end(), own.begin(), own.end());
    return t;
  }();
  return table;
}

// ---- configurations ----------------------------------------------------------------------------

struct Config {
  std::string name;
  lsf::lm::LmModelOptions model;
  int64_t batch;
};

lsf::lm::LmModelOptions model_options(int64_t d, int64_t heads, int64_t layers, int64_t ffn, int64_t M, int64_t w) {
  lsf::lm::LmModelOptions o;
  o.vocab_size = kVocab;
  o.dim = d;
  o.heads = heads;
  o.layers = layers;
  o.ffn_dim = ffn;
  o.block_length = M;
  o.memory_length = M;
  o.chunk_length = 16;
  o.rank = 1;
  o.window = w;
  o.dropout = 0.0;
  o.emb_dropout = 0.0;
  return o;
}

const std::vector<Config>& configs() {
  static const std::vector<Config> c = {
      {"small", model_options(256, 4, 2, 1024, 512, 128), 8},
      {"paper", model_options(512, 8, 2, 2048, 1024, 512), 2},
  };
  return c;
}

// The configuration's JSON fields; batch: the batch of the case (training: the config's,
// generation: 1).
std::string config_fields(const Config& c, int64_t batch) {
  const auto& o = c.model;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "\"config\": \"%s\", \"batch\": %lld, \"dim\": %lld, \"heads\": %lld, \"layers\": %lld, "
                "\"ffn_dim\": %lld, \"vocab_size\": %lld, \"block_length\": %lld, \"memory_length\": %lld, "
                "\"chunk_length\": %lld, \"rank\": %lld, \"window\": %lld",
                c.name.c_str(), (long long)batch, (long long)o.dim, (long long)o.heads, (long long)o.layers,
                (long long)o.ffn_dim, (long long)o.vocab_size, (long long)o.block_length, (long long)o.memory_length,
                (long long)o.chunk_length, (long long)o.rank, (long long)o.window);
  return buf;
}

// ---- the model and its data -------------------------------------------------------------------

// Parameters redrawn so that every path matters to the loss (see the header).
void gate_init(lsf::lm::TransformerLSModel& model) {
  lsf::Generator g(kSeed + 1);
  lsf::NoGradGuard no_grad;
  const double d = double(model.options().dim);
  for (const auto& [name, t] : model.named_parameters()) {
    const bool norm = name.find("norm") != std::string::npos || name.find("dual_ln") != std::string::npos;
    if (name == "in_emb.weight") lsf::nn::init::normal_(t, 0.0, 1.0 / std::sqrt(d), &g);
    else if (norm) lsf::nn::init::normal_(t, name.ends_with("weight") ? 1.0 : 0.0, 0.1, &g);
    else if (name.ends_with("r_w_bias") || name.ends_with("r_r_bias")) lsf::nn::init::normal_(t, 0.0, 0.5, &g);
    else if (name.ends_with("bias")) lsf::nn::init::normal_(t, 0.0, 0.1, &g);
    else lsf::nn::init::normal_(t, 0.0, 1.0 / std::sqrt(double(t.size(1))), &g);
  }
}

std::unique_ptr<lsf::lm::TransformerLSModel> make_model(const Config& c) {
  lsf::manual_seed(kSeed);
  auto model = std::make_unique<lsf::lm::TransformerLSModel>(c.model);
  gate_init(*model);
  return model;
}

// Random characters [B, n] in [0, V) from a seeded generator (i64).
lsf::Tensor random_tokens(int64_t B, int64_t n, uint64_t seed) {
  lsf::Generator g(seed);
  // uniform [0, 1) · V, truncated toward zero by the conversion (the values are ≥ 0)
  return lsf::mul(lsf::rand({B, n}, lsf::TensorOptions(lsf::kF64), &g), double(kVocab)).to(lsf::kI64);
}

// Block k's tokens and targets (the next characters of the same random stream).
struct Block {
  lsf::Tensor tokens, targets;  // [B, M] i64
};

std::vector<Block> make_blocks(const Config& c) {
  std::vector<Block> blocks;
  const int64_t M = c.model.block_length;
  for (int64_t k = 0; k < kBlocks; ++k) {
    lsf::Tensor stream = random_tokens(c.batch, M + 1, kSeed + 100 + uint64_t(k));
    blocks.push_back({stream.narrow(1, 0, M).contiguous(), stream.narrow(1, 1, M).contiguous()});
  }
  return blocks;
}

// ---- cases -------------------------------------------------------------------------------------

using lsf::bench::Timing;

Timing time_call(const std::function<void()>& call, const Options& opt) {
  return lsf::bench::time_call(call, lsf::bench::sampling_plan(opt, opt.sample_s));
}

void train_case(const Options& opt, const Config& c) {
  auto model = make_model(c);
  model->train();
  lsf::optim::AdamW adamw(model->named_parameters(), {.lr = 2.5e-4, .weight_decay = 0.01});
  const std::vector<Block> blocks = make_blocks(c);
  lsf::lm::Memory memory = model->initial_memory(c.batch);
  int64_t step = 0;
  auto train_step = [&] {
    const Block& blk = blocks[size_t(step++ % kBlocks)];
    lsf::Tensor lp = model->forward(blk.tokens, memory);
    lsf::Tensor loss;
    {
      lsf::profiler::PhaseScope phase("loss");
      loss = lsf::lm::lm_loss(lp, blk.targets, /*pad_index=*/-100);
    }
    adamw.zero_grad();
    loss.backward();
    lsf::profiler::PhaseScope phase("optimizer");
    adamw.step();
  };
  const int64_t rss_before = lsf::bench::proc_status_bytes("VmRSS");
  lsf::reset_peak_memory();
  const int64_t baseline = lsf::memory_stats().current_bytes;
  Timing t = time_call(train_step, opt);
  const lsf::MemoryStats mem = lsf::memory_stats();
  const int64_t hwm = lsf::bench::proc_status_bytes("VmHWM");
  // LSF_PROFILE=1: ten more steps under the built-in profiler, its table on stderr (after the
  // timing, so the profiler's own cost never reaches the reported times).
  if (lsf::profiler::enable_from_environment()) {
    lsf::profiler::reset();
    for (int i = 0; i < 10; ++i) train_step();
    lsf::profiler::disable();
    std::fprintf(stderr, "train/%s, 10 steps:\n%s", c.name.c_str(),
                 lsf::profiler::format_table(lsf::profiler::snapshot(), 40).c_str());
  }
  const double tokens = double(c.batch * c.model.block_length);
  std::printf("{\"impl\": \"lsformer\", \"case\": \"train/%s\", %s, \"phase\": \"train_step\", \"median_ms\": %.6f, "
              "\"min_ms\": %.6f, \"max_ms\": %.6f, \"samples\": %d, \"inner\": %d, \"threads\": %d, \"clock\": \"%s\", "
              "\"tokens_per_s\": %.3f, \"best_tokens_per_s\": %.3f, \"steps\": %lld, \"peak_bytes\": %lld, "
              "\"baseline_bytes\": %lld, \"extra_bytes\": %lld, \"rss_before_bytes\": %lld, \"rss_peak_bytes\": %lld, "
              "\"rss_extra_bytes\": %lld}\n",
              c.name.c_str(), config_fields(c, c.batch).c_str(), t.median_ms, t.min_ms, t.max_ms, t.samples, t.inner,
              lsf::get_num_threads(), opt.cpu_clock ? "cpu" : "wall", tokens / (t.median_ms * 1e-3),
              tokens / (t.min_ms * 1e-3), (long long)step, (long long)mem.peak_bytes, (long long)baseline,
              (long long)(mem.peak_bytes - baseline), (long long)rss_before, (long long)hwm,
              (long long)(hwm - rss_before));
  std::fflush(stdout);
}

void dump_case(const Options& opt, const Config& c) {
  auto model = make_model(c);
  model->train();  // dropout is 0: the same function as eval, and the mode a training step runs in
  const std::vector<Block> blocks = make_blocks(c);
  lsf::lm::Memory memory = model->initial_memory(c.batch);
  {
    lsf::NoGradGuard no_grad;
    (void)model->forward(blocks[0].tokens, memory);  // a real memory for the checked block
  }
  lsf::NamedTensors io;
  for (size_t i = 0; i < memory.layers.size(); ++i) io.push_back({"memory." + std::to_string(i), memory.layers[i]});
  lsf::Tensor lp = model->forward(blocks[1].tokens, memory);
  lsf::Tensor loss = lsf::lm::lm_loss(lp, blocks[1].targets, -100);
  loss.backward();
  io.push_back({"tokens", blocks[1].tokens});
  io.push_back({"targets", blocks[1].targets});
  io.push_back({"log_probs", lp.detach()});
  io.push_back({"loss", loss.detach()});
  for (const auto& [name, p] : model->named_parameters()) io.push_back({"grad." + name, p.grad()});
  const std::string dir = opt.dump + "/" + c.name;
  std::filesystem::create_directories(dir);
  const auto& o = c.model;
  lsf::Metadata meta = {{"config", c.name},
                        {"batch", std::to_string(c.batch)},
                        {"dim", std::to_string(o.dim)},
                        {"heads", std::to_string(o.heads)},
                        {"layers", std::to_string(o.layers)},
                        {"ffn_dim", std::to_string(o.ffn_dim)},
                        {"vocab_size", std::to_string(o.vocab_size)},
                        {"block_length", std::to_string(o.block_length)},
                        {"memory_length", std::to_string(o.memory_length)},
                        {"chunk_length", std::to_string(o.chunk_length)},
                        {"rank", std::to_string(o.rank)},
                        {"window", std::to_string(o.window)}};
  model->save(dir + "/weights.safetensors", meta);
  lsf::save_safetensors(dir + "/io.safetensors", io, meta);
  std::fprintf(stderr, "bench_lm: wrote %s/weights.safetensors and %s/io.safetensors (loss %.6f)\n", dir.c_str(),
               dir.c_str(), loss.item<double>());
}

std::vector<int64_t> prompt_lengths(const Options& opt) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at <= opt.prompts.size()) {
    size_t comma = opt.prompts.find(',', at);
    if (comma == std::string::npos) comma = opt.prompts.size();
    const std::string item = opt.prompts.substr(at, comma - at);
    LSF_CHECK(!item.empty()) << "--prompts: empty item in '" << opt.prompts << "'";
    const int64_t n = std::stoll(item);
    LSF_CHECK(n >= 1) << "--prompts: lengths must be ≥ 1, got " << n;
    out.push_back(n);
    at = comma + 1;
  }
  return out;
}

void generate_case(const Options& opt, const Config& c, int64_t prompt) {
  auto model = make_model(c);
  model->eval();
  lsf::NoGradGuard no_grad;
  const int64_t count = opt.gen_tokens > 0 ? opt.gen_tokens : c.model.block_length;
  const lsf::Tensor prompt_tokens = random_tokens(1, prompt, kSeed + 7);
  // Each sample: a fresh decoder fed the prompt (timed apart: feed_ms), then `count` greedy
  // steps (timed).
  double feed_ms_min = 1e300, total = 0;
  std::vector<double> per_token;
  for (int i = 0; i < opt.warmup + opt.max_samples; ++i) {
    lsf::lm::IncrementalDecoder decoder(*model, 1);
    double t0 = lsf::bench::now_ms(opt.cpu_clock);
    lsf::Tensor lp = decoder.feed(prompt_tokens);
    feed_ms_min = std::min(feed_ms_min, lsf::bench::now_ms(opt.cpu_clock) - t0);
    t0 = lsf::bench::now_ms(opt.cpu_clock);
    for (int64_t k = 0; k < count; ++k) lp = decoder.step(lsf::argmax(lp, -1));
    const double ms = lsf::bench::now_ms(opt.cpu_clock) - t0;
    if (i < opt.warmup) continue;
    per_token.push_back(ms / double(count));
    total += ms;
    if (int(per_token.size()) >= opt.min_samples && total >= opt.sample_s * 1e3) break;
  }
  std::sort(per_token.begin(), per_token.end());
  const size_t k = per_token.size();
  const double median = k % 2 ? per_token[k / 2] : 0.5 * (per_token[k / 2 - 1] + per_token[k / 2]);
  std::printf("{\"impl\": \"lsformer\", \"case\": \"generate/%s/p%lld\", %s, \"phase\": \"generate\", "
              "\"prompt\": %lld, \"generated\": %lld, \"median_ms_per_token\": %.6f, \"min_ms_per_token\": %.6f, "
              "\"max_ms_per_token\": %.6f, \"samples\": %zu, \"tokens_per_s\": %.3f, \"best_tokens_per_s\": %.3f, "
              "\"feed_ms\": %.3f, \"threads\": %d, \"clock\": \"%s\"}\n",
              c.name.c_str(), (long long)prompt, config_fields(c, 1).c_str(), (long long)prompt, (long long)count, median,
              per_token.front(), per_token.back(), k, 1e3 / median, 1e3 / per_token.front(), feed_ms_min,
              lsf::get_num_threads(), opt.cpu_clock ? "cpu" : "wall");
  std::fflush(stdout);
}

bool selected(const Options& opt, const std::string& name) {
  return lsf::bench::case_selected(opt.filter, name);
}

int run(const Options& opt) {
  const std::vector<int64_t> prompts = prompt_lengths(opt);
  std::vector<std::string> names;
  for (const Config& c : configs()) names.push_back("train/" + c.name);
  for (const Config& c : configs())
    for (int64_t p : prompts) names.push_back("generate/" + c.name + "/p" + std::to_string(p));
  const std::vector<std::string> chosen = lsf::bench::filtered_cases(names, opt.filter);
  if (opt.list) {
    for (const std::string& n : chosen) std::printf("%s\n", n.c_str());
    return 0;
  }
  lsf::set_num_threads(opt.threads > 0 ? opt.threads : int(std::max(1u, std::thread::hardware_concurrency())));
  lsf::bench::print_meta_line();
  if (opt.meta) return 0;
  for (const Config& c : configs()) {
    if (!selected(opt, "train/" + c.name)) continue;
    if (!opt.dump.empty()) dump_case(opt, c);
    else train_case(opt, c);
  }
  if (!opt.dump.empty()) return 0;
  for (const Config& c : configs())
    for (int64_t p : prompts) {
      const std::string name = "generate/" + c.name + "/p" + std::to_string(p);
      if (selected(opt, name)) generate_case(opt, c, p);
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return lsf::bench::run_main<Options>(argc, argv, "bench_lm",
                                       "usage: bench_lm [options]   (JSON lines on stdout)", flags(), run);
}
