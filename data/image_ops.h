// Geometric operations on 8-bit H×W×C images, with the exact arithmetic of Pillow (9.x), the
// library torchvision and timm run on PIL images — so a crop, resize or rotation here gives the
// pixels the official training pipeline would have given, not just a similar picture.
//
// resize (Pillow's Image.resize, libImaging/Resample.c): separable convolution, horizontal pass
//   first, each pass rounding to uint8. Output pixel i's centre maps to input coordinate
//   (i + ½)·scale, scale = in/out; the filter is stretched by max(scale, 1) (antialiasing when
//   shrinking) and its taps are the input pixels within the support, clipped to the image and
//   renormalised to sum 1. Filters: bilinear (triangle, support 1) and bicubic (Keys' cubic with
//   a = −½, support 2). Weights are rounded to 22-bit fixed point, sums start at ½ and are
//   shifted back and clamped to 0..255, exactly as Pillow's 8-bit path.
// affine (Pillow's Image.transform(AFFINE), libImaging/Geometry.c): output pixel (x, y) samples
//   the input at (a·(x+½) + b·(y+½) + c, d·(x+½) + e·(y+½) + f); a sample outside [0, W)×[0, H)
//   takes the fill colour; inside, neighbours beyond the border are clamped to it. Bilinear and
//   Pillow's transform-bicubic (the cubic with a = −1, not resize's a = −½) in double precision,
//   truncated (not rounded) to uint8 after clamping, as Pillow does; nearest takes ⌊coordinate⌋.
// rotate: Pillow's Image.rotate(angle) without expand: counter-clockwise by `degrees` about the
//   image centre (W/2, H/2), matrix entries rounded to 15 decimals as Pillow does; 0° is a copy,
//   180° (and 90°/270° on square images) are exact transpositions, as in Pillow.
#pragma once

#include <array>
#include <cstdint>

#include "lsformer/data/image_dataset.h"

namespace lsf::data {

enum class Interpolation { Nearest, Bilinear, Bicubic };

// Parses "nearest" | "bilinear" | "bicubic" (errors name the bad value).
Interpolation interpolation_from_name(const std::string& name);
const char* interpolation_name(Interpolation interpolation);

// The fill colour of the geometric ops: channel c uses fill[c] (a 1-channel image uses fill[0]).
using FillColor = std::array<uint8_t, 3>;

// The sub-image rows [top, top + height) × columns [left, left + width); must lie inside.
Image crop(const Image& image, int64_t top, int64_t left, int64_t height, int64_t width);

// Pillow's resize to out_height × out_width (bilinear or bicubic; nearest is refused).
Image resize(const Image& image, int64_t out_height, int64_t out_width, Interpolation interpolation);

// Mirror left ↔ right (exact).
Image hflip(const Image& image);

// Pillow's transform(size of `image`, AFFINE, coefficients {a, b, c, d, e, f}, resample, fill).
Image affine(const Image& image, const std::array<double, 6>& coefficients, Interpolation interpolation,
             const FillColor& fill);

// Pillow's rotate(degrees, resample, fillcolor): counter-clockwise, about the centre, same size.
Image rotate(const Image& image, double degrees, Interpolation interpolation, const FillColor& fill);

}  // namespace lsf::data
