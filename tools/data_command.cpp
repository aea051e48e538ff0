// lsf data listops: the LRA ListOps dataset, generated offline (data/listops.h) and written in
// the release's TSV layout: DIR/basic_{train,val,test}.tsv.
//
//   lsf data listops --out lra_release/listops-1000 [--train 96000 --val 2000 --test 2000 --seed 0]
#include <filesystem>
#include <iostream>

#include <lsformer/lsformer.h>

#include "cli.h"
#include "lsformer/data/listops.h"

namespace lsf::cli {
namespace {

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--out", "DIR", "where basic_{train,val,test}.tsv are written (created)"},
      {"--train", "N", "training rows (default 96000)"},
      {"--val", "N", "validation rows (default 2000)"},
      {"--test", "N", "test rows (default 2000)"},
      {"--seed", "S", "generator seed (default 0)"},
      {"--min-length", "L", "tokens per expression > L (default 500)"},
      {"--max-length", "L", "tokens per expression < L (default 2000)"},
  };
  return table;
}

}  // namespace

void data_usage(std::ostream& os) {
  os << "usage: lsf data listops --out DIR [--train N] [--val N] [--test N] [--seed S] [--min-length L] [--max-length L]\n\n"
        "Generates ListOps as the LRA generator does (same operators, depth, argument counts, strict\n"
        "length bounds, de-duplication) and writes LRA's TSV files.\n\n";
  print_flags(os, flags());
}

int run_data(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "listops")
    throw UsageError(args.empty() ? "which dataset? (lsf data listops ...)" : "unknown dataset '" + args[0] + "' (only listops is generated)");
  ParsedFlags parsed = parse_flags(std::vector<std::string>(args.begin() + 1, args.end()), flags());
  const std::string out = flag_value(parsed, "--out");
  if (out.empty()) throw UsageError("--out is required");
  auto count = [&](const char* flag, int64_t fallback, int64_t low) {
    return parsed.count(flag) ? parse_int(flag, flag_value(parsed, flag), low, int64_t(1) << 40) : fallback;
  };
  data::ListOpsOptions options;
  options.seed = uint64_t(count("--seed", 0, 0));
  options.min_length = count("--min-length", options.min_length, 0);
  options.max_length = count("--max-length", options.max_length, 2);
  const int64_t train = count("--train", 96000, 1), val = count("--val", 2000, 1), test = count("--test", 2000, 1);

  data::ListOpsSplits splits = data::generate_listops(train, val, test, options);
  std::filesystem::create_directories(out);
  data::write_listops_dataset(out, splits);
  for (const auto& [name, rows] : {std::pair{"train", &splits.train}, std::pair{"val", &splits.val}, std::pair{"test", &splits.test}})
    std::cout << "wrote " << (std::filesystem::path(out) / ("basic_" + std::string(name) + ".tsv")).string() << " (" << rows->size()
              << " rows)\n";
  return 0;
}

}  // namespace lsf::cli
