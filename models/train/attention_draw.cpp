// Drawing of attention pictures (attention_map.h): SequencePicture and ImagePicture as SVG
// through svg.h, the layout maths in attention_layout.h.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "lsformer/engine/error.h"
#include "lsformer/models/train/attention_layout.h"
#include "lsformer/models/train/attention_map.h"

namespace lsf::train {

namespace {

constexpr int kLevels = 24;
constexpr const char* kQueryColour = "#d62728";  // the highlighted query
constexpr const char* kWindowColour = "#08306b";
constexpr const char* kSlotColour = "#e6550d";
constexpr const char* kMemoryShade = "#e8e8e8";
constexpr const char* kBandShade = "#fdf6dc";  // the window band's extent

double max_of(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, x);
  return m;
}

std::string fmt(double v, int digits = 2) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// A heat map of `m` [rows, cols] at (x, y) with cells cw × ch: one rect per run of equal level.
void heat_map(Svg& svg, const std::vector<double>& m, int64_t rows, int64_t cols, double x, double y, double cw,
              double ch, double vmax) {
  svg.rect(x, y, double(cols) * cw, double(rows) * ch, {{"fill", "none"}, {"stroke", "#999999"}, {"stroke-width", "0.5"}});
  svg.begin_group({{"shape-rendering", "crispEdges"}});
  std::vector<int> levels(static_cast<size_t>(cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) levels[size_t(j)] = colour_level(m[size_t(i * cols + j)], vmax, kLevels);
    for (const LevelRun& run : level_runs(levels))
      svg.rect(x + double(run.begin) * cw, y + double(i) * ch, double(run.length) * cw, ch,
               {{"fill", level_colour(run.level, kLevels)}});
  }
  svg.end_group();
}

// A colour ramp legend from 0 to vmax at (x, y).
void legend(Svg& svg, double x, double y, double vmax, const std::string& label) {
  const double w = 120, h = 8;
  for (int l = 1; l <= kLevels; ++l)
    svg.rect(x + w * (l - 1) / kLevels, y, w / kLevels + 0.3, h, {{"fill", level_colour(l, kLevels)}});
  svg.rect(x, y, w, h, {{"fill", "none"}, {"stroke", "#999999"}, {"stroke-width", "0.5"}});
  svg.text(x, y + h + 11, "0", {{"font-size", "10"}});
  svg.text(x + w, y + h + 11, fmt(vmax, 3), {{"font-size", "10"}, {"text-anchor", "end"}});
  svg.text(x, y - 4, label, {{"font-size", "10"}});
}

// Characters of 11-px caption text that fit in a picture `width` wide (DejaVu Sans averages
// about 6.4 px a character at that size).
size_t note_chars(double width) { return size_t(std::max(40.0, (width - 24) / 6.6)); }

// Lines broken at spaces to at most `chars` characters (a longer word stays whole).
std::vector<std::string> wrap_lines(const std::vector<std::string>& lines, size_t chars) {
  std::vector<std::string> out;
  for (const std::string& line : lines) {
    std::istringstream words(line);
    std::string current, word;
    while (words >> word) {
      if (!current.empty() && current.size() + 1 + word.size() > chars) {
        out.push_back(current);
        current.clear();
      }
      current += (current.empty() ? "" : " ") + word;
    }
    if (!current.empty()) out.push_back(current);
  }
  return out;
}

// Tick labels along an axis of `bins` cells of size `cell` starting at `origin` (at most ~10).
std::vector<int64_t> tick_bins(const AxisBins& b) {
  std::vector<int64_t> out;
  const int64_t step = std::max<int64_t>(1, (b.bins + 9) / 10);
  for (int64_t i = 0; i < b.bins; i += step) out.push_back(i);
  return out;
}

}  // namespace

