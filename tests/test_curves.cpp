// Pictures of a run: the SVG builder (models/train/svg.h), training curves from metrics.jsonl
// (curves.h: one polyline per run, split and metric with one point per record, a legend naming
// every run, the best dev point ringed, named errors for bad input), curves.svg refreshed by a
// training run, and the self-contained HTML report (run_report.h). The documents are checked with
// a minimal XML reader: every tag closed in order, attributes quoted.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "helpers.h"
#include "markup.h"
#include "run_helpers.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/curves.h"
#include "lsformer/models/train/run_report.h"
#include "lsformer/models/train/svg.h"
#include "lsformer/models/train/svg_png.h"
#include "lsformer/models/train/trainer.h"

namespace fs = std::filesystem;
using namespace lsf;
using Catch::Contains;
using lsf::testing::Element;
using lsf::testing::parse_markup;

namespace {

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("curves", name, /*create=*/true); }

size_t point_count(const std::string& points) {
  std::stringstream ss(points);
  size_t n = 0;
  for (std::string pair; ss >> pair;) {
    CHECK(std::regex_match(pair, std::regex(R"(-?\d+(\.\d)?,-?\d+(\.\d)?)")));
    ++n;
  }
  return n;
}

// A metrics.jsonl of `train_lines` log lines (every 10 steps) and dev evaluations every 20
// steps, the dev accuracy peaking at step `best_step`, plus the final evaluations.
void write_metrics(const fs::path& dir, int train_lines, int best_step) {
  fs::create_directories(dir);
  std::ofstream out(dir / "metrics.jsonl");
  for (int i = 1; i <= train_lines; ++i) {
    const int step = 10 * i;
    out << R"({"split":"train","step":)" << step << R"(,"loss":)" << 2.0 / i << R"(,"accuracy":)" << 0.1 + 0.01 * i
        << R"(,"lr":0.001,"samples_per_s":100.5,"elapsed_s":)" << 0.5 * i << "}\n";
    if (step % 20 == 0) {
      const double acc = step == best_step ? 0.9 : 0.5 + 0.001 * step;
      out << R"({"split":"dev","step":)" << step << R"(,"loss":)" << 1.5 / i << R"(,"accuracy":)" << acc
          << R"(,"correct":3,"examples":10})" << "\n";
    }
  }
  out << R"({"split":"dev","step":)" << best_step << R"(,"loss":0.1,"accuracy":0.9,"final":true})" << "\n";
  out << R"({"split":"test","step":)" << best_step << R"(,"loss":0.1,"accuracy":0.8,"final":true})" << "\n";
}

// polyline (run, split, metric) → its point count.
std::map<std::tuple<std::string, std::string, std::string>, size_t> polylines(const std::vector<Element>& elements) {
  std::map<std::tuple<std::string, std::string, std::string>, size_t> lines;
  std::string metric;
  for (const Element& e : elements) {
    if (e.tag == "g" && e.attributes.count("data-metric")) metric = e.attributes.at("data-metric");
    if (e.tag == "polyline" && e.attributes.count("data-run"))
      lines[{e.attributes.at("data-run"), e.attributes.at("data-split"), metric}] = point_count(e.attributes.at("points"));
  }
  return lines;
}

}  // namespace

