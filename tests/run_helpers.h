// Test helpers for files and training runs: scratch run directories, whole files as strings,
// hand-made safetensors bytes, a train::train call that keeps the log in a string stream, word
// salad for tiny language models, the `lsf` tool started as a child process, and this process's
// resident memory.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "lsformer/models/train/memory_usage.h"
#include "lsformer/models/train/trainer.h"

namespace lsf::testing {

// Tiny ListOps generated in memory: at most 2 operator levels, 4 < L < 20 tokens; a 2-layer
// long-short model with d = 32. Dropout is on so that resuming must restore the RNG. One thread,
// so every number of a run is deterministic. (test_train's runs; others override keys.)
inline const std::string kTinyListOps = R"({
  "data": {"task": "listops", "seed": 3,
           "generate": {"enabled": true, "train": 400, "dev": 48, "test": 40,
                        "min_length": 4, "max_length": 20, "max_depth": 3, "max_args": 4}},
  "model": {"vocab_size": 16, "max_seq_len": 32, "dim": 32, "heads": 2, "ffn_dim": 64, "window": 4, "rank": 4,
            "dropout": 0.1, "head_hidden": 32},
  "optimizer": {"lr": 3e-3, "weight_decay": 0.01},
  "schedule": {"name": "onecycle", "warmup_steps": 5},
  "train": {"steps": 50, "batch_size": 32, "eval_every": 20, "eval_batches": 2, "log_every": 10,
            "checkpoint_every": 10, "seed": 7, "threads": 1}
})";

// <tmp>/lsf_test_<suite>_<pid>_<name>, removed first (the process id keeps concurrent test
// processes — ctest -j, other checkouts — apart); created empty when `create`.
inline std::filesystem::path fresh_dir(const std::string& suite, const std::string& name, bool create = false) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("lsf_test_" + suite + "_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  if (create) fs::create_directories(dir);
  return dir;
}

// The bytes of a file ("" when it cannot be read: the caller's checks then fail visibly).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The bytes of a safetensors file: the 8-byte little-endian header length, the JSON header and
// the data, exactly as given (tests build malformed files with it).
inline std::string safetensors_bytes(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return out + json + data;
}

// A ListOps run a test trains in a fraction of a second: 12 steps of batch 8 on 64 generated
// examples, a 2-layer d = 16 long-short model, a dev evaluation every 4 steps and a log line
// every 2, no periodic checkpoints or histograms; tests adjust it with parse_config's overrides.
inline const char* const kTinyListopsRun = R"({
  "data": {"task": "listops", "seed": 3,
           "generate": {"enabled": true, "train": 64, "dev": 16, "test": 16,
                        "min_length": 4, "max_length": 16, "max_depth": 2, "max_args": 3}},
  "model": {"vocab_size": 16, "max_seq_len": 16, "dim": 16, "heads": 2, "ffn_dim": 32, "window": 4, "rank": 4,
            "head_hidden": 16},
  "schedule": {"name": "constant"},
  "train": {"steps": 12, "batch_size": 8, "eval_every": 4, "log_every": 2, "checkpoint_every": 0,
            "tensorboard_every": 0, "seed": 1, "threads": 1}
})";

// Options for train::train into `dir` with the progress and the summary written to `log`, one
// line per logged step (never a live \r line).
inline train::TrainOptions quiet_train_options(const std::filesystem::path& dir, std::ostringstream& log) {
  train::TrainOptions options;
  options.out_dir = dir.string();
  options.log = &log;
  options.out = &log;
  options.progress = 0;
  return options;
}

// train::train with quiet_train_options.
inline train::TrainSummary run_training(const train::RunConfig& config, const std::filesystem::path& dir,
                                        std::ostringstream& log, bool resume = false, int64_t stop_after = 0,
                                        const std::string& init_from = "") {
  train::TrainOptions options = quiet_train_options(dir, log);
  options.resume = resume;
  options.init_from = init_from;
  options.stop_after = stop_after;
  return train::train(config, options);
}

// `n` characters of word salad from a small vocabulary (an LCG picks the words), so that a tiny
// language model has something to learn within a few dozen steps.
inline std::string word_salad(size_t n, uint32_t seed) {
  static const char* words[] = {"the ", "tide ", "of ", "a ", "wave ", "rolls ", "in ", "and ", "out, ", "sea. "};
  std::string s;
  while (s.size() < n) {
    seed = seed * 1664525u + 1013904223u;
    s += words[(seed >> 16) % 10];
  }
  s.resize(n);
  return s;
}

// Starts `tool args...` (fork + exec) with stdout and stderr both to `output`, on one passive
// OpenMP thread so that several children share the cores; returns its pid (wait for it).
inline pid_t spawn_tool(const std::string& tool, const std::vector<std::string>& args,
                        const std::filesystem::path& output) {
  // Flush first, or the child's freopen would write this process's buffered output a second time.
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed starting " + tool);
  if (pid == 0) {
    FILE* out = std::freopen(output.c_str(), "w", stdout);
    if (out == nullptr || dup2(fileno(stdout), STDERR_FILENO) < 0) _exit(127);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(tool.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv(tool.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// This process's resident set now and its peak so far, in bytes (0 where /proc is unreadable).
inline double rss_bytes() {
  int64_t current = 0, peak = 0;
  return train::process_rss(&current, &peak) ? double(current) : 0.0;
}
inline double rss_peak_bytes() {
  int64_t current = 0, peak = 0;
  return train::process_rss(&current, &peak) ? double(peak) : 0.0;
}

}  // namespace lsf::testing
