// Layout maths of attention pictures (see attention_layout.h).
#include "lsformer/models/train/attention_layout.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lsformer/engine/error.h"
#include "lsformer/ops/kernels/long_short_geometry.h"

namespace lsf::train {

namespace {
// ext = max(⌊w/2⌋, 1): the one definition of the long-short window geometry (the CPU and CUDA
// ops and the 2-D module use it too).
int64_t side_of(int64_t window) { return ls_geometry::half_window(window); }
}  // namespace

int64_t bidirectional_window_span(int64_t window) { return window > 0 ? ls_geometry::window_span(window) : 0; }

int64_t bidirectional_window_key(int64_t query, int64_t slot, int64_t window, int64_t n) {
  LSF_CHECK(window > 0) << "bidirectional_window_key: window " << window << " must be positive";
  const int64_t j = query / window * window - side_of(window) + slot;
  return j >= 0 && j < n ? j : -1;
}

int64_t causal_window_key(int64_t query, int64_t slot, int64_t window, int64_t memory) {
  return memory + query - (window - 1 - slot);
}

int64_t window2d_span(int64_t window) { return ls_geometry::window_span(window); }

int64_t window2d_key(int64_t query, int64_t slot, int64_t window, int64_t nx) {
  const int64_t T = window2d_span(window), p = side_of(window);
  const int64_t y = query / nx, x = query % nx, ty = slot / T, tx = slot % T;
  const int64_t ky = y / window * window + ty - p, kx = x / window * window + tx - p;
  return ky >= 0 && ky < nx && kx >= 0 && kx < nx ? ky * nx + kx : -1;
}

int64_t AxisBins::end(int64_t bin) const { return std::min((bin + 1) * per_bin, length); }

AxisBins make_bins(int64_t length, int64_t max_cells) {
  LSF_CHECK(length >= 0 && max_cells >= 1) << "make_bins: length " << length << " and max_cells " << max_cells;
  AxisBins b;
  b.length = length;
  b.per_bin = std::max<int64_t>(1, (length + max_cells - 1) / max_cells);
  b.bins = (length + b.per_bin - 1) / b.per_bin;
  return b;
}

std::vector<double> bin_matrix(const std::vector<double>& m, int64_t rows, int64_t cols, const AxisBins& rb,
                               const AxisBins& cb) {
  LSF_CHECK(int64_t(m.size()) == rows * cols && rb.length == rows && cb.length == cols)
      << "bin_matrix: a [" << rows << ", " << cols << "] matrix of " << m.size() << " values binned along axes of "
      << rb.length << " and " << cb.length;
  std::vector<double> out(size_t(rb.bins * cb.bins), 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t bi = rb.bin_of(i);
    const double weight = 1.0 / double(rb.end(bi) - rb.begin(bi));
    for (int64_t j = 0; j < cols; ++j) out[size_t(bi * cb.bins + cb.bin_of(j))] += weight * m[size_t(i * cols + j)];
  }
  return out;
}

std::vector<double> effective_attention(const std::vector<double>& window, const std::vector<double>& slot_weights,
                                        const std::vector<double>& pooling, int64_t keys) {
  LSF_CHECK(int64_t(window.size()) == keys && pooling.size() == slot_weights.size() * size_t(keys))
      << "effective_attention: window of " << window.size() << " keys, " << slot_weights.size()
      << " slot weights and pooling of " << pooling.size() << " values for " << keys << " keys";
  std::vector<double> out = window;
  for (size_t i = 0; i < slot_weights.size(); ++i)
    for (int64_t j = 0; j < keys; ++j) out[size_t(j)] += slot_weights[i] * pooling[i * size_t(keys) + size_t(j)];
  return out;
}

int colour_level(double v, double vmax, int levels) {
  if (!(vmax > 0.0) || !(v > 0.0)) return 0;
  const double x = std::min(v / vmax, 1.0);
  return std::clamp(int(std::lround(x * levels)), 0, levels);
}

std::string level_colour(int level, int levels) {
  // White (255, 255, 255) to a dark blue (8, 48, 107), linear in each channel.
  const double x = levels > 0 ? double(std::clamp(level, 0, levels)) / levels : 0.0;
  auto mix = [&](int hi, int lo) { return int(std::lround(hi + (lo - hi) * x)); };
  char buf[8];
  std::snprintf(buf, sizeof(buf), "#%02x%02x%02x", mix(255, 8), mix(255, 48), mix(255, 107));
  return buf;
}

std::vector<LevelRun> level_runs(const std::vector<int>& row) {
  std::vector<LevelRun> runs;
  for (int64_t j = 0; j < int64_t(row.size());) {
    int64_t k = j;
    while (k < int64_t(row.size()) && row[size_t(k)] == row[size_t(j)]) ++k;
    if (row[size_t(j)] != 0) runs.push_back({j, k - j, row[size_t(j)]});
    j = k;
  }
  return runs;
}

}  // namespace lsf::train
