// lsf bench: how fast a config trains on this machine (models/train/bench.h does the work), next
// to the machine's own limits (engine/machine_limits.h), so a figure can be read against them.
//
//   lsf bench --config configs/quickstart.json [--set KEY=VALUE]... [--steps 10] [--warmup 2]
//             [--threads N] [--forward] [--profile] [--json] [--no-probe]
//   machine: sgemm 211.3 GFLOP/s (1536³), STREAM triad 31.3 GB/s, 2 threads
//   training steps (forward, backward, optimizer update), 10 timed after 2 warm-up:
//     per step  median 8.21 ms, fastest 8.02 ms, mean 8.30 ms, slowest 9.01 ms
//     3897.8 samples/s at the median step (3990.0 at the fastest)
//     compute   0.306 GFLOP per step (3 × 2 × 0.0509 G multiply-adds of the forward's products): 36.9
//               GFLOP/s at the median step, 19% of the sgemm rate
//     memory    1.2 MiB of tensors before the steps, 9.8 MiB at the peak (CPU allocator); the process's
//               resident set peaked at 61.3 MiB
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <lsformer/lsformer.h>

#include "cli.h"
#include "lsformer/engine/machine_limits.h"
#include "lsformer/models/train/bench.h"
#include "lsformer/models/train/config.h"

namespace lsf::cli {
namespace {

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--config", "PATH", "the run config to time (JSON, as for lsf train)"},
      {"--set", "KEY=VALUE", "override one config key, e.g. --set train.batch_size=64 (repeatable)", true},
      {"--steps", "N", "timed steps (default 10)"},
      {"--warmup", "N", "untimed steps before them (default 2)"},
      {"--threads", "N", "CPU threads (sets train.threads)"},
      {"--forward", nullptr, "time the forward pass and loss only (no gradients or update; evaluation mode)"},
      {"--profile", nullptr, "print per-op self time and calls and the time per model phase of the timed steps"},
      {"--json", nullptr, "print the result as one JSON object on stdout (the progress lines go to stderr)"},
      {"--no-probe", nullptr, "skip measuring the machine's sgemm rate and memory bandwidth (about a second)"},
  };
  return table;
}

// 10485760 → "10.0 MiB".
std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  return buf;
}

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", seconds * 1e3);
  return buf;
}

std::string rate(double units, double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", units / seconds);
  return buf;
}

// "0.306 GFLOP per step (3 × 2 × 0.0509 G multiply-adds of the forward's products): 36.9 GFLOP/s
// at the median step, 19% of the sgemm rate" (training; a forward pass drops the "3 × "); the
// last part only when the machine was probed.
std::string compute_line(const train::BenchResult& r, double sgemm_gflops) {
  const double gflop = r.flops_per_step() * 1e-9, rate = gflop / r.median_seconds();
  char buf[256];
  std::snprintf(buf, sizeof buf, "%.3g GFLOP per step (%s2 × %.3g G multiply-adds of the forward's products): %.1f GFLOP/s at the median step",
                gflop, r.forward_only ? "" : "3 × ", r.forward_multiply_adds * 1e-9, rate);
  std::string line = buf;
  if (sgemm_gflops > 0) {
    std::snprintf(buf, sizeof buf, ", %.0f%% of the sgemm rate", 100.0 * rate / sgemm_gflops);
    line += buf;
  }
  return line;
}

}  // namespace

void bench_usage(std::ostream& os) {
  os << "usage: lsf bench --config PATH [--set KEY=VALUE]... [--steps N] [--warmup N] [--threads N]\n"
        "                 [--forward] [--profile] [--json] [--no-probe]\n\n"
        "Times the config's training steps on this machine as lsf train runs them (the same data,\n"
        "model, optimizer, schedule and clipping; no run directory, evaluation or checkpoints):\n"
        "the median, fastest, mean and slowest step, the throughput, the FLOP rate of the products\n"
        "(2 per multiply-add of the forward, 3 times that in training), the memory of the tensors and\n"
        "the process's resident-set peak. Then it measures the machine's sgemm rate and memory\n"
        "bandwidth with the same threads, so the figures can be read against what the cores can do.\n\n";
  print_flags(os, flags());
}

