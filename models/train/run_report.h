// `lsf report RUN`: one self-contained HTML page about a run (RUN_DIR/report.html) — the
// config's description, the summary (summary.json's dev and test numbers, steps, time, the
// re-check command), the curves drawn inline as SVG (curves.h), for a classifier the confusion
// matrix of its best checkpoint on the dev split (Task::confusion_matrix: one pass over dev; the
// LRA tasks have one), for a char-LM run text sampled from its best checkpoint, and the resolved
// config. Nothing is referenced outside the file (no scripts, style sheets or images to fetch):
// it can be mailed or archived as it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lsf::train {

struct ReportOptions {
  int64_t sample_tokens = 300;     // char-LM runs: characters sampled from best.safetensors; 0: none
  std::string sample_prompt = "the ";
  double sample_temperature = 0.8;
  uint64_t sample_seed = 1;
  bool confusion_matrix = true;    // classifiers: evaluate best.safetensors on dev for the matrix
};

// The page. Errors name the path: a run directory that does not exist or holds no config.json
// or metrics.jsonl. A run that has not finished (no summary.json) gets a page saying so. The
// checkpoint and the re-check command are named through run_dir as given (summary.json's paths
// are relative to where lsf train ran). `warnings` (optional) gets what was skipped: a torn last
// line of metrics.jsonl (the page notes it too).
std::string run_report_html(const std::string& run_dir, const ReportOptions& options = {},
                            std::vector<std::string>* warnings = nullptr);

// Writes run_dir/report.html (atomically) and returns its path.
std::string write_run_report(const std::string& run_dir, const ReportOptions& options = {},
                             std::vector<std::string>* warnings = nullptr);

}  // namespace lsf::train
