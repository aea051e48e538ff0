// Pathfinder generator: LRA's Pathfinder images (Linsley et al. 2018, "Learning long-range
// spatial dependencies with horizontal gated recurrent units"; LRA's "Path" task) made offline, in
// memory or written in the release layout that data/pathfinder.h reads. Spec and parameters:
// docs/data-formats.md §1.4.6.
//
// One image: two target contours grow from starting points `seed_distance` apart; each is a chain
// of `contour_length` short straight dashes ("paddles") separated by small gaps, every dash
// turning from the previous one by an angle δ drawn with weight cos²(continuity·δ) (zero past
// π / (2·continuity)) among the placements that stay inside the image and clear of other ink.
// Distractor contours of contour_length / 3 dashes, with the same dash, gap and curvature
// statistics, fill the rest. Two marker discs sit on contour tips: the origin marker on the start
// of one target contour, the terminal marker on the far end of the same contour (label 1,
// "connected") or of the other target contour (label 0). Labels alternate with the sample index
// (sample i has label i % 2), so every set of consecutive samples is balanced to within one.
//
// What makes the label a property of the picture (tests/test_pathfinder_generate.cpp checks it
// by flood fill on the pixels): ink is every pixel > 0; consecutive dashes of one contour always
// have ink within `link_reach` pixels of each other (Chebyshev distance), while ink of different
// contours — markers included, a marker counting as its contour's ink — is always more than
// `link_reach` pixels apart. So the markers are joined by a chain of ink pixels with steps of at
// most link_reach exactly when the label is 1.
//
// Determinism: sample i is a pure function of (options, i) — its own Philox stream — so a set of
// N samples is the first N of any larger set with the same options.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "lsformer/data/dataset.h"

namespace lsf::data {

// The three difficulties of the release, named as its folders (curv_baseline: 6 dashes per
// target contour, curv_contour_length_9: 9, curv_contour_length_14: 14).
enum class PathfinderDifficulty { Baseline, Length9, Length14 };
inline constexpr const char* kPathfinderDifficultyNames[] = {"curv_baseline", "curv_contour_length_9",
                                                              "curv_contour_length_14"};

struct PathfinderOptions {
  int64_t size = 32;  // image side in pixels: 32, 64 or 128 (the release's pathfinder32/64/128)
  PathfinderDifficulty difficulty = PathfinderDifficulty::Length14;
  uint64_t seed = 0;
};

// The drawing parameters a size and difficulty imply (pathfinder_geometry); lengths in pixels.
struct PathfinderGeometry {
  int64_t contour_length = 14;   // dashes in each target contour
  int64_t distractor_length = 4; // dashes in each distractor contour (contour_length / 3)
  int64_t distractors = 5;       // distractor contours attempted per image
  double dash_length = 2.0;      // length of one dash (a paddle)
  double dash_gap = 1.0;         // gap between consecutive dashes of a contour
  double thickness = 1.0;        // stroke width of a dash
  double marker_radius = 1.5;
  double seed_distance = 7.0;    // distance between the two target contours' starting points
  double continuity = 1.0;       // turn weight cos²(continuity·δ), δ ≤ π / (2·continuity)
  int64_t padding = 1;           // border rows/columns kept free of ink
  int64_t link_reach = 2;        // see the header comment: same contour ≤ reach, others > reach
};

// The parameters for a size (32, 64, 128) and difficulty; other sizes are an error.
PathfinderGeometry pathfinder_geometry(int64_t size, PathfinderDifficulty difficulty);

struct PathfinderSample {
  std::vector<uint8_t> pixels;             // [size * size] row-major gray, 0 = background
  int32_t label = 0;                       // 1: the markers are on one contour
  std::array<std::array<int64_t, 2>, 2> markers{};  // the two marker centres' pixels, (row, col)
};

// Sample `index` of the set the options define (see "Determinism" above).
PathfinderSample generate_pathfinder_sample(const PathfinderOptions& options, int64_t index);

// Samples [first, first + count) as a Pathfinder dataset (tokens = pixel values, vocabulary 256,
// 2 classes), exactly what read_pathfinder gives for the same images.
Dataset generate_pathfinder_dataset(const PathfinderOptions& options, int64_t first, int64_t count);

// Writes samples [0, count) in the release layout under `dir` (created): imgs/<b>/sample_<i>.png
// and metadata/<b>.npy (text lines "imgs/<b> sample_<i>.png <i> <label> ..." as the release's),
// `batch_size` images per batch folder b = 0, 1, ... Returns the number of positives.
int64_t write_pathfinder_dataset(const std::string& dir, const PathfinderOptions& options, int64_t count,
                                 int64_t batch_size = 1000);

// A grid of samples [0, rows·cols) for looking at: each image scaled by `zoom` (nearest
// neighbour), 2·zoom-pixel gray separators; the positives (label 1) fill the grid's first half in
// index order, then the negatives (so the top half is "connected", the bottom half is not).
std::vector<uint8_t> pathfinder_contact_sheet(const PathfinderOptions& options, int64_t rows, int64_t cols, int64_t zoom,
                                              int64_t* height, int64_t* width);

}  // namespace lsf::data
