// A small SVG 1.1 document builder: the elements charts need (lines, polylines, circles, rects,
// text), attributes escaped, coordinates with one decimal. No dependency; the chart logic lives
// in curves.h. The output is a complete, well-formed XML document (str()) that browsers, rsvg
// and Inkscape open, and that can be inlined in HTML (element(): the <svg> element alone).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lsf::train {

// Text with &, <, >, " and ' escaped for XML content and attribute values.
std::string xml_escape(const std::string& text);

class Svg {
 public:
  using Attributes = std::vector<std::pair<std::string, std::string>>;  // name → value (escaped on output)

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

 private:
  void open(const std::string& tag, const Attributes& attributes, bool self_closing);
  double width_, height_;
  std::string body_;
  int depth_ = 0;
};

// A coordinate with one decimal ("12.3"; "-0" written as "0").
std::string svg_number(double v);

}  // namespace lsf::train
