// The HTML run report (see run_report.h).
#include "lsformer/models/train/run_report.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "lsformer/engine/error.h"
#include "lsformer/engine/safetensors.h"
#include "lsformer/models/train/curves.h"
#include "lsformer/models/train/lm_generate.h"
#include "lsformer/models/train/progress.h"
#include "lsformer/models/train/svg.h"
#include "lsformer/models/train/trainer.h"

namespace lsf::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  LSF_CHECK(in) << "report: cannot read '" << path.string() << "'";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string cell(const json& v) {
  if (v.is_null()) return "";
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.6g", v.get<double>());
    return buf;
  }
  return xml_escape(v.is_string() ? v.get<std::string>() : v.dump());
}

// A fraction shown as a percentage (0.441 → "44.1%"), as the progress line and the summary
// print accuracies; other numbers as cell() shows them.
std::string metric_cell(const std::string& key, const json& v) {
  const bool fraction = key.size() >= 8 && key.compare(key.size() - 8, 8, "accuracy") == 0;
  if (!(fraction || key == "top1" || key == "top5") || !v.is_number()) return cell(v);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * v.get<double>());
  return buf;
}

// summary.json as two tables: the dev and test numbers side by side, then the run's facts, the
// best checkpoint and the re-check command named through `dir` (as the user gave it to lsf
// report), not through summary.json's paths, which are relative to where lsf train ran.
std::string summary_section(const json& s, const fs::path& dir) {
  std::string html = "<h2>Summary</h2>\n<table>\n<tr><th>metric</th><th>dev</th><th>test</th></tr>\n";
  const json dev = s.value("dev", json::object()), test = s.value("test", json::object());
  for (const auto& [key, value] : dev.items()) {
    if (key == "split" || key == "step") continue;
    html += "<tr><td>" + xml_escape(key) + "</td><td>" + metric_cell(key, value) + "</td><td>" +
            metric_cell(key, test.value(key, json())) + "</td></tr>\n";
  }
  html += "</table>\n<table>\n";
  auto row = [&](const std::string& label, const std::string& value) {
    html += "<tr><th>" + xml_escape(label) + "</th><td>" + value + "</td></tr>\n";
  };
  row("steps", cell(s.value("steps", json())));
  const std::string best = (dir / "best.safetensors").string();
  row("best checkpoint", "step " + cell(s.value("best_step", json())) + " (" + xml_escape(best) + ")");
  if (s.contains("wall_seconds") && s["wall_seconds"].is_number())
    row("wall time", xml_escape(format_duration(s["wall_seconds"].get<double>())) + " on " + cell(s.value("threads", json())) + " threads");
  row("final training loss", cell(s.value("final_train_loss", json())));
  // The program as the run's command named it ("lsf", or the path it was run by).
  const std::string recorded = s.value("eval_command", std::string());
  const size_t eval = recorded.find(" eval --checkpoint ");
  const std::string program = eval == std::string::npos ? "lsf" : recorded.substr(0, eval);
  row("re-check", "<code>" + xml_escape(program + " eval --checkpoint " + shell_quote(best) + " --split test") + "</code>");
  return html + "</table>\n";
}

// The matrix as a table, each cell shaded by its share of its row (the true class).
std::string confusion_section(const ConfusionMatrix& m) {
  std::string html = "<h2>Confusion matrix (dev, best checkpoint)</h2>\n<p class=\"note\">Rows: the true class; columns: "
                     "the predicted class; shading: the share of the row.</p>\n<table class=\"confusion\">\n<tr><th>true \\ predicted</th>";
  for (int64_t p = 0; p < m.classes; ++p) html += "<th>" + std::to_string(p) + "</th>";
  html += "</tr>\n";
  for (int64_t t = 0; t < m.classes; ++t) {
    int64_t row = 0;
    for (int64_t p = 0; p < m.classes; ++p) row += m.at(t, p);
    html += "<tr><th>" + std::to_string(t) + "</th>";
    for (int64_t p = 0; p < m.classes; ++p) {
      const double share = row > 0 ? double(m.at(t, p)) / double(row) : 0.0;
      char style[96];
      std::snprintf(style, sizeof(style), "background:rgba(%s,%.2f)", t == p ? "44,160,44" : "214,39,40", share);
      html += "<td style=\"" + std::string(style) + "\" data-truth=\"" + std::to_string(t) + "\" data-predicted=\"" +
              std::to_string(p) + "\" data-count=\"" + std::to_string(m.at(t, p)) + "\">" + std::to_string(m.at(t, p)) + "</td>";
    }
    html += "</tr>\n";
  }
  return html + "</table>\n";
}

