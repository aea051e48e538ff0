// lsf attention: the attention map of one example under a training checkpoint's model
// (models/train/attention_map.h): the window band, the dynamic-projection slots and the
// projection weights P of long-short attention, the matrix of full attention and Linformer, the
// same over the image for vision models.
//
//   lsf attention --checkpoint C [--split dev|test|train] [--index I] [--layer L] [--head H]
//                 [--query Q] [--set KEY=VALUE]... [--threads N] --out attn.svg|attn.png
#include <iostream>

#include <lsformer/lsformer.h>

#include "cli.h"
#include "lsformer/models/train/attention_map.h"

namespace lsf::cli {
namespace {

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--checkpoint", "PATH", "a checkpoint written by lsf train (best.safetensors, last.safetensors)"},
      {"--split", "SPLIT", "dev (default), test or train"},
      {"--index", "I", "the example of the split (char-LM: the block of model.block_length characters); default 0"},
      {"--layer", "L", "the attention layer, 0-based in module order (default 0)"},
      {"--head", "H", "the head (default 0)"},
      {"--query", "Q", "the highlighted query (vision: the patch; LRA Image and Pathfinder: the pixel; both row-major); default: the middle one"},
      {"--set", "KEY=VALUE", "override a key of the stored config (repeatable)", true},
      {"--threads", "N", "CPU threads (default: the run's train.threads)"},
      {"--out", "PATH", "the picture to write: .svg, or .png (drawn through Cairo)"},
  };
  return table;
}

}  // namespace

void attention_usage(std::ostream& os) {
  os << "usage: lsf attention --checkpoint PATH [--split dev|test|train] [--index I] [--layer L] [--head H]\n"
     << "                     [--query Q] [--set KEY=VALUE]... [--threads N] --out attn.svg|attn.png\n\n";
  print_flags(os, flags());
}

int run_attention(const std::vector<std::string>& args) {
  ParsedFlags parsed = parse_flags(args, flags());
  const std::string checkpoint = flag_value(parsed, "--checkpoint");
  if (checkpoint.empty()) throw UsageError("--checkpoint is required");
  const std::string out = flag_value(parsed, "--out");
  if (out.empty()) throw UsageError("--out is required");
  train::AttentionMapOptions o;
  o.split = flag_value(parsed, "--split", "dev");
  if (o.split != "dev" && o.split != "test" && o.split != "train")
    throw UsageError("--split expects dev, test or train, got '" + o.split + "'");
  constexpr int64_t kMax = int64_t(1) << 40;
  if (parsed.count("--index")) o.index = parse_int("--index", flag_value(parsed, "--index"), 0, kMax);
  if (parsed.count("--layer")) o.layer = parse_int("--layer", flag_value(parsed, "--layer"), 0, kMax);
  if (parsed.count("--head")) o.head = parse_int("--head", flag_value(parsed, "--head"), 0, kMax);
  if (parsed.count("--query")) o.query = parse_int("--query", flag_value(parsed, "--query"), 0, kMax);
  if (parsed.count("--threads")) o.threads = int(parse_int("--threads", flag_value(parsed, "--threads"), 1, 4096));
  if (parsed.count("--set")) o.overrides = parsed.at("--set");
  train::write_attention_map(checkpoint, o, out);
  std::cout << "wrote " << out << "\n";
  return 0;
}

}  // namespace lsf::cli