int run_bench(const std::vector<std::string>& args) {
  ParsedFlags parsed = parse_flags(args, flags());
  const std::string config_path = flag_value(parsed, "--config");
  if (config_path.empty()) throw UsageError("--config is required");
  std::vector<std::string> overrides = parsed.count("--set") ? parsed.at("--set") : std::vector<std::string>{};
  if (parsed.count("--threads"))
    overrides.push_back("train.threads=" + std::to_string(parse_int("--threads", flag_value(parsed, "--threads"), 1, 4096)));
  train::BenchOptions options;
  if (parsed.count("--steps")) options.steps = parse_int("--steps", flag_value(parsed, "--steps"), 1, 1000000);
  if (parsed.count("--warmup")) options.warmup_steps = parse_int("--warmup", flag_value(parsed, "--warmup"), 0, 1000000);
  options.forward_only = parsed.count("--forward") > 0;
  options.profile = parsed.count("--profile") > 0;
  const bool as_json = parsed.count("--json") > 0;
  options.log = &std::cerr;

  const train::RunConfig config = train::load_config(config_path, overrides);
  const train::BenchResult r = train::bench_training(config, options);  // sets train.threads
  // After the steps (with their threads), so that its arrays (~200 MiB) stay out of the steps'
  // resident-set peak.
  const bool probe = parsed.count("--no-probe") == 0;
  MachineLimits machine;
  if (probe) {
    std::cerr << "bench: measuring the machine's sgemm rate and memory bandwidth" << std::endl;
    machine = measure_machine_limits();
  }
  const char* what = options.forward_only ? "forward passes (forward and loss, evaluation mode, no gradients)"
                                          : "training steps (forward, backward, optimizer update)";
  if (as_json) {
    nlohmann::json j = {
        {"config", config_path},
        {"task", config.task},
        {"mode", options.forward_only ? "forward" : "train"},
        {"data", r.data},
        {"parameters", r.parameters},
        {"threads", r.threads},
        {"device", r.device},
        {"warmup_steps", options.warmup_steps},
        {"step_ms", nlohmann::json::array()},
        {"median_ms", r.median_seconds() * 1e3},
        {"fastest_ms", r.fastest_seconds() * 1e3},
        {"mean_ms", r.mean_seconds() * 1e3},
        {"slowest_ms", r.slowest_seconds() * 1e3},
        {"unit", r.unit},
        {"units_per_step", r.units_per_step},
        {"units_per_second", r.units_per_step / r.median_seconds()},
        {"baseline_bytes", r.baseline_bytes},
        {"peak_bytes", r.peak_bytes},
        {"rss_peak_bytes", r.rss_peak_bytes},
        {"non_finite_steps", r.non_finite_steps},
        {"forward_multiply_adds", r.forward_multiply_adds},
        {"flops_per_step", r.flops_per_step()},
        {"gflops_per_second", r.flops_per_step() / r.median_seconds() * 1e-9},
        {"machine", probe ? nlohmann::json::parse(machine_limits_json(machine)) : nlohmann::json(nullptr)},
    };
    for (double s : r.step_seconds) j["step_ms"].push_back(s * 1e3);
    if (options.profile) std::cerr << r.profile;
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << r.data << ", " << grouped(r.parameters) << " parameters\n";
  if (probe) {
    char line[160];
    std::snprintf(line, sizeof line, "machine: sgemm %.1f GFLOP/s (%d³), STREAM triad %.1f GB/s, %d %s\n", machine.sgemm_gflops,
                  machine.sgemm_size, machine.triad_gbs, machine.threads, machine.threads == 1 ? "thread" : "threads");
    std::cout << line;
  }
  std::cout << what << ", " << r.step_seconds.size() << " timed after " << options.warmup_steps << " warm-up, "
            << r.threads << (r.threads == 1 ? " thread" : " threads") << ":\n"
            << "  per step  median " << ms(r.median_seconds()) << ", fastest " << ms(r.fastest_seconds()) << ", mean "
            << ms(r.mean_seconds()) << ", slowest " << ms(r.slowest_seconds()) << "\n"
            << "  " << rate(r.units_per_step, r.median_seconds()) << " " << r.unit << "/s at the median step ("
            << rate(r.units_per_step, r.fastest_seconds()) << " at the fastest)\n"
            << "  compute   " << compute_line(r, probe ? machine.sgemm_gflops : 0.0) << "\n"
            << "  memory    " << mib(r.baseline_bytes) << " of tensors before the steps, " << mib(r.peak_bytes)
            << " at the peak (" << (r.device == "cpu" ? std::string("CPU") : r.device) << " allocator)"
            << (r.rss_peak_bytes >= 0 ? "; the process's resident set peaked at " + mib(r.rss_peak_bytes) : std::string())
            << "\n";
  if (r.non_finite_steps > 0)
    std::cout << "warning: " << r.non_finite_steps << " of the " << (options.warmup_steps + options.steps)
              << " steps had a non-finite loss or gradient" << (options.forward_only ? "" : "; their updates were skipped")
              << "\n";
  if (options.profile) std::cout << "profile of the " << r.step_seconds.size() << " timed steps:\n" << r.profile;
  return 0;
}

}  // namespace lsf::cli