Svg draw_sequence_picture(const SequencePicture& p, int64_t query, int64_t max_cells) {
  const int64_t Q = p.queries, K = p.keys, S = p.slots;
  LSF_CHECK(Q > 0 && K > 0 && int64_t(p.on_keys.size()) == Q * K && int64_t(p.on_slots.size()) == Q * S &&
            int64_t(p.pooling.size()) == S * K)
      << "attention picture: inconsistent sizes (Q " << Q << ", K " << K << ", S " << S << "; " << p.on_keys.size()
      << ", " << p.on_slots.size() << ", " << p.pooling.size() << " values)";
  LSF_CHECK(query >= 0 && query < Q) << "attention picture: query " << query << " outside 0.." << Q - 1;
  const AxisBins rb = make_bins(Q, max_cells), kb = make_bins(K, max_cells), sb = make_bins(S, 64);
  const std::vector<double> keys = bin_matrix(p.on_keys, Q, K, rb, kb);
  const std::vector<double> slots = S > 0 ? bin_matrix(p.on_slots, Q, S, rb, sb) : std::vector<double>{};
  const std::vector<double> pool = S > 0 ? bin_matrix(p.pooling, S, K, sb, kb) : std::vector<double>{};

  const double c = std::clamp(std::floor(560.0 / double(std::max(rb.bins, kb.bins))), 2.0, 16.0);
  const double cs = S > 0 ? std::clamp(std::floor(200.0 / double(sb.bins)), 3.0, 16.0) : 0.0;
  const double ph = S > 0 ? std::clamp(std::floor(160.0 / double(sb.bins)), 3.0, 12.0) : 0.0;
  // Labels only where a cell is wide enough for 8-px text.
  const bool key_text = kb.per_bin == 1 && K <= 96 && c >= 8, slot_text = S > 0 && sb.per_bin == 1 && cs >= 8;
  const double x0 = 70, y0 = 100;
  const double Wk = double(kb.bins) * c, Hq = double(rb.bins) * c, Ws = double(sb.bins) * cs;
  const double yp = y0 + Hq + 30, Hp = double(sb.bins) * ph;
  const double ys = (S > 0 ? yp + Hp + 34 : y0 + Hq + 34), strip = 70;
  const double ylabels = ys + strip + 8;
  const double notes_y = ylabels + (key_text ? 44 : 30);
  const double width = std::max(x0 + Wk + (S > 0 ? 30 + Ws : 0) + 170, 640.0);
  std::vector<std::string> notes = p.notes;  // wrapped below
  if (rb.per_bin > 1 || kb.per_bin > 1 || sb.per_bin > 1) {
    std::ostringstream os;
    os << "Binned to stay legible: a cell is " << rb.per_bin << " queries × " << kb.per_bin
       << " keys (the mean over its queries of their attention summed over its keys)";
    if (sb.per_bin > 1) os << ", slots in groups of " << sb.per_bin;
    os << ".";
    notes.push_back(os.str());
  }
  notes.push_back("Colours: white → dark blue, each panel scaled to its own maximum (legends)" +
                  std::string(p.in_band.empty() ? "" : "; pale yellow: the window band's keys") + "; the red row is query " +
                  std::to_string(query) + ".");
  notes = wrap_lines(notes, note_chars(width));
  const double height = notes_y + 16.0 * double(notes.size()) + 10;
  Svg svg(width, height);
  svg.rect(0, 0, width, height, {{"fill", "white"}});
  svg.text(12, 22, p.title, {{"font-size", "15"}, {"font-weight", "bold"}});

  // Memory shading under the keys and P panels.
  if (p.memory > 0) {
    const double wm = std::min(double(p.memory) / double(kb.per_bin), double(kb.bins)) * c;
    svg.rect(x0, y0, wm, Hq, {{"fill", kMemoryShade}});
    if (S > 0) svg.rect(x0, yp, wm, Hp, {{"fill", kMemoryShade}});
    svg.text(x0 + wm / 2, y0 - 6, "memory", {{"font-size", "10"}, {"text-anchor", "middle"}, {"fill", "#666666"}});
    svg.text(x0 + wm + (Wk - wm) / 2, y0 - 6, "block", {{"font-size", "10"}, {"text-anchor", "middle"}, {"fill", "#666666"}});
  }
  // The window band's extent, faintly, so that it shows where the attention is small.
  if (!p.in_band.empty()) {
    const std::vector<double> band = bin_matrix(p.in_band, Q, K, rb, kb);
    svg.begin_group({{"shape-rendering", "crispEdges"}});
    std::vector<int> inside(static_cast<size_t>(kb.bins));
    for (int64_t i = 0; i < rb.bins; ++i) {
      for (int64_t j = 0; j < kb.bins; ++j) inside[size_t(j)] = band[size_t(i * kb.bins + j)] > 0 ? 1 : 0;
      for (const LevelRun& run : level_runs(inside))
        svg.rect(x0 + double(run.begin) * c, y0 + double(i) * c, double(run.length) * c, c, {{"fill", kBandShade}});
    }
    svg.end_group();
  }
  const double vk = max_of(keys), vs = max_of(slots), vp = max_of(pool);
  svg.text(x0, y0 - 34, p.keys_title, {{"font-size", "12"}, {"font-weight", "bold"}});
  svg.text(x0, y0 - 20, "rows: queries, columns: keys", {{"font-size", "10"}, {"fill", "#666666"}});
  heat_map(svg, keys, rb.bins, kb.bins, x0, y0, c, c, vk);
  // Query axis ticks.
  for (int64_t b : tick_bins(rb))
    svg.text(x0 - 4, y0 + (double(b) + 0.5) * c + 3, std::to_string(rb.begin(b)), {{"font-size", "9"}, {"text-anchor", "end"}});
  svg.text(14, y0 + Hq / 2, "query", {{"font-size", "11"}, {"transform", "rotate(-90 14 " + svg_number(y0 + Hq / 2) + ")"},
                                       {"text-anchor", "middle"}});
  const int64_t qb = rb.bin_of(query);
  svg.rect(x0 - 1, y0 + double(qb) * c - 0.5, Wk + 2, c + 1, {{"fill", "none"}, {"stroke", kQueryColour}, {"stroke-width", "1.2"}});

  double xl = x0 + Wk + 30;
  if (S > 0) {
    const double xs = x0 + Wk + 30;
    svg.text(xs, y0 - 34, p.slots_title, {{"font-size", "12"}, {"font-weight", "bold"}});
    heat_map(svg, slots, rb.bins, sb.bins, xs, y0, cs, c, vs);
    svg.rect(xs - 1, y0 + double(qb) * c - 0.5, Ws + 2, c + 1, {{"fill", "none"}, {"stroke", kQueryColour}, {"stroke-width", "1.2"}});
    if (slot_text) {
      for (int64_t i = 0; i < S; ++i) {
        const double tx = xs + (double(i) + 0.5) * cs + 3, ty = y0 + Hq + 4;
        svg.text(tx, ty, p.slot_labels.empty() ? std::to_string(i) : p.slot_labels[size_t(i)],
                 {{"font-size", "8"}, {"transform", "rotate(90 " + svg_number(tx) + " " + svg_number(ty) + ")"}});
      }
    }
    // P under the keys panel, on the same key axis.
    svg.text(x0, yp - 6, p.pooling_title, {{"font-size", "12"}, {"font-weight", "bold"}});
    heat_map(svg, pool, sb.bins, kb.bins, x0, yp, c, ph, vp);
    if (slot_text && ph >= 7) {
      for (int64_t i = 0; i < S; ++i)
        svg.text(x0 - 4, yp + (double(i) + 0.5) * ph + 3, p.slot_labels.empty() ? std::to_string(i) : p.slot_labels[size_t(i)],
                 {{"font-size", "8"}, {"text-anchor", "end"}});
    } else {
      svg.text(x0 - 4, yp + Hp / 2 + 3, "slots", {{"font-size", "9"}, {"text-anchor", "end"}});
    }
    xl = xs + Ws + 30;
  }
  legend(svg, xl, y0 + 10, vk, p.slots > 0 ? "window" : "attention");
  if (S > 0) {
    legend(svg, xl, y0 + 60, vs, "slots");
    legend(svg, xl, y0 + 110, vp, "P");
  }

  // The chosen query's effective attention over the keys: window part and slot part stacked.
  std::vector<double> window(static_cast<size_t>(K)), through_slots(static_cast<size_t>(K), 0.0);
  for (int64_t j = 0; j < K; ++j) window[size_t(j)] = p.on_keys[size_t(query * K + j)];
  if (S > 0) {
    std::vector<double> a(static_cast<size_t>(S));
    for (int64_t i = 0; i < S; ++i) a[size_t(i)] = p.on_slots[size_t(query * S + i)];
    const std::vector<double> eff = effective_attention(std::vector<double>(size_t(K), 0.0), a, p.pooling, K);
    through_slots = eff;
  }
  std::vector<double> wb(static_cast<size_t>(kb.bins), 0.0), sbins(static_cast<size_t>(kb.bins), 0.0);
  for (int64_t j = 0; j < K; ++j) {
    wb[size_t(kb.bin_of(j))] += window[size_t(j)];
    sbins[size_t(kb.bin_of(j))] += through_slots[size_t(j)];
  }
  double vmax = 0;
  for (int64_t b = 0; b < kb.bins; ++b) vmax = std::max(vmax, wb[size_t(b)] + sbins[size_t(b)]);
  svg.text(x0, ys - 6, "query " + std::to_string(query) + ": its attention over the keys (window, slots spread through P)",
           {{"font-size", "12"}, {"font-weight", "bold"}});
  svg.rect(x0, ys, Wk, strip, {{"fill", "none"}, {"stroke", "#999999"}, {"stroke-width", "0.5"}});
  if (vmax > 0) {
    for (int64_t b = 0; b < kb.bins; ++b) {
      const double hw = strip * wb[size_t(b)] / vmax, hs = strip * sbins[size_t(b)] / vmax;
      if (hw > 0.05) svg.rect(x0 + double(b) * c, ys + strip - hw, c, hw, {{"fill", kWindowColour}});
      if (hs > 0.05) svg.rect(x0 + double(b) * c, ys + strip - hw - hs, c, hs, {{"fill", kSlotColour}});
    }
  }
  const int64_t own = query + p.query_offset;
  if (own >= 0 && own < K) {
    const double xq = x0 + (double(kb.bin_of(own)) + 0.5) * c;
    // An outlined triangle (Svg::polyline is never filled).
    svg.polyline({{xq - 4, ys + strip + 7}, {xq, ys + strip + 1}, {xq + 4, ys + strip + 7}, {xq - 4, ys + strip + 7}},
                 {{"stroke", kQueryColour}, {"stroke-width", "1.5"}});
  }
  svg.text(x0 + Wk + 8, ys + 12, "■ window", {{"font-size", "10"}, {"fill", kWindowColour}});
  if (S > 0) svg.text(x0 + Wk + 8, ys + 26, "■ slots through P", {{"font-size", "10"}, {"fill", kSlotColour}});
  svg.text(x0 + Wk + 8, ys + 40, "max " + fmt(vmax, 3), {{"font-size", "10"}});
  // Key axis: the tokens when they fit, else tick numbers.
  if (key_text) {
    for (int64_t j = 0; j < K; ++j) {
      const double tx = x0 + (double(j) + 0.5) * c + 3, ty = ylabels;
      const std::string& label = p.key_labels.empty() ? std::to_string(j) : p.key_labels[size_t(j)];
      svg.text(tx, ty, label, {{"font-size", "8"}, {"transform", "rotate(90 " + svg_number(tx) + " " + svg_number(ty) + ")"}});
    }
  } else {
    for (int64_t b : tick_bins(kb))
      svg.text(x0 + (double(b) + 0.5) * c, ylabels + 6, std::to_string(kb.begin(b)), {{"font-size", "9"}, {"text-anchor", "middle"}});
  }

  double y = notes_y;
  for (const std::string& line : notes) {
    svg.text(12, y, line, {{"font-size", "11"}, {"fill", "#333333"}});
    y += 16;
  }
  return svg;
}

