// The layout maths of attention pictures (`lsf attention`, attention_map.h): where each slot
// of a long-short attention row lies on the key axis, how long axes are binned into at most a
// few hundred cells, and how colours are quantised. Pure functions on host vectors, no drawing
// and no tensors, so each is unit-tested (tests/test_attention_map.cpp).
//
// Conventions: matrices are row-major std::vector<double>; a "row" of an attention matrix is
// one query. Binning never loses mass: a cell over queries [q0, q1) × keys [k0, k1) holds the
// MEAN over its queries of the SUM of their attention on its keys, so a binned attention row
// still sums to what the rows summed to (1 for a softmax row).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lsf::train {

// Where the window slots of a query row lie on the key axis.
// Bidirectional (LRA, docs/transformer-ls.md §2.3 step 8): ext = max(⌊w/2⌋, 1), span w + 2·ext;
// slot u of query t is key ⌊t/w⌋·w − ext + u (−1 when outside [0, n)).
int64_t bidirectional_window_key(int64_t query, int64_t slot, int64_t window, int64_t n);
int64_t bidirectional_window_span(int64_t window);
// Causal (char-LM, §3.3): slot j of block query t is the key at distance w−1−j, i.e. key-axis
// position memory + t − (w−1−j) on the axis [memory ; block] (memory = C positions first).
int64_t causal_window_key(int64_t query, int64_t slot, int64_t window, int64_t memory);
// 2-D (vision, §4.2): window slot ty·T + tx of patch query (y, x) on an nx × nx map with window
// w and side p = max(⌊w/2⌋, 1), T = w + 2p, is the patch (⌊y/w⌋·w + ty − p, ⌊x/w⌋·w + tx − p),
// returned as its row-major index, −1 off the map.
int64_t window2d_key(int64_t query, int64_t slot, int64_t window, int64_t nx);
int64_t window2d_span(int64_t window);  // T

// Spreads the window part of attention rows onto the key axis: rows [Q, slots] whose slot u
// of query t lies at key_of(t, u) (−1: nowhere) → [Q, keys].
template <typename KeyOf>
std::vector<double> scatter_to_keys(const std::vector<double>& rows, int64_t queries, int64_t slots, int64_t keys,
                                    KeyOf&& key_of) {
  std::vector<double> out(size_t(queries * keys), 0.0);
  for (int64_t t = 0; t < queries; ++t)
    for (int64_t u = 0; u < slots; ++u) {
      const int64_t j = key_of(t, u);
      if (j >= 0 && j < keys) out[size_t(t * keys + j)] += rows[size_t(t * slots + u)];
    }
  return out;
}

// The bins of an axis of `length` items drawn in at most `max_cells` cells: items per bin
// k = ⌈length / max_cells⌉ (≥ 1), bins ⌈length / k⌉; bin b holds items [b·k, min((b+1)·k, length)).
struct AxisBins {
  int64_t length = 0, per_bin = 1, bins = 0;
  int64_t begin(int64_t bin) const { return bin * per_bin; }
  int64_t end(int64_t bin) const;
  int64_t bin_of(int64_t item) const { return item / per_bin; }
};
AxisBins make_bins(int64_t length, int64_t max_cells);

// A [rows, cols] matrix binned to [row_bins.bins, col_bins.bins]: the mean over a cell's rows
// of the sum over its columns (see the header comment).
std::vector<double> bin_matrix(const std::vector<double>& m, int64_t rows, int64_t cols, const AxisBins& row_bins,
                               const AxisBins& col_bins);

// Effective attention of one query over the key axis: its window mass on each key plus, for
// every slot i, its slot weight a_i spread over the keys by the slot's pooling row P_i (which
// sums to 1): e_j = window_j + Σ_i a_i·P_ij. window [keys], slot_weights [S], pooling [S, keys].
std::vector<double> effective_attention(const std::vector<double>& window, const std::vector<double>& slot_weights,
                                        const std::vector<double>& pooling, int64_t keys);

// Colour of value v on a panel whose largest value is vmax: quantised to `levels` steps of a
// white → dark blue ramp; level 0 (v ≤ vmax / (2·levels)) is white, i.e. not drawn.
int colour_level(double v, double vmax, int levels);
std::string level_colour(int level, int levels);  // "#rrggbb"

// Runs of equal non-zero level along one row of levels: (first column, length, level) — what is
// drawn as one rectangle, so a dense 256 × 256 panel stays a small file.
struct LevelRun {
  int64_t begin = 0, length = 0;
  int level = 0;
};
std::vector<LevelRun> level_runs(const std::vector<int>& row_levels);

}  // namespace lsf::train
