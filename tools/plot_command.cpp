// lsf plot: the training and dev curves of one or several runs on shared axes, as SVG or PNG
// (models/train/curves.h).
//
//   lsf plot RUN [RUN ...] [--metric loss,accuracy] [--x step|time] --out curves.svg|curves.png
#include <iostream>
#include <sstream>

#include <lsformer/lsformer.h>

#include "cli.h"
#include "lsformer/models/train/curves.h"

namespace lsf::cli {
namespace {

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--metric", "NAMES", "comma-separated metrics, one panel each (default: loss and the dev metric: accuracy, bpc or top1)"},
      {"--x", "AXIS", "step (default) or time (elapsed seconds)"},
      {"--out", "PATH", "the chart to write: .svg, or .png (drawn through Cairo)"},
  };
  return table;
}

}  // namespace

void plot_usage(std::ostream& os) {
  os << "usage: lsf plot RUN [RUN ...] [--metric loss,accuracy] [--x step|time] --out curves.svg|curves.png\n\n"
     << "RUN is a run directory of lsf train (or its metrics.jsonl).\n\n";
  print_flags(os, flags());
}

int run_plot(const std::vector<std::string>& args) {
  // Run directories are the arguments that are neither flags nor a flag's value.
  std::vector<std::string> runs, flag_args;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--", 0) == 0) {
      flag_args.push_back(args[i]);
      if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) flag_args.push_back(args[++i]);
    } else {
      runs.push_back(args[i]);
    }
  }
  ParsedFlags parsed = parse_flags(flag_args, flags());
  if (runs.empty()) throw UsageError("give at least one run directory");
  const std::string out = flag_value(parsed, "--out");
  if (out.empty()) throw UsageError("--out is required");
  train::CurvesOptions options;
  const std::string x = flag_value(parsed, "--x", "step");
  if (x != "step" && x != "time") throw UsageError("--x expects step or time, got '" + x + "'");
  options.x = x == "step" ? train::CurvesX::Step : train::CurvesX::Time;
  std::stringstream metrics(flag_value(parsed, "--metric"));
  for (std::string m; std::getline(metrics, m, ',');)
    if (!m.empty()) options.metrics.push_back(m);
  for (const std::string& w : train::write_curves(runs, options, out)) std::cerr << "lsf plot: warning: " << w << "\n";
  std::cout << "wrote " << out << "\n";
  return 0;
}

}  // namespace lsf::cli