namespace {

// The image with `overlay` [side²] (per patch) blended in red, as cells of at most 64 per side.
void image_panel(Svg& svg, const ImagePicture& p, const std::vector<double>& overlay, double x, double y, double size,
                 const std::string& title) {
  svg.text(x, y - 8, title, {{"font-size", "12"}, {"font-weight", "bold"}});
  const AxisBins yb = make_bins(p.height, 64), xb = make_bins(p.width, 64);
  const double cw = size / double(xb.bins), ch = size / double(yb.bins);
  const double vmax = max_of(overlay);
  svg.begin_group({{"shape-rendering", "crispEdges"}});
  for (int64_t by = 0; by < yb.bins; ++by) {
    std::string run_colour;
    int64_t run_begin = 0;
    auto flush = [&](int64_t end) {
      if (!run_colour.empty())
        svg.rect(x + double(run_begin) * cw, y + double(by) * ch, double(end - run_begin) * cw, ch, {{"fill", run_colour}});
    };
    for (int64_t bx = 0; bx < xb.bins; ++bx) {
      double rgb[3] = {0, 0, 0};
      int64_t count = 0;
      for (int64_t py = yb.begin(by); py < yb.end(by); ++py)
        for (int64_t px = xb.begin(bx); px < xb.end(bx); ++px, ++count)
          for (int k = 0; k < 3; ++k)
            rgb[k] += p.pixels[size_t((py * p.width + px) * p.channels + (p.channels == 3 ? k : 0))];
      const double cy = (double(yb.begin(by)) + double(yb.end(by))) / 2 / double(p.height);
      const double cx = (double(xb.begin(bx)) + double(xb.end(bx))) / 2 / double(p.width);
      const int64_t patch = std::min<int64_t>(int64_t(cy * double(p.side)), p.side - 1) * p.side +
                            std::min<int64_t>(int64_t(cx * double(p.side)), p.side - 1);
      const double alpha = vmax > 0 ? 0.8 * std::min(1.0, overlay[size_t(patch)] / vmax) : 0.0;
      const double red[3] = {220, 20, 20};
      char buf[8];
      int q[3];
      for (int k = 0; k < 3; ++k) {
        const double v = (1 - alpha) * rgb[k] / double(count) * 0.85 + alpha * red[k];
        q[k] = std::clamp(int(std::lround(v / 8.0)) * 8, 0, 255);  // quantised: longer runs, smaller files
      }
      std::snprintf(buf, sizeof(buf), "#%02x%02x%02x", q[0], q[1], q[2]);
      if (buf != run_colour) {
        flush(bx);
        run_colour = buf;
        run_begin = bx;
      }
    }
    flush(xb.bins);
  }
  svg.end_group();
  // The query patch.
  const double ps = size / double(p.side);
  svg.rect(x + double(p.query % p.side) * ps, y + double(p.query / p.side) * ps, ps, ps,
           {{"fill", "none"}, {"stroke", "#00e5ff"}, {"stroke-width", "2"}});
  svg.rect(x, y, size, size, {{"fill", "none"}, {"stroke", "#999999"}, {"stroke-width", "0.5"}});
  svg.text(x + size, y + size + 12, "max " + fmt(vmax, 3), {{"font-size", "10"}, {"text-anchor", "end"}});
}

}  // namespace

