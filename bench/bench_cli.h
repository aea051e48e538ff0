// Command lines of the C++ benchmarks: one table of flags gives both the parser and --help,
// so they cannot drift apart.
#pragma once

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <lsformer/lsformer.h>
#include <lsformer/engine/blas_core.h>

#include "bench_timing.h"

namespace lsf::bench {

template <typename Options>
struct Flag {
  const char* name;
  const char* arg;  // nullptr: a switch
  std::string help;
  std::function<void(Options&, const std::string&)> set;
};

// std::stoi / std::stod of a whole value of at least `low`; anything else throws, which
// run_main reports as a bad value (std::stoi took "5x", and negative counts were run as given).
inline int int_at_least(const std::string& v, int low) {
  size_t used = 0;
  const int x = std::stoi(v, &used);
  if (used != v.size() || x < low) throw std::invalid_argument(v);
  return x;
}
inline double number_at_least(const std::string& v, double low) {
  size_t used = 0;
  const double x = std::stod(v, &used);
  if (used != v.size() || !(x >= low)) throw std::invalid_argument(v);
  return x;
}

// The flags every benchmark has. Options needs the members threads, filter, warmup,
// min_samples, max_samples, min_sample_ms, cpu_clock and list; the help texts show the
// defaults of a default-constructed Options.
template <typename Options>
std::vector<Flag<Options>> common_flags(const char* filter_help) {
  const Options d{};
  auto number = [](double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s += '0';
    return s;
  };
  return {
      {"--threads", "N", "threads for lsformer's loops and OpenBLAS (default or 0: all processors)",
       [](Options& o, const std::string& v) { o.threads = int_at_least(v, 0); }},
      {"--filter", "TEXT", filter_help, [](Options& o, const std::string& v) { o.filter = v; }},
      {"--warmup", "N", ("warm-up calls before calibration (default " + std::to_string(d.warmup) + ")"),
       [](Options& o, const std::string& v) { o.warmup = int_at_least(v, 0); }},
      {"--min-samples", "N", ("at least N samples (default " + std::to_string(d.min_samples) + ")"),
       [](Options& o, const std::string& v) { o.min_samples = int_at_least(v, 1); }},
      {"--max-samples", "N", ("at most N samples (default " + std::to_string(d.max_samples) + ")"),
       [](Options& o, const std::string& v) { o.max_samples = int_at_least(v, 1); }},
      {"--min-sample-ms", "MS",
       ("repeat fast calls so one sample lasts at least MS (default " + number(d.min_sample_ms) + ")"),
       [](Options& o, const std::string& v) { o.min_sample_ms = number_at_least(v, 0); }},
      {"--clock", "wall|cpu",
       "wall: steady_clock (default); cpu: process CPU time, robust to other load with --threads 1",
       [](Options& o, const std::string& v) {
         LSF_CHECK(v == "wall" || v == "cpu") << "--clock: expected wall or cpu, got " << v;
         o.cpu_clock = v == "cpu";
       }},
      {"--list", nullptr, "list the cases and exit", [](Options& o, const std::string&) { o.list = true; }},
  };
}

template <typename Options>
void print_usage(std::ostream& os, const std::string& synopsis, const std::vector<Flag<Options>>& flags) {
  os << synopsis << "\n\noptions:\n";
  for (const Flag<Options>& f : flags) {
    std::string left = std::string(f.name) + (f.arg ? std::string(" ") + f.arg : "");
    os << "  " << left << std::string(left.size() < 24 ? 24 - left.size() : 1, ' ') << f.help << "\n";
  }
}

// The sampling plan those flags describe; sample_s is the benchmark's own sampling time per
// measurement (--sample-time, or bench_ops' --budget).
template <typename Options>
SamplingPlan sampling_plan(const Options& o, double sample_s) {
  return {.warmup = o.warmup, .min_samples = o.min_samples, .max_samples = o.max_samples,
          .min_sample_ms = o.min_sample_ms, .sample_ms = sample_s * 1e3, .cpu_clock = o.cpu_clock};
}

// The flags of the GPU benchmarks (bench_cuda_ops, bench_cuda_attention): common_flags, then
// theirs (Options also needs sample_s, dtype and json).
template <typename Options>
std::vector<Flag<Options>> gpu_flags(const char* filter_help) {
  std::vector<Flag<Options>> flags = common_flags<Options>(filter_help);
  flags.insert(flags.end(), {
      {"--sample-time", "SECONDS", "sampling time per case (default 0.5)",
       [](Options& o, const std::string& v) { o.sample_s = number_at_least(v, 0); }},
      {"--dtype", "f32|bf16", "the operands' dtype (default f32)",
       [](Options& o, const std::string& v) {
         LSF_CHECK(v == "f32" || v == "bf16") << "--dtype: expected f32 or bf16, got " << v;
         o.dtype = v == "bf16" ? lsf::kBF16 : lsf::kF32;
       }},
      {"--json", nullptr, "one JSON line per case", [](Options& o, const std::string&) { o.json = true; }},
  });
  return flags;
}

// Parses argv with `flags`, then returns run(options). --help prints the usage (exit 0); an
// unknown flag, a missing or a bad value prints why (exit 2); an lsf::Error from run is
// reported (exit 1).
//
// First of all it restarts the program with OpenBLAS's best kernels for this CPU where OpenBLAS
// would run weaker ones (engine/blas_core.h; unless OPENBLAS_CORETYPE is set, as the runners do
// for both sides): a benchmark run by hand measures the GEMMs the lsf tool runs, not Debian 12's
// generic fallback on Sapphire Rapids (a char-LM step ~1 s there instead of ~0.35 s).
template <typename Options>
int run_main(int argc, char** argv, const char* program, const std::string& synopsis,
             const std::vector<Flag<Options>>& flags, int (*run)(const Options&)) {
  lsf::reexec_with_best_blas_core(argv);
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage(std::cout, synopsis, flags);
      return 0;
    }
    auto flag = std::find_if(flags.begin(), flags.end(), [&](const Flag<Options>& f) { return arg == f.name; });
    if (flag == flags.end()) {
      std::cerr << program << ": unknown argument '" << arg << "'\n";
      print_usage(std::cerr, synopsis, flags);
      return 2;
    }
    std::string value;
    if (flag->arg) {
      if (i + 1 >= argc) {
        std::cerr << program << ": " << flag->name << " needs a value (" << flag->arg << ")\n";
        return 2;
      }
      value = argv[++i];
    }
    try {
      flag->set(opt, value);
    } catch (const std::exception&) {
      std::cerr << program << ": bad value '" << value << "' for " << flag->name << "\n";
      return 2;
    }
  }
  if (opt.min_samples > opt.max_samples) {
    std::cerr << program << ": --min-samples " << opt.min_samples << " exceeds --max-samples " << opt.max_samples << "\n";
    return 2;
  }
  try {
    return run(opt);
  } catch (const lsf::Error& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
}

