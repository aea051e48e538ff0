// Training curves as SVG (see curves.h): reading metrics.jsonl, the panel layout, ticks, legend
// and best points. Drawing goes through the engine-free Svg builder (svg.h).
#include "lsformer/models/train/curves.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "lsformer/engine/error.h"
#include "lsformer/engine/safetensors.h"
#include "lsformer/models/train/svg.h"
#include "lsformer/models/train/svg_png.h"

namespace lsf::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Points = std::vector<std::pair<double, double>>;

// Distinguishable on white and for the common colour-vision deficiencies (Tableau 10's order).
constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

std::string format_value(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

// Ticks at multiples of 1, 2 or 5 × 10^k inside [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target = 5) {
  const double span = hi - lo;
  const double raw = span / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

// The x of a dev evaluation at `step` on the time axis: the elapsed seconds of the training log
// line of that step, interpolated between neighbouring lines (see curves.h). NaN without any.
double time_at_step(const std::vector<MetricRecord>& train, int64_t step) {
  double prev_step = 0.0, prev_time = 0.0;
  for (const MetricRecord& r : train) {
    auto it = r.values.find("elapsed_s");
    if (it == r.values.end()) continue;
    if (r.step == step) return it->second;
    if (r.step > step) {
      const double f = (double(step) - prev_step) / (double(r.step) - prev_step);
      return prev_time + f * (it->second - prev_time);
    }
    prev_step = double(r.step), prev_time = it->second;
  }
  return prev_step > 0 ? prev_time : NAN;
}

// The (x, value) points of `metric` in `records` (non-finite values left out).
Points series(const RunMetrics& run, const std::vector<MetricRecord>& records, const std::string& metric, CurvesX x,
              bool dev) {
  Points points;
  for (const MetricRecord& r : records) {
    auto it = r.values.find(metric);
    if (it == r.values.end() || !std::isfinite(it->second)) continue;
    double px = double(r.step);
    if (x == CurvesX::Time) {
      auto t = r.values.find("elapsed_s");
      px = dev ? time_at_step(run.train, r.step) : (t == r.values.end() ? NAN : t->second);
      if (!std::isfinite(px)) continue;
    }
    points.push_back({px, it->second});
  }
  return points;
}

bool has_metric(const std::vector<MetricRecord>& records, const std::string& metric) {
  return std::any_of(records.begin(), records.end(), [&](const MetricRecord& r) { return r.values.count(metric) > 0; });
}

// The legend: one entry per run (its colour), then the line styles; wrapped into rows.
double draw_legend(Svg& svg, const std::vector<RunMetrics>& runs, double width) {
  struct Entry {
    std::string label, colour;
    int style;  // 0: a run's colour; 1: train (solid); 2: dev (dashed, dots); 3: best dev (ring)
  };
  std::vector<Entry> entries;
  for (size_t i = 0; i < runs.size(); ++i) entries.push_back({runs[i].name, kColours[i % std::size(kColours)], 0});
  entries.push_back({"train", "#444", 1});
  entries.push_back({"dev", "#444", 2});
  entries.push_back({"best dev", "#444", 3});
  const double row_height = 20, left = 16;
  double x = left, y = 18;
  svg.begin_group({{"class", "legend"}});
  for (const Entry& e : entries) {
    const double w = 34 + 7.2 * double(e.label.size()) + 18;
    if (x + w > width - 8 && x > left) x = left, y += row_height;
    if (e.style == 3) {
      svg.circle(x + 12, y - 4, 5, {{"fill", "none"}, {"stroke", e.colour}, {"stroke-width", "2"}});
    } else {
      Svg::Attributes a = {{"stroke", e.colour}, {"stroke-width", e.style == 0 ? "3" : "1.6"}};
      if (e.style == 2) a.push_back({"stroke-dasharray", "5,3"});
      svg.line(x, y - 4, x + 24, y - 4, a);
      if (e.style == 2) svg.circle(x + 12, y - 4, 2.5, {{"fill", e.colour}});
    }
    svg.text(x + 30, y, e.label, {{"class", e.style == 0 ? "legend-run" : "legend-style"}});
    x += w;
  }
  svg.end_group();
  return y + 12;
}

// One metric's panel between y = top and top + height.
void draw_panel(Svg& svg, const std::vector<RunMetrics>& runs, const std::string& metric, const CurvesOptions& o,
                double top) {
  const double left = 78, right = o.width - 24, plot_top = top + 30, plot_bottom = top + o.panel_height - 44;
  std::vector<Points> train(runs.size()), dev(runs.size());
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (size_t i = 0; i < runs.size(); ++i) {
    train[i] = series(runs[i], runs[i].train, metric, o.x, false);
    dev[i] = series(runs[i], runs[i].dev, metric, o.x, true);
    for (const Points* p : {&train[i], &dev[i]})
      for (const auto& [x, y] : *p) x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x), y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
  }
  svg.begin_group({{"class", "panel"}, {"data-metric", metric}});
  svg.text(left, top + 18, metric, {{"font-size", "14"}, {"font-weight", "bold"}});
  if (!std::isfinite(x_lo)) {  // the metric exists but has no finite value to draw
    svg.text((left + right) / 2, (plot_top + plot_bottom) / 2, "no finite values", {{"text-anchor", "middle"}, {"fill", "#888"}});
    svg.end_group();
    return;
  }
  if (x_lo >= 0) x_lo = 0;  // steps and seconds start at 0
  if (x_hi <= x_lo) x_hi = x_lo + 1;
  if (y_hi <= y_lo) {
    const double pad = std::max(std::abs(y_lo) * 0.05, 1e-3);
    y_lo -= pad, y_hi += pad;
  } else {
    const double pad = (y_hi - y_lo) * 0.06;
    y_lo -= pad, y_hi += pad;
  }
  auto px = [&](double x) { return left + (x - x_lo) / (x_hi - x_lo) * (right - left); };
  auto py = [&](double y) { return plot_bottom - (y - y_lo) / (y_hi - y_lo) * (plot_bottom - plot_top); };

  // Grid, ticks and their labels, the frame, the axis labels.
  for (double t : nice_ticks(y_lo, y_hi)) {
    svg.line(left, py(t), right, py(t), {{"stroke", "#e6e6e6"}});
    svg.text(left - 6, py(t) + 4, format_value(t), {{"text-anchor", "end"}, {"class", "tick"}});
  }
  for (double t : nice_ticks(x_lo, x_hi, 6)) {
    svg.line(px(t), plot_top, px(t), plot_bottom, {{"stroke", "#e6e6e6"}});
    svg.line(px(t), plot_bottom, px(t), plot_bottom + 4, {{"stroke", "#888"}});
    svg.text(px(t), plot_bottom + 17, format_value(t), {{"text-anchor", "middle"}, {"class", "tick"}});
  }
  svg.rect(left, plot_top, right - left, plot_bottom - plot_top, {{"fill", "none"}, {"stroke", "#888"}});
  svg.text((left + right) / 2, plot_bottom + 36, o.x == CurvesX::Step ? "step" : "time (s)",
           {{"text-anchor", "middle"}, {"class", "axis-label"}});
  const double mid = (plot_top + plot_bottom) / 2;
  svg.text(18, mid, metric, {{"text-anchor", "middle"}, {"transform", "rotate(-90 18 " + svg_number(mid) + ")"},
                             {"class", "axis-label"}});

  const bool lower = lower_is_better(metric);
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string colour = kColours[i % std::size(kColours)];
    auto to_pixels = [&](const Points& p) {
      Points q;
      for (const auto& [x, y] : p) q.push_back({px(x), py(y)});
      return q;
    };
    if (!train[i].empty())
      svg.polyline(to_pixels(train[i]), {{"stroke", colour}, {"stroke-width", "1.6"}, {"stroke-linejoin", "round"},
                                         {"data-run", runs[i].name}, {"data-split", "train"}});
    if (dev[i].empty()) continue;
    svg.polyline(to_pixels(dev[i]), {{"stroke", colour}, {"stroke-width", "1.8"}, {"stroke-dasharray", "5,3"},
                                     {"data-run", runs[i].name}, {"data-split", "dev"}});
    if (dev[i].size() <= 80)
      for (const auto& [x, y] : dev[i]) svg.circle(px(x), py(y), 2.5, {{"fill", colour}});
    // The best dev point: the first one reaching the best value.
    size_t best = 0;
    for (size_t k = 1; k < dev[i].size(); ++k)
      if (lower ? dev[i][k].second < dev[i][best].second : dev[i][k].second > dev[i][best].second) best = k;
    const double bx = px(dev[i][best].first), by = py(dev[i][best].second);
    svg.circle(bx, by, 6, {{"fill", "none"}, {"stroke", colour}, {"stroke-width", "2"}, {"class", "best"},
                           {"data-run", runs[i].name}});
    const std::string label = "best " + format_value(dev[i][best].second) + (o.x == CurvesX::Step ? " @ step " : " @ ") +
                              format_value(dev[i][best].first) + (o.x == CurvesX::Step ? "" : " s");
    const bool near_right = bx > right - 150;
    const double ly = by - 10 < plot_top + 12 ? by + 20 : by - 10;  // inside the frame
    svg.text(near_right ? bx - 8 : bx + 8, ly, label,
             {{"text-anchor", near_right ? "end" : "start"}, {"fill", colour}, {"class", "best-label"},
              // a white halo keeps the label readable where it crosses a curve or the grid
              {"stroke", "white"}, {"stroke-width", "3"}, {"stroke-linejoin", "round"}, {"paint-order", "stroke"}});
  }
  svg.end_group();
}