Svg draw_image_picture(const ImagePicture& p) {
  const int64_t N = p.side * p.side, r = int64_t(p.slot_weights.size());
  LSF_CHECK(p.side > 0 && int64_t(p.window.size()) == N && (p.effective.empty() || int64_t(p.effective.size()) == N) &&
            int64_t(p.pooling.size()) == r * N && int64_t(p.pixels.size()) == p.height * p.width * p.channels &&
            p.height > 0 && p.width > 0 && (p.channels == 1 || p.channels == 3))
      << "attention picture: inconsistent image picture (side " << p.side << ", " << p.window.size() << " window values, "
      << p.pixels.size() << " pixel bytes for " << p.height << "×" << p.width << "×" << p.channels << ")";
  const double size = 224, x0 = 16, y0 = 60;
  const int per_row = 8;
  const double small = 72;
  const int64_t slot_rows = (r + per_row - 1) / per_row;
  const double panels = p.effective.empty() ? 1 : 2;
  const double width = std::max({x0 + panels * (size + 30) + 10, r > 0 ? x0 + per_row * (small + 12) + 10 : 0.0, 560.0});
  const double ysl = y0 + size + 40;
  const double notes_y = ysl + double(slot_rows) * (small + 30) + 12;
  std::vector<std::string> notes = p.notes;
  notes.push_back(std::string("Red: attention of the query patch (cyan) on each patch, scaled to the panel's maximum") +
                  (r > 0 ? "; small maps: what each projection slot pools (P), titled with the query's attention on that slot." : "."));
  notes = wrap_lines(notes, note_chars(width));
  const double height = notes_y + 16.0 * double(notes.size()) + 10;
  Svg svg(width, height);
  svg.rect(0, 0, width, height, {{"fill", "white"}});
  svg.text(12, 22, p.title, {{"font-size", "15"}, {"font-weight", "bold"}});
  image_panel(svg, p, p.window, x0, y0, size, p.effective.empty() ? "attention of the query (cyan)" : "window attention");
  if (!p.effective.empty()) image_panel(svg, p, p.effective, x0 + size + 30, y0, size, "window + slots through P");
  for (int64_t i = 0; i < r; ++i) {
    const double x = x0 + double(i % per_row) * (small + 12), y = ysl + double(i / per_row) * (small + 30);
    std::vector<double> row(p.pooling.begin() + i * N, p.pooling.begin() + (i + 1) * N);
    svg.text(x, y - 6, "slot " + std::to_string(i) + ": " + fmt(p.slot_weights[size_t(i)], 3), {{"font-size", "10"}});
    // Whole-pixel cells: Cairo would leave hairlines between rows of fractional height.
    const double cell = std::max(1.0, std::floor(small / double(p.side)));
    heat_map(svg, row, p.side, p.side, x, y, cell, cell, max_of(row));
  }
  double y = notes_y;
  for (const std::string& line : notes) {
    svg.text(12, y, line, {{"font-size", "11"}, {"fill", "#333333"}});
    y += 16;
  }
  return svg;
}

}  // namespace lsf::train