// Whether --filter `filter` selects the case `name`: a substring match; every case when empty.
inline bool case_selected(const std::string& filter, const std::string& name) {
  return filter.empty() || name.find(filter) != std::string::npos;
}

// The names of the cases --filter selects, in order, checked before anything runs: a filter that
// selects none is an error naming it (such a run used to print nothing and exit 0). --list
// prints these, so it shows what a --filter would run.
inline std::vector<std::string> filtered_cases(const std::vector<std::string>& names, const std::string& filter) {
  std::vector<std::string> chosen;
  for (const std::string& n : names)
    if (case_selected(filter, n)) chosen.push_back(n);
  LSF_CHECK(!chosen.empty()) << "--filter '" << filter << "' matches no case (--list shows them all)";
  return chosen;
}

// What a GPU benchmark does before its cases: the --filter check, --list (true: listed, stop
// here), refusing --clock cpu (the host waits for the device, so only the wall clock times GPU
// work), a usable device or the reason there is none, the host threads.
template <typename Options>
bool gpu_preamble(const Options& o, const std::vector<std::string>& names) {
  const std::vector<std::string> chosen = filtered_cases(names, o.filter);
  if (o.list) {
    for (const std::string& n : chosen) std::cout << n << "\n";
    return true;
  }
  LSF_CHECK(!o.cpu_clock) << "--clock cpu: GPU work is timed on the wall clock (the host waits for the device)";
  LSF_CHECK(lsf::cuda::device_count() > 0) << "no usable CUDA device (" << lsf::cuda::unavailable_reason() << ")";
  if (o.threads > 0) lsf::set_num_threads(o.threads);
  return false;
}

// s as the inside of a JSON string: quotes and backslashes escaped, newlines as \n, other
// control characters dropped (the benchmarks' JSON lines carry build info and shape text).
inline std::string json_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(ch) >= 0x20) {
      out += ch;
    }
  }
  return out;
}

// --meta, for the benchmarks whose JSON output starts with a metadata line: print that line and
// exit without running a case. The runners (bench/run_*.py) read the build from it. Options
// needs a member `meta`.
template <typename Options>
Flag<Options> meta_flag() {
  return {"--meta", nullptr, "print the metadata line a run starts with (JSON: version, threads, build) and exit",
          [](Options& o, const std::string&) { o.meta = true; }};
}

// That line: {"meta": {"impl": "lsformer", "version", "threads", "build_info"[, extra]}}, where
// extra holds more members ("\"key\": value" pairs, comma-separated) or is empty.
inline void print_meta_line(const std::string& extra = "") {
  std::printf("{\"meta\": {\"impl\": \"lsformer\", \"version\": \"%s\", \"threads\": %d, \"build_info\": \"%s\"%s%s}}\n",
              lsf::version().c_str(), lsf::get_num_threads(), json_escape(lsf::build_info()).c_str(),
              extra.empty() ? "" : ", ", extra.c_str());
  std::fflush(stdout);
}

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"), -1 when absent: the process's
// resident and peak resident memory, read the same way by the PyTorch peers.
inline int64_t proc_status_bytes(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;  // kB
  return -1;
}

}  // namespace lsf::bench
