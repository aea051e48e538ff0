// lsf data: writes a dataset to disk.
//   listops  the LRA ListOps dataset, generated offline (data/listops.h) and written in the
//            release's TSV layout: DIR/basic_{train,val,test}.tsv.
//   pathfinder  LRA Pathfinder images, generated offline (tools/data_pathfinder_command.cpp).
//   text     any text split contiguously 90/5/5 for the char-LM (data/char_corpus.h), written as
//            DIR/{train,dev,test}.txt (the raw bytes of each split).
//
//   lsf data listops --out lra_release/listops-1000 [--train 96000 --val 2000 --test 2000 --seed 0]
//   lsf data text --from gcide --out data/gcide
//   lsf data text --from enwik8.zip --out data/enwik8
#include <filesystem>
#include <iostream>

#include <lsformer/lsformer.h>

#include "cli.h"
#include "lsformer/data/char_corpus.h"
#include "lsformer/data/debian_corpus.h"
#include "lsformer/data/listops.h"

namespace lsf::cli {
namespace {

const std::vector<Flag>& listops_flags() {
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

const std::vector<Flag>& text_flags() {
  static const std::vector<Flag> table = {
      {"--from", "PATH", "a text file, a one-entry .zip (enwik8.zip), a .gz/.dz, or gcide (Debian's dict-gcide)"},
      {"--out", "DIR", "where train.txt, dev.txt and test.txt are written (created)"},
  };
  return table;
}

int run_text(const std::vector<std::string>& args) {
  ParsedFlags parsed = parse_flags(args, text_flags());
  const std::string from = flag_value(parsed, "--from"), out = flag_value(parsed, "--out");
  if (from.empty()) throw UsageError("--from is required");
  if (out.empty()) throw UsageError("--out is required");
  // "gcide" names the Debian package's corpus unless a file of that name is right here.
  const bool package = from == "gcide" && !std::filesystem::exists(from);
  const std::string path = package ? data::find_gcide() : from;
  const std::string bytes = package ? data::read_dictd_text(path) : data::read_text_source(path, "lsf data text");
  const data::CharCorpus corpus =
      data::split_corpus(package ? "gcide" : std::filesystem::path(path).filename().string(), bytes,
                         data::fractional_split_sizes(int64_t(bytes.size()), path), data::CharAlphabet::kBytes, path);
  data::write_corpus_splits(out, corpus);
  std::cout << "read " << path << " (" << bytes.size() << " bytes)\n";
  for (data::LmSplit split : {data::LmSplit::kTrain, data::LmSplit::kDev, data::LmSplit::kTest})
    std::cout << "wrote " << (std::filesystem::path(out) / (std::string(data::lm_split_name(split)) + ".txt")).string()
              << " (" << corpus.split(split).size() << " bytes)\n";
  return 0;
}

}  // namespace

void data_usage(std::ostream& os) {
  os << "usage: lsf data listops --out DIR [--train N] [--val N] [--test N] [--seed S] [--min-length L] [--max-length L]\n"
        "       lsf data text --from PATH --out DIR\n"
        "       lsf data pathfinder --out DIR [--size 32|64|128] [--difficulty baseline|9|14] [--count N] [--seed S]\n\n"
        "listops: generates ListOps as the LRA generator does (same operators, depth, argument counts,\n"
        "strict length bounds, de-duplication) and writes LRA's TSV files.\n\n";
  print_flags(os, listops_flags());
  os << "\ntext: splits a text contiguously for character-level language modelling (first 90% train,\n"
        "next 5% dev, last 5% test; enwik8's 10^8 bytes give its standard 90M/5M/5M) and writes the raw\n"
        "bytes of each split. `--from gcide` takes the offline English corpus that scripts/install-deps.sh\n"
        "installs (Debian's dict-gcide).\n\n";
  print_flags(os, text_flags());
  os << "\n";
  data_pathfinder_usage(os);
}

int run_data(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "text") return run_text(std::vector<std::string>(args.begin() + 1, args.end()));
  if (!args.empty() && args[0] == "pathfinder") return run_data_pathfinder(std::vector<std::string>(args.begin() + 1, args.end()));
  if (args.empty() || args[0] != "listops")
    throw UsageError(args.empty() ? "which dataset? (lsf data listops|text|pathfinder ...)"
                                  : "unknown dataset '" + args[0] + "' (lsf data listops, text or pathfinder)");
  ParsedFlags parsed = parse_flags(std::vector<std::string>(args.begin() + 1, args.end()), listops_flags());
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
