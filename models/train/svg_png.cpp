// Svg → PNG through Cairo (see svg_png.h).
#include "lsformer/models/train/svg_png.h"

#include <cairo.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "lsformer/engine/error.h"
#include "lsformer/engine/safetensors.h"

namespace lsf::train {
namespace {

struct Rgb {
  double r, g, b;
};

// A colour of the chart's palette; nullopt for "none".
std::optional<Rgb> parse_colour(const std::string& s) {
  if (s == "none") return std::nullopt;
  if (s == "white") return Rgb{1, 1, 1};
  if (s == "black") return Rgb{0, 0, 0};
  unsigned r = 0, g = 0, b = 0;
  char extra = 0;
  if (s.size() == 7 && std::sscanf(s.c_str(), "#%2x%2x%2x%c", &r, &g, &b, &extra) == 3) return Rgb{r / 255.0, g / 255.0, b / 255.0};
  if (s.size() == 4 && std::sscanf(s.c_str(), "#%1x%1x%1x%c", &r, &g, &b, &extra) == 3)
    return Rgb{r * 17 / 255.0, g * 17 / 255.0, b * 17 / 255.0};
  LSF_FAIL() << "png: unsupported colour '" << s << "' (expected #rgb, #rrggbb, white, black or none)";
}

const std::string* find(const SvgAttributes& a, const std::string& name) {
  for (const auto& [k, v] : a)
    if (k == name) return &v;
  return nullptr;
}

double number(const SvgAttributes& a, const std::string& name, double fallback) {
  const std::string* v = find(a, name);
  return v ? std::stod(*v) : fallback;
}

void set_colour(cairo_t* cr, const Rgb& c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

// Strokes the current path with the element's stroke settings (if it has a stroke), keeping it.
void stroke_preserve(cairo_t* cr, const SvgAttributes& a) {
  const std::string* stroke = find(a, "stroke");
  if (!stroke) return;
  const std::optional<Rgb> colour = parse_colour(*stroke);
  if (!colour) return;
  set_colour(cr, *colour);
  cairo_set_line_width(cr, number(a, "stroke-width", 1.0));
  const std::string* join = find(a, "stroke-linejoin");
  cairo_set_line_join(cr, join && *join == "round" ? CAIRO_LINE_JOIN_ROUND : CAIRO_LINE_JOIN_MITER);
  if (const std::string* dash = find(a, "stroke-dasharray")) {
    double on = 0, off = 0;
    LSF_CHECK(std::sscanf(dash->c_str(), "%lf,%lf", &on, &off) == 2) << "png: unsupported stroke-dasharray '" << *dash << "'";
    const double pattern[2] = {on, off};
    cairo_set_dash(cr, pattern, 2, 0);
  } else {
    cairo_set_dash(cr, nullptr, 0, 0);
  }
  cairo_stroke_preserve(cr);
}

// Fills the current path when the element fills (`default_fill`: SVG's black, or none).
void fill_preserve(cairo_t* cr, const SvgAttributes& a, bool fills_by_default) {
  const std::string* fill = find(a, "fill");
  const std::optional<Rgb> colour = fill ? parse_colour(*fill) : (fills_by_default ? std::optional<Rgb>(Rgb{0, 0, 0}) : std::nullopt);
  if (!colour) return;
  set_colour(cr, *colour);
  cairo_fill_preserve(cr);
}

void draw_text(cairo_t* cr, const SvgElement& e) {
  const SvgAttributes& a = e.attributes;
  cairo_save(cr);
  if (const std::string* t = find(a, "transform")) {
    double angle = 0, cx = 0, cy = 0;
    LSF_CHECK(std::sscanf(t->c_str(), "rotate(%lf %lf %lf)", &angle, &cx, &cy) == 3) << "png: unsupported transform '" << *t << "'";
    cairo_translate(cr, cx, cy);
    cairo_rotate(cr, angle * M_PI / 180.0);
    cairo_translate(cr, -cx, -cy);
  }
  const std::string* weight = find(a, "font-weight");
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                         weight && *weight == "bold" ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, number(a, "font-size", 12.0));
  cairo_text_extents_t extents;
  cairo_text_extents(cr, e.text.c_str(), &extents);
  const std::string* anchor = find(a, "text-anchor");
  double x = e.geometry[0];
  if (anchor && *anchor == "middle") x -= extents.x_advance / 2;
  if (anchor && *anchor == "end") x -= extents.x_advance;
  cairo_new_path(cr);
  cairo_move_to(cr, x, e.geometry[1]);
  cairo_text_path(cr, e.text.c_str());
  const std::string* order = find(a, "paint-order");
  if (order && *order == "stroke") stroke_preserve(cr, a);  // the halo under the glyphs
  fill_preserve(cr, a, true);
  if (!order || *order != "stroke") stroke_preserve(cr, a);
  cairo_new_path(cr);
  cairo_restore(cr);
}

void draw(cairo_t* cr, const SvgElement& e) {
  const std::vector<double>& g = e.geometry;
  cairo_new_path(cr);
  switch (e.kind) {
    case SvgElement::Kind::Rect:
      cairo_rectangle(cr, g[0], g[1], g[2], g[3]);
      fill_preserve(cr, e.attributes, true);
      stroke_preserve(cr, e.attributes);
      break;
    case SvgElement::Kind::Line:
      cairo_move_to(cr, g[0], g[1]);
      cairo_line_to(cr, g[2], g[3]);
      stroke_preserve(cr, e.attributes);
      break;
    case SvgElement::Kind::Polyline:
      for (size_t i = 0; i + 1 < g.size(); i += 2) (i == 0 ? cairo_move_to : cairo_line_to)(cr, g[i], g[i + 1]);
      stroke_preserve(cr, e.attributes);
      break;
    case SvgElement::Kind::Circle:
      cairo_arc(cr, g[0], g[1], g[2], 0, 2 * M_PI);
      fill_preserve(cr, e.attributes, true);
      stroke_preserve(cr, e.attributes);
      break;
    case SvgElement::Kind::Text:
      draw_text(cr, e);
      break;
    case SvgElement::Kind::GroupBegin:
    case SvgElement::Kind::GroupEnd:
      break;  // the chart's groups carry no style
  }
  cairo_new_path(cr);
}

cairo_status_t append_to_string(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

void write_svg_as_png(const Svg& svg, const std::string& path, double scale) {
  LSF_CHECK(scale > 0 && scale <= 8) << "png: scale must be in (0, 8], got " << scale;
  const int width = int(std::ceil(svg.width() * scale)), height = int(std::ceil(svg.height() * scale));
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height), cairo_surface_destroy);
  LSF_CHECK(cairo_surface_status(surface.get()) == CAIRO_STATUS_SUCCESS)
      << "png: cannot create a " << width << "×" << height << " image for '" << path
      << "': " << cairo_status_to_string(cairo_surface_status(surface.get()));
  std::unique_ptr<cairo_t, decltype(&cairo_destroy)> cr(cairo_create(surface.get()), cairo_destroy);
  cairo_scale(cr.get(), scale, scale);
  for (const SvgElement& e : svg.elements()) draw(cr.get(), e);
  LSF_CHECK(cairo_status(cr.get()) == CAIRO_STATUS_SUCCESS)
      << "png: drawing '" << path << "' failed: " << cairo_status_to_string(cairo_status(cr.get()));
  std::string bytes;
  const cairo_status_t status = cairo_surface_write_to_png_stream(surface.get(), append_to_string, &bytes);
  LSF_CHECK(status == CAIRO_STATUS_SUCCESS) << "png: cannot encode '" << path << "': " << cairo_status_to_string(status);
  write_file_atomically(path, bytes);
}

}  // namespace lsf::train
