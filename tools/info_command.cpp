// lsf info: the build (version, options, BLAS, threads, CPU kernels, devices), or with --model the size and
// forward cost of a config's model, built through its task (models/train/task.h,
// Task::summarize_model) without random initialisation.
//
//   lsf info [--threads N]
//   lsf info --model configs/vision/vil_ls_medium_224.json [--set KEY=VALUE]... [--threads N]
//     vil_ls_medium_224, 224×224×3 images, 1000 classes
//       39,799,423 parameters
//       8.69 GFLOPs per image (forward; one multiply-add = one FLOP, as the papers count)
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <lsformer/lsformer.h>

#include "cli.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/memory_estimate.h"
#include "lsformer/models/train/task.h"

namespace lsf::cli {
namespace {

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--model", "CONFIG", "print the parameters and forward GFLOPs of this run config's model (or a checkpoint's: a .safetensors file)"},
      {"--set", "KEY=VALUE", "with --model: override one config key (repeatable)", true},
      {"--threads", "N", "CPU threads"},
  };
  return table;
}

}  // namespace

void info_usage(std::ostream& os) {
  os << "usage: lsf info [--threads N]\n"
        "       lsf info --model CONFIG [--set KEY=VALUE]... [--threads N]\n\n"
        "Without --model: version, build options, BLAS, threads, the CPU kernels (vector level,\n"
        "bf16 products) and devices. With --model: the config's model, its parameter count and\n"
        "(where the task measures it) the multiply-adds of one forward pass of one example, in\n"
        "GFLOPs as the papers count them.\n\n";
  print_flags(os, flags());
}

int run_info(const std::vector<std::string>& args) {
  ParsedFlags parsed = parse_flags(args, flags());
  if (parsed.count("--threads")) set_num_threads(int(parse_int("--threads", flag_value(parsed, "--threads"), 1, 4096)));
  const std::string config_path = flag_value(parsed, "--model");
  if (config_path.empty()) {
    if (parsed.count("--set")) throw UsageError("--set needs --model CONFIG");
    std::cout << build_info();
    return 0;
  }
  const std::vector<std::string> overrides = parsed.count("--set") ? parsed.at("--set") : std::vector<std::string>{};
  // A checkpoint names its model by the config stored in it.
  const bool checkpoint = std::filesystem::path(config_path).extension() == ".safetensors";
  const train::RunConfig config =
      checkpoint ? train::checkpoint_config(config_path, overrides) : train::load_config(config_path, overrides);
  const std::unique_ptr<train::Task> task = train::make_task(config);
  // The model is built to be described: refused first if its parameters alone cannot fit (a
  // million layers took minutes to build before failing).
  train::MemoryEstimate parameters;
  for (const auto& part : task->estimate_memory(train::MemoryUse::Eval).parts)
    if (part.what == "parameters") parameters.parts.push_back(part);
  train::check_memory_fits(parameters, config, "building the model");
  const train::ModelSummary s = task->summarize_model();
  std::cout << s.description << "\n  " << grouped(s.parameters) << " parameters\n";
  if (s.multiply_adds >= 0) {
    // Two decimals as the papers print them; three significant digits for small models.
    const double gflops = double(s.multiply_adds) * 1e-9;
    std::cout << "  " << std::fixed << std::setprecision(gflops >= 1 ? 2 : gflops >= 0.1 ? 3 : gflops >= 0.01 ? 4 : 5) << gflops
              << " GFLOPs per " << s.example
              << " (forward; one multiply-add = one FLOP, as the papers count)\n";
  } else {
    std::cout << "  (the " << config.task << " task does not count multiply-adds)\n";
  }
  return 0;
}

}  // namespace lsf::cli
