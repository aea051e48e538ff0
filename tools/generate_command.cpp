// lsf generate: text from a char-LM checkpoint (models/train/lm_generate.h does the work). The
// prompt is printed, then each sampled character as soon as it is produced.
//
//   lsf generate --checkpoint runs/quick/best.safetensors --prompt "Tidal " --tokens 200
//                [--temperature 0.8] [--top-k 40] [--top-p 0.95] [--seed 1] [--set KEY=VALUE]... [--threads N]
#include <cctype>
#include <cstdio>
#include <cstdint>
#include <iostream>

#include <lsformer/lsformer.h>

#include "cli.h"
#include "lsformer/models/train/lm_generate.h"

namespace lsf::cli {
namespace {

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--checkpoint", "PATH", "a char-LM checkpoint written by lsf train (data.task \"lm\")"},
      {"--prompt", "TEXT", "the text to continue (characters of the corpus's vocabulary)"},
      {"--tokens", "N", "characters to generate (default 200)"},
      {"--temperature", "T", "sampling temperature in [0, 1e6]; 0 = greedy (default 1)"},
      {"--top-k", "K", "sample among the K most likely characters; 0 = all (default 0)"},
      {"--top-p", "P", "sample from the smallest set of mass ≥ P, in (0, 1] (default 1)"},
      {"--seed", "S", "the sampler's seed: the same seed gives the same text (default 0)"},
      {"--set", "KEY=VALUE", "override a key of the stored config, e.g. model.memory_length (repeatable)", true},
      {"--threads", "N", "CPU threads (default 1: one character at a time is too little work to share)"},
  };
  return table;
}

// A decimal number flag value in [low, high] ((low, high] when low_open), or a UsageError naming
// the flag and the range as --help states it. Leading spaces and hexadecimal, which std::stod
// takes, are refused: "0x10" as a temperature is a typo, not 16.
double parse_number(const std::string& flag, const std::string& value, double low, double high, bool low_open = false) {
  size_t used = 0;
  double x = 0;
  const bool decimal = !value.empty() && value.find_first_of("xX") == std::string::npos &&
                       (std::isdigit(static_cast<unsigned char>(value[0])) || value[0] == '.' || value[0] == '-' || value[0] == '+');
  try {
    if (decimal) x = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const bool in_range = low_open ? x > low && x <= high : x >= low && x <= high;
  if (!decimal || used != value.size() || !in_range) {
    char range[64];
    std::snprintf(range, sizeof(range), "%s%g, %g]", low_open ? "(" : "[", low, high);
    throw UsageError(flag + " expects a number in " + range + ", got '" + value + "'");
  }
  return x;
}

}  // namespace

void generate_usage(std::ostream& os) {
  os << "usage: lsf generate --checkpoint PATH --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
        "                    [--seed S] [--set KEY=VALUE]... [--threads N]\n\n"
        "Continues the prompt with a character-level language model trained by lsf train (data.task \"lm\"),\n"
        "printing the prompt and then each character as it is sampled.\n\n";
  print_flags(os, flags());
}

int run_generate(const std::vector<std::string>& args) {
  ParsedFlags parsed = parse_flags(args, flags());
  train::LmGenerateOptions o;
  const std::string path = flag_value(parsed, "--checkpoint");
  if (path.empty()) throw UsageError("--checkpoint is required");
  if (!parsed.count("--prompt")) throw UsageError("--prompt is required");
  o.prompt = flag_value(parsed, "--prompt");
  if (o.prompt.empty()) throw UsageError("--prompt must hold at least one character");
  o.tokens = parsed.count("--tokens") ? parse_int("--tokens", flag_value(parsed, "--tokens"), 0, int64_t(1) << 40) : 200;
  if (parsed.count("--temperature")) o.sampling.temperature = parse_number("--temperature", flag_value(parsed, "--temperature"), 0.0, 1e6);
  if (parsed.count("--top-k")) o.sampling.top_k = parse_int("--top-k", flag_value(parsed, "--top-k"), 0, int64_t(1) << 31);
  if (parsed.count("--top-p")) o.sampling.top_p = parse_number("--top-p", flag_value(parsed, "--top-p"), 0.0, 1.0, /*low_open=*/true);
  if (parsed.count("--seed")) o.seed = uint64_t(parse_int("--seed", flag_value(parsed, "--seed"), 0, INT64_MAX));
  set_num_threads(parsed.count("--threads") ? int(parse_int("--threads", flag_value(parsed, "--threads"), 1, 4096)) : 1);
  o.overrides = parsed.count("--set") ? parsed.at("--set") : std::vector<std::string>{};

  o.echo_prompt = true;
  o.keep_text = false;  // streamed: --tokens may be far more than memory holds
  train::generate_text(path, o, [](char c) { std::cout << c << std::flush; });
  std::cout << "\n";
  return 0;
}

}  // namespace lsf::cli
