// Training curves of one or several runs as an SVG (or PNG) chart (`lsf plot`, and RUN_DIR/curves.svg,
// which `lsf train` redraws at every evaluation): one panel per metric, stacked, sharing the x
// axis (the training step, or the run's elapsed seconds); in each panel every run has its colour,
// its training curve (the log windows of metrics.jsonl) solid and its dev curve (the periodic
// evaluations) dashed with a dot per evaluation, and the best dev point ringed and labelled. One
// legend names every run and the line styles.
//
//   std::vector<RunMetrics> runs = {read_run_metrics("runs/quickstart"), read_run_metrics("runs/full")};
//   write_text(curves_svg(runs, {.metrics = {"loss", "accuracy"}, .x = CurvesX::Time}));
//
// Which way is best: lower for loss, bpc and names ending in "loss" or "bpc"; higher otherwise
// (accuracy, top1, ...). The final evaluations of the best checkpoint ("final": true) are not
// curve points. Dev evaluations carry no elapsed time in metrics.jsonl; on the time axis they are
// placed at the time of the training log line of the same step (linearly interpolated between
// the neighbouring lines otherwise).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lsformer/models/train/svg.h"

namespace lsf::train {

// One line of metrics.jsonl: its numeric values by key (step, loss, accuracy, lr, elapsed_s, ...).
struct MetricRecord {
  int64_t step = 0;
  std::map<std::string, double> values;
};

struct RunMetrics {
  std::string name;                        // the run directory's name (the legend's label)
  std::string path;                        // its metrics.jsonl
  std::vector<MetricRecord> train, dev;    // in file order; final evaluations left out
  std::vector<std::string> warnings;       // a torn last line that was skipped
};

// A run directory (or its metrics.jsonl directly). Errors name the path: a run that does not
// exist, a directory without metrics.jsonl, a file without a single train or dev record, a line
// that is not a JSON object with "split" and "step" (with its line number). A last line without
// its newline that does not parse is a killed writer's torn line: skipped with a warning, as
// `lsf train --resume` does.
RunMetrics read_run_metrics(const std::string& run);

enum class CurvesX { Step, Time };
inline constexpr const char* kCurvesXNames[] = {"step", "time"};

struct CurvesOptions {
  std::vector<std::string> metrics;  // panels; empty: loss and the task's dev metric (accuracy, bpc or top1)
  CurvesX x = CurvesX::Step;
  double width = 760;                // pixels
  double panel_height = 280;
};

// The panels' metrics when options.metrics is empty: "loss", then the first of accuracy, bpc,
// top1 that some run's dev evaluations have.
std::vector<std::string> default_curve_metrics(const std::vector<RunMetrics>& runs);

// The chart. Errors: no runs; a metric none of the runs has (naming the ones they do have).
Svg curves_chart(const std::vector<RunMetrics>& runs, const CurvesOptions& options = {});
// The chart as an SVG document.
std::string curves_svg(const std::vector<RunMetrics>& runs, const CurvesOptions& options = {});

// Reads the runs and writes the chart to `out`: ".svg", or ".png" drawn through Cairo at twice
// the SVG's size (svg_png.h); any other extension is an error naming the two. Replaced atomically.
// Returns the runs' warnings (RunMetrics::warnings).
std::vector<std::string> write_curves(const std::vector<std::string>& runs, const CurvesOptions& options, const std::string& out);

bool lower_is_better(const std::string& metric);

}  // namespace lsf::train
