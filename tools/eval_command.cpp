// lsf eval: the task's metrics (accuracy, bits per character, ...) of a training checkpoint on a
// split, with the data and model rebuilt from the config stored in the checkpoint — the same
// computation as the end of `lsf train`. --set changes evaluation settings of that config.
//
//   lsf eval --checkpoint runs/quickstart/best.safetensors [--split dev|test|train] [--set KEY=VALUE]...
//            [--threads N]
#include <iomanip>
#include <iostream>

#include <lsformer/lsformer.h>

#include "cli.h"
#include "lsformer/models/train/trainer.h"

namespace lsf::cli {
namespace {

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--checkpoint", "PATH", "a checkpoint written by lsf train (best.safetensors, last.safetensors)"},
      {"--split", "SPLIT", "dev, test or train (default test)"},
      {"--set", "KEY=VALUE", "override a key of the stored config for this evaluation (repeatable)", true},
      {"--threads", "N", "CPU threads (default: the run's train.threads)"},
  };
  return table;
}

}  // namespace

void eval_usage(std::ostream& os) {
  os << "usage: lsf eval --checkpoint PATH [--split dev|test|train] [--set KEY=VALUE]... [--threads N]\n\n";
  print_flags(os, flags());
}

int run_eval(const std::vector<std::string>& args) {
  ParsedFlags parsed = parse_flags(args, flags());
  const std::string path = flag_value(parsed, "--checkpoint");
  if (path.empty()) throw UsageError("--checkpoint is required");
  const std::string split = flag_value(parsed, "--split", "test");
  if (split != "dev" && split != "test" && split != "train") throw UsageError("--split expects dev, test or train, got '" + split + "'");
  int threads = parsed.count("--threads") ? int(parse_int("--threads", flag_value(parsed, "--threads"), 1, 4096)) : 0;

  std::vector<std::string> overrides = parsed.count("--set") ? parsed.at("--set") : std::vector<std::string>{};

  train::EvalResult r = train::evaluate_checkpoint(path, split, threads, overrides);
  std::cout << split << " " << train::describe_result(path, r) << "  loss " << std::fixed << std::setprecision(4) << r.loss
            << "  checkpoint step " << r.step << "\n";
  return 0;
}

}  // namespace lsf::cli
