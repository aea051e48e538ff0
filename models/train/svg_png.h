// PNG output of an Svg drawing (svg.h) through Cairo (Debian's libcairo2-dev): the display list
// replayed on an image surface — the same chart `lsf plot --out curves.png` draws as SVG. Cairo
// is a well-kept 2-D library that every Linux desktop ships, with an image backend and a PNG
// writer, so no SVG parser is needed: Svg records its drawing calls as well as their text.
//
// What is drawn is what svg.h's builder emits, with SVG's defaults: fill (black unless "none";
// polylines and lines never fill), stroke (none unless set), stroke-width, stroke-dasharray,
// stroke-linejoin, font-size (12 on the root), font-weight bold, text-anchor, a
// transform="rotate(a cx cy)" on text, and paint-order="stroke" (a halo drawn under the fill).
// Colours are #rgb, #rrggbb, "white", "black" or "none"; anything else is an lsf::Error naming it.
// Text uses Cairo's "toy" font API with the DejaVu Sans face (fonts-dejavu-core, which Debian
// installs with Cairo's font stack): glyph metrics may differ slightly from a browser's.
#pragma once

#include <string>

#include "lsformer/models/train/svg.h"

namespace lsf::train {

// Renders `svg` at `scale` pixels per SVG unit (2: a sharp image on a high-density screen) into
// the PNG file `path` (replaced atomically). Errors name the path and Cairo's status.
void write_svg_as_png(const Svg& svg, const std::string& path, double scale = 2.0);

}  // namespace lsf::train