TEST_CASE("the SVG builder escapes text and attributes and balances groups", "[plot]") {
  CHECK(train::xml_escape("a<b & \"c\" 'd'>") == "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  CHECK(train::svg_number(12.345) == "12.3");
  CHECK(train::svg_number(-0.01) == "0");
  CHECK(train::svg_number(7.0) == "7");
  CHECK_THROWS_WITH(train::svg_number(NAN), Contains("not finite"));
  train::Svg svg(100, 50);
  svg.begin_group({{"class", "x"}});
  svg.text(1, 2, "<run & \"1\">", {{"data-run", "a\"b"}});
  svg.polyline({{0, 0}, {10.26, 5}});
  CHECK_THROWS_WITH(svg.str(), Contains("1 group(s) left open"));
  svg.end_group();
  const std::vector<Element> elements = parse_markup(svg.str());
  REQUIRE(elements.size() == 4);
  CHECK(elements[0].tag == "svg");
  CHECK(elements[2].attributes.at("data-run") == "a&quot;b");
  CHECK(elements[3].attributes.at("points") == "0,0 10.3,5");
}

TEST_CASE("curves of two runs: a polyline per run, split and metric, a legend, best points", "[plot]") {
  const fs::path dir = fresh_dir("two");
  write_metrics(dir / "run_a", 10, 60);   // 10 train lines, dev at 20..100, best at 60
  write_metrics(dir / "run_b", 6, 40);    // 6 train lines, dev at 20..60, best at 40
  std::vector<train::RunMetrics> runs = {train::read_run_metrics((dir / "run_a").string()),
                                         train::read_run_metrics((dir / "run_b" / "metrics.jsonl").string())};
  CHECK(runs[0].name == "run_a");
  CHECK(runs[1].name == "run_b");
  CHECK(runs[0].train.size() == 10);
  CHECK(runs[0].dev.size() == 5);  // the final evaluations are not curve points
  CHECK(train::default_curve_metrics(runs) == std::vector<std::string>{"loss", "accuracy"});

  for (train::CurvesX x : {train::CurvesX::Step, train::CurvesX::Time}) {
    const std::string svg = train::curves_svg(runs, {.x = x});
    const std::vector<Element> elements = parse_markup(svg);
    const auto lines = polylines(elements);
    CHECK(lines.size() == 8);  // 2 runs × {train, dev} × {loss, accuracy}
    for (const char* metric : {"loss", "accuracy"}) {
      CHECK(lines.at({"run_a", "train", metric}) == 10);
      CHECK(lines.at({"run_a", "dev", metric}) == 5);
      CHECK(lines.at({"run_b", "train", metric}) == 6);
      CHECK(lines.at({"run_b", "dev", metric}) == 3);
    }
    std::set<std::string> legend;
    int best_rings = 0;
    std::vector<std::string> texts;
    for (const Element& e : elements) best_rings += e.attributes.count("class") && e.attributes.at("class") == "best";
    for (size_t at = 0; (at = svg.find("class=\"legend-run\">", at)) != std::string::npos; ++at)
      legend.insert(svg.substr(at + 19, svg.find('<', at) - at - 19));
    CHECK(legend == std::set<std::string>{"run_a", "run_b"});
    CHECK(best_rings == 4);  // each run's best dev point in both panels
    CHECK_THAT(svg, Contains(x == train::CurvesX::Step ? "best 0.9 @ step 60" : "best 0.9 @ 3 s"));  // run_a: step 60 = 3 s
    CHECK_THAT(svg, Contains(x == train::CurvesX::Step ? "best 0.9 @ step 40" : "best 0.9 @ 2 s"));
    CHECK_THAT(svg, Contains(x == train::CurvesX::Step ? ">step</text>" : ">time (s)</text>"));
  }
  // One metric picked; lower is better for loss: the best dev loss is the last evaluation.
  const std::string loss_only = train::curves_svg(runs, {.metrics = {"loss"}});
  CHECK(polylines(parse_markup(loss_only)).size() == 4);
  CHECK_THAT(loss_only, Contains("best 0.15 @ step 100"));
  CHECK(train::lower_is_better("loss"));
  CHECK(train::lower_is_better("bpc"));
  CHECK(!train::lower_is_better("accuracy"));
  fs::remove_all(dir);
}

TEST_CASE("bad plot inputs give named errors", "[plot]") {
  const fs::path dir = fresh_dir("bad");
  CHECK_THROWS_WITH(train::read_run_metrics((dir / "nope").string()), Contains("run '") && Contains("nope' does not exist"));
  fs::create_directories(dir / "empty_run");
  CHECK_THROWS_WITH(train::read_run_metrics((dir / "empty_run").string()), Contains("has no metrics.jsonl"));
  std::ofstream(dir / "empty_run" / "metrics.jsonl") << "\n";
  CHECK_THROWS_WITH(train::read_run_metrics((dir / "empty_run").string()), Contains("holds no metrics"));
  std::ofstream(dir / "empty_run" / "metrics.jsonl") << R"({"split":"train","step":1,"loss":1})" << "\nnot json\n";
  CHECK_THROWS_WITH(train::read_run_metrics((dir / "empty_run").string()), Contains("metrics.jsonl' line 2: not a metrics record"));
  // A last line without its newline that does not parse is a killed writer's: skipped with a
  // warning (as lsf train --resume does), where a bad line followed by more is an error.
  std::ofstream(dir / "empty_run" / "metrics.jsonl") << R"({"split":"train","step":1,"loss":1})" << "\n"
                                                     << R"({"split":"train","step":2,"lo)";
  const train::RunMetrics torn = train::read_run_metrics((dir / "empty_run").string());
  CHECK(torn.train.size() == 1);
  REQUIRE(torn.warnings.size() == 1);
  CHECK_THAT(torn.warnings[0], Contains("skipped line 2 of '") && Contains("a torn last line"));
  CHECK(train::write_curves({(dir / "empty_run").string()}, {}, (dir / "torn.svg").string()) == torn.warnings);

  write_metrics(dir / "ok", 4, 40);
  const std::vector<train::RunMetrics> runs = {train::read_run_metrics((dir / "ok").string())};
  CHECK_THROWS_WITH(train::curves_svg(runs, {.metrics = {"loss", "perplexity"}}),
                    Contains("unknown metric 'perplexity'") && Contains("the runs have: accuracy, correct, elapsed_s"));
  CHECK_THROWS_WITH(train::curves_svg({}), Contains("no runs given"));
  CHECK_THROWS_WITH(train::write_curves({(dir / "ok").string()}, {}, (dir / "c.pdf").string()),
                    Contains("written as .svg or .png, got '.pdf'"));
  CHECK(!fs::exists(dir / "c.pdf"));
  train::write_curves({(dir / "ok").string()}, {}, (dir / "c.svg").string());
  CHECK(parse_markup(testing::read_file(dir / "c.svg")).size() > 20);
  fs::remove_all(dir);
}

