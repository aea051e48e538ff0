// lsf report: RUN_DIR/report.html, one self-contained page about a run (models/train/run_report.h).
//
//   lsf report RUN [--samples N] [--prompt TEXT]
#include <iostream>

#include <lsformer/lsformer.h>

#include "cli.h"
#include "lsformer/models/train/run_report.h"

namespace lsf::cli {
namespace {

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--samples", "N", "char-LM runs: characters to sample from best.safetensors (default 300; 0: none)"},
      {"--prompt", "TEXT", "char-LM runs: the sample's prompt (default \"the \")"},
  };
  return table;
}

}  // namespace

void report_usage(std::ostream& os) {
  os << "usage: lsf report RUN [--samples N] [--prompt TEXT]\n\nRUN is a run directory of lsf train; the page is "
        "written to RUN/report.html.\n\n";
  print_flags(os, flags());
}

int run_report(const std::vector<std::string>& args) {
  if (args.empty() || args[0].rfind("--", 0) == 0) throw UsageError("give the run directory first (lsf report RUN)");
  ParsedFlags parsed = parse_flags(std::vector<std::string>(args.begin() + 1, args.end()), flags());
  train::ReportOptions options;
  if (parsed.count("--samples")) options.sample_tokens = parse_int("--samples", flag_value(parsed, "--samples"), 0, 100000);
  if (parsed.count("--prompt")) options.sample_prompt = flag_value(parsed, "--prompt");
  // Written first: "wrote" is printed only for a page that exists (an error names its cause alone).
  std::vector<std::string> warnings;
  const std::string page = train::write_run_report(args[0], options, &warnings);
  for (const std::string& w : warnings) std::cerr << "lsf report: warning: " << w << "\n";
  std::cout << "wrote " << page << "\n";
  return 0;
}

}  // namespace lsf::cli
