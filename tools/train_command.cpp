// lsf train: a run from a JSON config (models/train/trainer.h does the work).
//
//   lsf train --config configs/quickstart.json [--set train.steps=500]... [--out runs/quick]
//             [--resume | --init-from CKPT] [--threads 2] [--bucket-mb 25]
// Data-parallel: `mpirun -np N lsf train ...` (or any launcher that sets the MPI environment):
// every rank runs this command; see models/train/data_parallel.h.
#include <filesystem>
#include <iostream>

#include <lsformer/lsformer.h>

#include "cli.h"
#include "lsformer/engine/distributed.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/trainer.h"

namespace lsf::cli {
namespace {

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--config", "PATH", "the run config (JSON; configs/README.md lists every key)"},
      {"--set", "KEY=VALUE", "override one config key, e.g. --set train.steps=500 (repeatable)", true},
      {"--out", "DIR", "the run directory (default: runs/<config name>, or the first runs/<config name>-N that holds no run and is not in use)"},
      {"--resume", nullptr, "continue the run in --out from its last.safetensors"},
      {"--init-from", "CKPT", "start a new run (a new phase) from this checkpoint's weights; fresh optimizer and schedule"},
      {"--profile", nullptr, "print per-op self time and calls and the time per model phase of the training steps at the end (also LSF_PROFILE=1)"},
      {"--threads", "N", "CPU threads (sets train.threads; per rank under mpirun, default: the cores / the ranks on the machine)"},
      {"--bucket-mb", "MB", "data-parallel runs: the gradient all-reduce's bucket size in MiB (default 25)"},
      {"--detect-anomaly", nullptr, "stop at the first op producing a NaN (forward) or a NaN / Inf gradient (backward), naming it and its module path (slow: a debugging aid)"},
  };
  return table;
}

}  // namespace

int train_with(const std::shared_ptr<dist::ProcessGroup>& world, const std::vector<std::string>& args);

void train_usage(std::ostream& os) {
  os << "usage: lsf train --config PATH [--set KEY=VALUE]... [--out DIR] [--resume | --init-from CKPT] [--threads N] [--profile] [--detect-anomaly]\n\n"
        "Trains a model as the config says; writes config.json, metrics.jsonl, best.safetensors,\n"
        "last.safetensors and summary.json to the run directory, and prints the test result.\n"
        "Data-parallel: mpirun -np N lsf train ... (each rank computes train.batch_size / N rows of\n"
        "every batch; rank 0 writes the run directory; README \"Data-parallel training\").\n\n";
  print_flags(os, flags());
}

// runs/<config name>: for a new run, the trainer takes the first of it, runs/<config name>-2, ...
// that holds no run and is not in use (TrainOptions::first_free_out_dir), so running the same
// command twice, even at the same instant, starts a second run instead of failing (an explicit
// --out that holds a run is an error: continue it with --resume).
static std::string default_run_dir(const std::string& config_path) {
  return (std::filesystem::path("runs") / std::filesystem::path(config_path).stem()).string();
}

int run_train(const std::vector<std::string>& args) {
  // Under mpirun / srun: this process's rank of the job (one process otherwise).
  const std::shared_ptr<dist::ProcessGroup> world = dist::init_world();
  try {
    return train_with(world, args);
  } catch (const UsageError&) {
    throw;  // every rank sees the same flags: each exits with the usage
  } catch (const std::exception& e) {
    if (world->size() == 1) throw;
    // An error one rank saw (a file rank 0 writes, a peer that timed out): end every rank now,
    // or the others would wait for it in their next collective.
    std::cerr << "lsf train: error on rank " << world->rank() << " of " << world->size() << ": " << e.what()
              << "\nlsf train: ending all ranks" << std::endl;
    world->abort(1);
    return 1;
  }
}

int train_with(const std::shared_ptr<dist::ProcessGroup>& world, const std::vector<std::string>& args) {
  ParsedFlags parsed = parse_flags(args, flags());
  const bool resume = parsed.count("--resume") > 0;
  const std::string init_from = flag_value(parsed, "--init-from");
  if (resume && parsed.count("--init-from")) throw UsageError("--init-from starts a new run; it cannot be combined with --resume");
  std::string config_path = flag_value(parsed, "--config");
  std::string out = flag_value(parsed, "--out");
  if (parsed.count("--out") && out.empty()) throw UsageError("--out expects a directory, got an empty value");
  if (config_path.empty()) {
    // A resumed run can take its config from its own directory.
    if (!resume || out.empty()) throw UsageError("--config is required (or --resume with --out DIR of an existing run)");
    config_path = (std::filesystem::path(out) / "config.json").string();
    LSF_CHECK(std::filesystem::exists(config_path))
        << "--resume: '" << out << "' holds no run (no config.json): nothing to resume; give --config for a new run";
  }
  const bool default_out = out.empty();
  if (default_out) out = default_run_dir(config_path);
  std::vector<std::string> overrides = parsed.count("--set") ? parsed.at("--set") : std::vector<std::string>{};
  if (parsed.count("--threads"))
    overrides.push_back("train.threads=" + std::to_string(parse_int("--threads", flag_value(parsed, "--threads"), 1, 4096)));

  train::RunConfig config = train::load_config(config_path, overrides);
  train::TrainOptions options;
  options.out_dir = out;
  options.first_free_out_dir = default_out;
  options.resume = resume;
  options.init_from = init_from;
  options.profile = parsed.count("--profile") > 0;
  options.detect_anomaly = parsed.count("--detect-anomaly") > 0;
  options.program = program_name();
  options.handle_signals = true;
  options.world = world;
  if (parsed.count("--bucket-mb"))
    options.bucket_bytes = int64_t(parse_int("--bucket-mb", flag_value(parsed, "--bucket-mb"), 1, 1 << 20)) << 20;
  const train::TrainSummary summary = train::train(config, options);
  // Interrupted: the shell's convention for a death by that signal (130 SIGINT, 143 SIGTERM).
  return summary.stop_signal != 0 ? 128 + summary.stop_signal : 0;
}

}  // namespace lsf::cli