TEST_CASE("lsf plot draws PNG through Cairo at twice the SVG's size", "[plot]") {
  const fs::path dir = fresh_dir("png");
  write_metrics(dir / "run", 8, 40);
  const train::Svg chart = train::curves_chart({train::read_run_metrics((dir / "run").string())});
  train::write_curves({(dir / "run").string()}, {}, (dir / "c.png").string());
  const std::string png = testing::read_file(dir / "c.png");
  REQUIRE(png.size() > 33);
  CHECK(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));  // the PNG signature
  CHECK(png.substr(12, 4) == "IHDR");
  auto be32 = [&](size_t at) { return (uint32_t(uint8_t(png[at])) << 24) | (uint32_t(uint8_t(png[at + 1])) << 16) |
                                      (uint32_t(uint8_t(png[at + 2])) << 8) | uint32_t(uint8_t(png[at + 3])); };
  CHECK(be32(16) == uint32_t(std::ceil(chart.width() * 2)));
  CHECK(be32(20) == uint32_t(std::ceil(chart.height() * 2)));
  // A drawing the renderer cannot reproduce is an error, not a silently different picture.
  train::Svg odd(10, 10);
  odd.rect(0, 0, 10, 10, {{"fill", "rebeccapurple"}});
  CHECK_THROWS_WITH(train::write_svg_as_png(odd, (dir / "odd.png").string()), Contains("unsupported colour 'rebeccapurple'"));
  fs::remove_all(dir);
}