std::string run_name(const fs::path& dir) {
  fs::path p = dir.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  std::string name = p.filename().string();
  return name.empty() || name == "." ? fs::absolute(p).lexically_normal().filename().string() : name;
}

}  // namespace

bool lower_is_better(const std::string& m) {
  auto ends_with = [&](const std::string& s) { return m.size() >= s.size() && m.compare(m.size() - s.size(), s.size(), s) == 0; };
  return ends_with("loss") || ends_with("bpc");
}

RunMetrics read_run_metrics(const std::string& run) {
  LSF_CHECK(fs::exists(run)) << "run '" << run << "' does not exist";
  RunMetrics r;
  fs::path file = run;
  if (fs::is_directory(file)) {
    r.name = run_name(file);
    file /= "metrics.jsonl";
    LSF_CHECK(fs::exists(file)) << "run '" << run << "' has no metrics.jsonl (not a run directory of lsf train?)";
  } else {
    r.name = run_name(file.parent_path().empty() ? fs::path(".") : file.parent_path());
  }
  r.path = file.string();
  std::ifstream in(file);
  LSF_CHECK(in) << "cannot read '" << r.path << "'";
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (in.eof() && (j.is_discarded() || !j.is_object())) {  // no newline after it: a torn last line
      r.warnings.push_back("skipped line " + std::to_string(line_number) + " of '" + r.path +
                           "': a torn last line (the run was killed while writing it)");
      break;
    }
    LSF_CHECK(!j.is_discarded() && j.is_object() && j.contains("split") && j["split"].is_string() && j.contains("step") &&
              j["step"].is_number_integer())
        << "'" << r.path << "' line " << line_number << ": not a metrics record (a JSON object with \"split\" and \"step\")";
    if (j.value("final", false)) continue;
    MetricRecord record;
    record.step = j["step"].get<int64_t>();
    for (const auto& [key, value] : j.items())
      if (value.is_number() && key != "step") record.values[key] = value.get<double>();
    const std::string split = j["split"].get<std::string>();
    if (split == "train") r.train.push_back(std::move(record));
    else if (split == "dev") r.dev.push_back(std::move(record));
  }
  LSF_CHECK(!r.train.empty() || !r.dev.empty()) << "'" << r.path << "' holds no metrics (no train or dev record yet)";
  return r;
}