constexpr const char* kStyle = R"(body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;max-width:820px;margin:24px auto;padding:0 12px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 10px;text-align:left;font-size:13px}
th{background:#f5f5f5}pre{background:#f7f7f7;padding:8px;font-size:12px;overflow-x:auto;white-space:pre-wrap}
.note{color:#666;font-size:13px}figure{margin:0}table.confusion td{text-align:right;min-width:28px})";

}  // namespace

std::string run_report_html(const std::string& run_dir, const ReportOptions& options, std::vector<std::string>* warnings) {
  const fs::path dir = run_dir;
  LSF_CHECK(fs::exists(dir)) << "report: run directory '" << run_dir << "' does not exist";
  LSF_CHECK(fs::is_directory(dir)) << "report: '" << run_dir << "' is not a directory (give the run directory of lsf train)";
  LSF_CHECK(fs::exists(dir / "config.json")) << "report: '" << run_dir << "' has no config.json (not a run directory of lsf train?)";
  const RunMetrics metrics = read_run_metrics(run_dir);
  const json config = json::parse(read_text(dir / "config.json"), nullptr, /*allow_exceptions=*/false);
  LSF_CHECK(!config.is_discarded() && config.is_object()) << "report: '" << (dir / "config.json").string() << "' is not a JSON object";

  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>lsformer run " +
                     xml_escape(metrics.name) + "</title>\n<style>\n" + kStyle + "\n</style>\n</head>\n<body>\n";
  html += "<h1>Run " + xml_escape(metrics.name) + "</h1>\n";
  const std::string description = config.value("description", std::string());
  const std::string task = config.contains("data") ? config["data"].value("task", std::string()) : std::string();
  html += "<p>" + (description.empty() ? std::string() : xml_escape(description) + "<br>") + "task <code>" + xml_escape(task) +
          "</code>, directory <code>" + xml_escape(fs::absolute(dir).lexically_normal().string()) + "</code></p>\n";

  if (fs::exists(dir / "summary.json")) {
    const json s = json::parse(read_text(dir / "summary.json"), nullptr, /*allow_exceptions=*/false);
    LSF_CHECK(!s.is_discarded() && s.is_object()) << "report: '" << (dir / "summary.json").string() << "' is not a JSON object";
    html += summary_section(s, dir);
  } else {
    html += "<h2>Summary</h2>\n<p class=\"note\">The run has not finished (no summary.json): the curves show it so far.</p>\n";
  }

  const std::string svg = curves_svg({metrics});
  html += "<h2>Curves</h2>\n<figure>\n" + svg.substr(svg.find("<svg")) + "</figure>\n";
  for (const std::string& w : metrics.warnings) html += "<p class=\"note\">" + xml_escape(w) + "</p>\n";
  if (warnings) warnings->insert(warnings->end(), metrics.warnings.begin(), metrics.warnings.end());

  if (options.confusion_matrix && fs::exists(dir / "best.safetensors")) {
    try {
      const ConfusionMatrix m = checkpoint_confusion_matrix((dir / "best.safetensors").string(), "dev");
      if (m.classes > 0) html += confusion_section(m);
    } catch (const Error& e) {  // e.g. the data files moved since the run
      html += "<h2>Confusion matrix</h2>\n<p class=\"note\">Not computed: " + xml_escape(e.what()) + "</p>\n";
    }
  }

  if (task == "lm" && options.sample_tokens > 0 && fs::exists(dir / "best.safetensors")) {
    html += "<h2>Sample</h2>\n";
    LmGenerateOptions g;
    g.prompt = options.sample_prompt;
    g.tokens = options.sample_tokens;
    g.sampling.temperature = options.sample_temperature;
    g.seed = options.sample_seed;
    try {
      const std::string text = generate_text((dir / "best.safetensors").string(), g);
      char settings[160];
      std::snprintf(settings, sizeof(settings), "%lld characters from best.safetensors, temperature %.2g, seed %llu, after the prompt",
                    static_cast<long long>(options.sample_tokens), options.sample_temperature,
                    static_cast<unsigned long long>(options.sample_seed));
      html += "<p class=\"note\">" + xml_escape(settings) + " <code>" + xml_escape(options.sample_prompt) + "</code>:</p>\n<pre>" +
              xml_escape(options.sample_prompt) + "<b>" + xml_escape(text) + "</b></pre>\n";
    } catch (const Error& e) {
      html += "<p class=\"note\">No sample: " + xml_escape(e.what()) + "</p>\n";
    }
  }

  html += "<h2>Config</h2>\n<pre>" + xml_escape(config.dump(2)) + "</pre>\n";
  html += "<p class=\"note\">Written by lsf report from " + xml_escape(metrics.path) + ".</p>\n</body>\n</html>\n";
  return html;
}

std::string write_run_report(const std::string& run_dir, const ReportOptions& options, std::vector<std::string>* warnings) {
  const std::string html = run_report_html(run_dir, options, warnings);
  const std::string path = (fs::path(run_dir) / "report.html").string();
  write_file_atomically(path, html);
  return path;
}

}  // namespace lsf::train
