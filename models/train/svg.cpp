// The SVG builder (see svg.h).
#include "lsformer/models/train/svg.h"

#include <cmath>
#include <cstdio>

#include "lsformer/engine/error.h"

namespace lsf::train {

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab and newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') out += ' ';
        else out += c;
    }
  }
  return out;
}

std::string svg_number(double v) {
  LSF_CHECK(std::isfinite(v)) << "svg: a coordinate is not finite (" << v << ")";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  std::string s = buf;
  if (s == "-0.0") s = "0.0";
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s;
}

Svg::Svg(double width, double height) : width_(width), height_(height) {}

void Svg::open(const std::string& tag, const Attributes& attributes, bool self_closing) {
  body_ += "<" + tag;
  for (const auto& [name, value] : attributes) body_ += " " + name + "=\"" + xml_escape(value) + "\"";
  body_ += self_closing ? "/>\n" : ">";
}

void Svg::rect(double x, double y, double w, double h, const Attributes& a) {
  Attributes all = {{"x", svg_number(x)}, {"y", svg_number(y)}, {"width", svg_number(w)}, {"height", svg_number(h)}};
  all.insert(all.end(), a.begin(), a.end());
  open("rect", all, true);
  elements_.push_back({SvgElement::Kind::Rect, {x, y, w, h}, {}, a});
}

void Svg::line(double x1, double y1, double x2, double y2, const Attributes& a) {
  Attributes all = {{"x1", svg_number(x1)}, {"y1", svg_number(y1)}, {"x2", svg_number(x2)}, {"y2", svg_number(y2)}};
  all.insert(all.end(), a.begin(), a.end());
  open("line", all, true);
  elements_.push_back({SvgElement::Kind::Line, {x1, y1, x2, y2}, {}, a});
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points, const Attributes& a) {
  std::string p;
  for (const auto& [x, y] : points) {
    if (!p.empty()) p += ' ';
    p += svg_number(x);
    p += ',';
    p += svg_number(y);
  }
  Attributes all = {{"points", p}, {"fill", "none"}};
  all.insert(all.end(), a.begin(), a.end());
  open("polyline", all, true);
  std::vector<double> geometry;
  for (const auto& [x, y] : points) geometry.push_back(x), geometry.push_back(y);
  elements_.push_back({SvgElement::Kind::Polyline, std::move(geometry), {}, a});
}

void Svg::circle(double cx, double cy, double r, const Attributes& a) {
  Attributes all = {{"cx", svg_number(cx)}, {"cy", svg_number(cy)}, {"r", svg_number(r)}};
  all.insert(all.end(), a.begin(), a.end());
  open("circle", all, true);
  elements_.push_back({SvgElement::Kind::Circle, {cx, cy, r}, {}, a});
}

void Svg::text(double x, double y, const std::string& content, const Attributes& a) {
  Attributes all = {{"x", svg_number(x)}, {"y", svg_number(y)}};
  all.insert(all.end(), a.begin(), a.end());
  open("text", all, false);
  body_ += xml_escape(content) + "</text>\n";
  elements_.push_back({SvgElement::Kind::Text, {x, y}, content, a});
}

void Svg::begin_group(const Attributes& a) {
  open("g", a, false);
  body_ += "\n";
  ++depth_;
  elements_.push_back({SvgElement::Kind::GroupBegin, {}, {}, a});
}

void Svg::end_group() {
  LSF_CHECK(depth_ > 0) << "svg: end_group without begin_group";
  body_ += "</g>\n";
  --depth_;
  elements_.push_back({SvgElement::Kind::GroupEnd, {}, {}, {}});
}

std::string Svg::element() const {
  LSF_CHECK(depth_ == 0) << "svg: " << depth_ << " group(s) left open";
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_number(width_) + "\" height=\"" + svg_number(height_) +
         "\" viewBox=\"0 0 " + svg_number(width_) + " " + svg_number(height_) +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n" + body_ + "</svg>\n";
}

std::string Svg::str() const { return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + element(); }

}  // namespace lsf::train
