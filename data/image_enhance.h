// Photometric operations on 8-bit H×W×C images with Pillow's (9.x) exact arithmetic: the
// ImageOps look-up-table ops and the ImageEnhance blends that timm's RandAugment and
// torchvision's ColorJitter call on PIL images.
//
// Look-up tables (the same table for every channel unless said otherwise):
//   invert           255 − v
//   posterize(bits)  v & ~(2^(8−bits) − 1)        (bits 0 → all black; bits ≥ 8 → unchanged)
//   solarize(t)      v < t ? v : 255 − v
//   solarize_add     v < t ? min(255, v + add) : v
//   auto_contrast    per channel: lo/hi = the smallest/largest value present; if hi > lo then
//                    v → clamp(int(v·s − lo·s), 0, 255) with s = 255/(hi − lo) in double, else
//                    unchanged (ImageOps.autocontrast with cutoff 0)
//   equalize         per channel, from the histogram h: if at most one value is present, or
//                    step = (Σh − h[last present]) // 255 is 0, unchanged; else v → n_v // step with
//                    n_0 = step // 2, n_{v+1} = n_v + h[v] (ImageOps.equalize)
// Blends (ImageEnhance: enhance(f) = Image.blend(degenerate, image, f)): out = deg + f·(img − deg)
// evaluated in float32 and truncated toward zero, clamped to 0..255 only when f ∉ [0, 1] —
// Pillow's Blend.c, truncation included. The degenerate images:
//   brightness   black
//   color        the luma image (convert("L")) copied into every channel (1 channel: itself,
//                so color leaves gray images unchanged, as in PIL)
//   contrast     one constant gray: int(mean of the luma image + 0.5)
//   sharpness    the image smoothed by the 3×3 kernel [1 1 1; 1 5 1; 1 1 1]/13 in float32,
//                rounded, with the outermost rows and columns copied unchanged (ImageFilter.SMOOTH)
#pragma once

#include <array>
#include <cstdint>

#include "lsformer/data/image_dataset.h"

namespace lsf::data {

using Lut = std::array<uint8_t, 256>;

Image apply_lut(const Image& image, const Lut& lut);

Image invert(const Image& image);
Image posterize(const Image& image, int bits);
Image solarize(const Image& image, int threshold);
Image solarize_add(const Image& image, int add, int threshold = 128);
Image auto_contrast(const Image& image);
Image equalize(const Image& image);

// Pillow's Image.blend(a, b, alpha): a + alpha·(b − a), see above. Same shapes required.
Image blend(const Image& a, const Image& b, float alpha);

Image adjust_brightness(const Image& image, float factor);
Image adjust_color(const Image& image, float factor);  // saturation (ImageEnhance.Color)
Image adjust_contrast(const Image& image, float factor);
Image adjust_sharpness(const Image& image, float factor);

// The luma image (1 channel) of an RGB image (PIL's convert("L")); a gray image itself.
Image to_gray(const Image& image);

}  // namespace lsf::data