TEST_CASE("a training run keeps curves.svg current, and lsf report writes a self-contained page", "[plot][report]") {
  const fs::path dir = fresh_dir("train") / "tiny_run";
  std::ostringstream log;
  train::TrainOptions options;
  options.out_dir = dir.string();
  options.log = &log;
  options.out = &log;
  options.progress = 0;
  train::train(train::parse_config(testing::kTinyListopsRun), options);
  INFO(log.str());
  REQUIRE(fs::exists(dir / "curves.svg"));
  const auto lines = polylines(parse_markup(testing::read_file(dir / "curves.svg")));
  CHECK(lines.at({"tiny_run", "train", "loss"}) == 6);  // log_every 2 over 12 steps
  CHECK(lines.at({"tiny_run", "dev", "accuracy"}) == 3);  // eval_every 4: the last drawing saw all three

  const std::string path = train::write_run_report(dir.string());
  CHECK(path == (dir / "report.html").string());
  const std::string html = testing::read_file(path);
  const std::vector<Element> elements = parse_markup(html, {"meta", "br"});
  std::map<std::string, int> tags;
  for (const Element& e : elements) {
    ++tags[e.tag];
    // Self-contained: nothing is fetched from elsewhere.
    CHECK(!e.attributes.count("src"));
    CHECK(!e.attributes.count("href"));
    CHECK(!e.attributes.count("xlink:href"));
  }
  CHECK(tags["html"] == 1);
  CHECK(tags["svg"] == 1);      // the curves, inline
  CHECK(tags["img"] == 0);
  CHECK(tags["script"] == 0);
  CHECK(tags["link"] == 0);
  CHECK(tags["polyline"] >= 4);
  // Accuracies as percentages, as the progress line and the summary print them.
  CHECK(std::regex_search(html, std::regex(R"(<td>accuracy</td><td>\d+\.\d%</td><td>\d+\.\d%</td>)")));
  CHECK_THAT(html, Contains("<h2>Summary</h2>") && Contains("<td>accuracy</td>") && Contains("<h2>Config</h2>") &&
                       Contains("&quot;tensorboard_every&quot;: 0"));

  // The confusion matrix of best.safetensors on dev: 10 ListOps classes, every dev example once,
  // its diagonal the correct count that the final dev evaluation of the same checkpoint printed.
  const auto summary = nlohmann::json::parse(testing::read_file(dir / "summary.json"));
  int64_t total = 0, diagonal = 0, cells = 0;
  for (const Element& e : elements) {
    if (e.tag != "td" || !e.attributes.count("data-count")) continue;
    ++cells;
    const int64_t n = std::stoll(e.attributes.at("data-count"));
    total += n;
    if (e.attributes.at("data-truth") == e.attributes.at("data-predicted")) diagonal += n;
  }
  CHECK(cells == 100);
  CHECK(total == summary.at("dev").at("examples").get<int64_t>());
  CHECK(diagonal == summary.at("dev").at("correct").get<int64_t>());

  // Moved (or viewed from elsewhere), the page names the checkpoint where the run now is, not
  // summary.json's path from where lsf train ran.
  const fs::path moved = dir.parent_path() / "moved run";
  fs::copy(dir, moved, fs::copy_options::recursive);
  const std::string moved_html = testing::read_file(train::write_run_report(moved.string()));
  const std::string moved_best = (moved / "best.safetensors").string();
  CHECK_THAT(moved_html, Contains("(" + moved_best + ")") && Contains("eval --checkpoint &apos;" + moved_best + "&apos; --split test"));
  CHECK_THAT(moved_html, !Contains((dir / "best.safetensors").string()));
  // A torn last line of metrics.jsonl is noted on the page and returned as a warning.
  std::ofstream(moved / "metrics.jsonl", std::ios::app) << R"({"split":"train","st)";
  std::vector<std::string> warnings;
  const std::string torn_html = testing::read_file(train::write_run_report(moved.string(), {}, &warnings));
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(torn_html, Contains("a torn last line"));
  fs::remove_all(moved);

  CHECK_THROWS_WITH(train::write_run_report((dir / "nope").string()), Contains("does not exist"));
  CHECK_THROWS_WITH(train::write_run_report((dir / "summary.json").string()), Contains("summary.json' is not a directory"));
  fs::remove(dir / "config.json");
  CHECK_THROWS_WITH(train::write_run_report(dir.string()), Contains("has no config.json"));
  fs::remove_all(dir.parent_path());
}