std::vector<std::string> default_curve_metrics(const std::vector<RunMetrics>& runs) {
  std::vector<std::string> metrics = {"loss"};
  for (const char* m : {"accuracy", "bpc", "top1"}) {
    if (std::any_of(runs.begin(), runs.end(), [&](const RunMetrics& r) { return has_metric(r.dev, m); })) {
      metrics.push_back(m);
      break;
    }
  }
  return metrics;
}

Svg curves_chart(const std::vector<RunMetrics>& runs, const CurvesOptions& options) {
  LSF_CHECK(!runs.empty()) << "plot: no runs given";
  LSF_CHECK(options.width >= 200 && options.panel_height >= 120)
      << "plot: the chart needs width ≥ 200 and panel height ≥ 120, got " << options.width << " and " << options.panel_height;
  const std::vector<std::string> metrics = options.metrics.empty() ? default_curve_metrics(runs) : options.metrics;
  for (const std::string& m : metrics) {
    const bool found = m != "step" && std::any_of(runs.begin(), runs.end(), [&](const RunMetrics& r) {
      return has_metric(r.train, m) || has_metric(r.dev, m);
    });
    if (found) continue;
    std::set<std::string> known;
    for (const RunMetrics& r : runs)
      for (const auto* records : {&r.train, &r.dev})
        for (const MetricRecord& rec : *records)
          for (const auto& [k, v] : rec.values) known.insert(k);
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    LSF_FAIL() << "plot: unknown metric '" << m << "' (the runs have: " << list << ")";
  }
  // The legend's height depends on its wrapping: draw it into a scratch document first.
  Svg scratch(options.width, 100);
  const double legend_height = draw_legend(scratch, runs, options.width);
  const double height = legend_height + double(metrics.size()) * options.panel_height + 4;
  Svg svg(options.width, height);
  svg.rect(0, 0, options.width, height, {{"fill", "white"}});
  draw_legend(svg, runs, options.width);
  for (size_t i = 0; i < metrics.size(); ++i)
    draw_panel(svg, runs, metrics[i], options, legend_height + double(i) * options.panel_height);
  return svg;
}

std::string curves_svg(const std::vector<RunMetrics>& runs, const CurvesOptions& options) {
  return curves_chart(runs, options).str();
}

std::vector<std::string> write_curves(const std::vector<std::string>& runs, const CurvesOptions& options, const std::string& out) {
  const std::string extension = fs::path(out).extension().string();
  LSF_CHECK(extension == ".svg" || extension == ".png")
      << "plot: cannot write '" << out << "': the chart is written as .svg or .png, got '" << extension << "'";
  LSF_CHECK(!runs.empty()) << "plot: no runs given";
  std::vector<RunMetrics> metrics;
  for (const std::string& run : runs) metrics.push_back(read_run_metrics(run));
  if (extension == ".png") write_svg_as_png(curves_chart(metrics, options), out);
  else write_file_atomically(out, curves_svg(metrics, options));
  std::vector<std::string> warnings;
  for (const RunMetrics& m : metrics) warnings.insert(warnings.end(), m.warnings.begin(), m.warnings.end());
  return warnings;
}

}  // namespace lsf::train
