// Attention maps of a trained model (`lsf attention`): one example of a split run through a
// checkpoint's model under an nn::CaptureScope, and the attention of one layer and head drawn
// so that the two parts of long-short attention are visible.
//
//   AttentionMapOptions o{.split = "dev", .index = 3, .layer = 1, .head = 0};
//   write_attention_map("runs/quickstart/best.safetensors", o, "attn.svg");   // or attn.png
//
// Sequence models (the LRA family, bidirectional; the char-LM, causal) — SequencePicture:
//   * "window": every query (row) over the key positions (columns): the probability of each
//     window slot placed at the key it reads, so the band is visible. For the char-LM the key
//     axis is [memory ; block] and the memory columns are shaded.
//   * "slots": every query over the r dynamic-projection slots (plus the CLS slot when the
//     layer has one; the char-LM: the compressed chunk slots, memory chunks first).
//   * "P": under the window panel, on the same key axis, the projection weights — which tokens
//     each slot pools (each row sums to 1).
//   * "query q": a strip of the chosen query's effective attention over the keys, window mass
//     and slot mass spread through P (e_j = window_j + Σ_i a_i·P_ij) stacked in two colours.
//   Full attention draws its one matrix; Linformer its k projected slots with |E| as the pooling
//   (its projection is linear, not a softmax). Axes longer than max_cells are binned (a cell over
//   k queries × k keys shows the mean over its queries of their attention summed over its keys;
//   the caption says k), so n = 2048 stays legible and the file small.
//   A full-attention or Linformer layer whose sequence starts with a CLS token (the last layer of
//   an LRA model pooled at the CLS without a CLS slot) leaves the CLS's row out; full attention
//   draws its column as a slot.
// Vision models (2-D long-short, ViL's full attention) — ImagePicture: the image as the model
// saw it, the chosen query patch outlined, its window attention drawn over the image, its
// effective attention (window + slots through P + none to the global token), and one small map
// per projection slot (what it pools, titled with the query's weight on it). LRA's pixel tasks
// (Image, Pathfinder: one token per pixel) draw their long-short or full attention the same way
// for one query pixel, from the sequence picture's row (the CLS as the global token).
//
// Colours: white → dark blue in 24 steps, each panel scaled to its own maximum (in the legend).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lsformer/models/train/svg.h"

namespace lsf::train {

struct AttentionMapOptions {
  std::string split = "dev";           // train, dev or test
  int64_t index = 0;                   // the example (char-LM: the block) of the split
  int64_t layer = 0;                   // the attention layer, in module order (0-based)
  int64_t head = 0;
  int64_t query = -1;                  // the highlighted query (vision: the patch); −1: the middle one
  int threads = 0;                     // CPU threads (0: the run's)
  std::vector<std::string> overrides;  // --set KEY=VALUE on the stored config
  int64_t max_cells = 192;             // the longest axis drawn unbinned
};

// One attention layer of a sequence model, laid out for drawing (attention_layout.h's maths).
struct SequencePicture {
  std::string title;                    // first line
  std::vector<std::string> notes;       // caption lines
  int64_t queries = 0, keys = 0;        // Q, K
  int64_t query_offset = 0;             // query t sits at key position t + query_offset
  int64_t memory = 0;                   // the first `memory` keys are memory (shaded)
  std::vector<std::string> key_labels;  // [K] (may be empty)
  std::vector<double> on_keys;          // [Q, K] attention placed on key positions
  std::vector<double> in_band;          // [Q, K] 1 where the key is one of the query's window slots (empty: none)
  std::string keys_title = "window";
  int64_t slots = 0;                    // S
  std::vector<std::string> slot_labels;  // [S]
  std::vector<double> on_slots;         // [Q, S]
  std::vector<double> pooling;          // [S, K] what each slot pools (rows sum to 1; 0 for a CLS slot)
  std::string slots_title = "slots", pooling_title = "P: what each slot pools";
};

// One attention layer of an image model for one query patch.
struct ImagePicture {
  std::string title;
  std::vector<std::string> notes;
  std::vector<uint8_t> pixels;          // [H, W, C] uint8
  int64_t height = 0, width = 0, channels = 0;
  int64_t side = 0;                     // the patch map is side × side
  int64_t query = 0;                    // the query patch (row-major)
  std::vector<double> window;           // [side²] the query's window attention per patch (full attention: all of it)
  std::vector<double> effective;        // [side²] window + slots through P (empty: no slots)
  std::vector<double> slot_weights;     // [r] the query's attention on each slot
  std::vector<double> pooling;          // [r, side²] P (rows sum to 1)
  double global = 0;                    // the query's attention on the global token(s)
};

Svg draw_sequence_picture(const SequencePicture& p, int64_t query, int64_t max_cells);
Svg draw_image_picture(const ImagePicture& p);

// The picture of options.layer / head for example options.index of the checkpoint's run (the
// config stored in the checkpoint, as `lsf eval`). Errors name the bad value and the valid
// range: split, index, layer (listing the layers' module paths), head, query.
Svg attention_map(const std::string& checkpoint, const AttentionMapOptions& options);
// Writes it as .svg, or .png through Cairo (svg_png.h); another extension is an error.
void write_attention_map(const std::string& checkpoint, const AttentionMapOptions& options, const std::string& out);

}  // namespace lsf::train
