// A small SVG 1.1 document builder: the elements charts need (lines, polylines, circles, rects,
// text), attributes escaped, coordinates with one decimal. No dependency; the chart logic lives
// in curves.h. The output is a complete, well-formed XML document (str()) that browsers, rsvg
// and Inkscape open, and that can be inlined in HTML (element(): the <svg> element alone). The
// elements are also kept as a display list (elements()), which svg_png.h replays through Cairo.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lsf::train {

// Text with &, <, >, " and ' escaped for XML content and attribute values.
std::string xml_escape(const std::string& text);

using SvgAttributes = std::vector<std::pair<std::string, std::string>>;  // name → value (escaped on output)

// One drawing call, as recorded.
struct SvgElement {
  enum class Kind { Rect, Line, Polyline, Circle, Text, GroupBegin, GroupEnd };
  Kind kind;
  std::vector<double> geometry;  // rect: x, y, w, h; line: x1, y1, x2, y2; polyline: x, y pairs;
                                 // circle: cx, cy, r; text: x, y (the baseline's anchor point)
  std::string text;              // Text: the content (unescaped)
  SvgAttributes attributes;      // unescaped
};

class Svg {
 public:
  using Attributes = SvgAttributes;

  Svg(double width, double height);
  void rect(double x, double y, double w, double h, const Attributes& attributes = {});
  void line(double x1, double y1, double x2, double y2, const Attributes& attributes = {});
  // points: (x, y) pairs, written as "x,y x,y ..."
  void polyline(const std::vector<std::pair<double, double>>& points, const Attributes& attributes = {});
  void circle(double cx, double cy, double r, const Attributes& attributes = {});
  void text(double x, double y, const std::string& content, const Attributes& attributes = {});
  // Opens and closes a <g> group (nesting must balance; str() checks).
  void begin_group(const Attributes& attributes = {});
  void end_group();

  std::string element() const;  // the <svg> element
  std::string str() const;       // an XML declaration and the element
  double width() const { return width_; }
  double height() const { return height_; }
  const std::vector<SvgElement>& elements() const { return elements_; }

 private:
  void open(const std::string& tag, const Attributes& attributes, bool self_closing);
  double width_, height_;
  std::string body_;
  std::vector<SvgElement> elements_;
  int depth_ = 0;
};

// A coordinate with one decimal ("12.3"; "-0" written as "0").
std::string svg_number(double v);

}  // namespace lsf::train
