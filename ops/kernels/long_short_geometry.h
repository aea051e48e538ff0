// Index arithmetic of the bidirectional long-short window (docs/transformer-ls.md §1.6, §2.3 step 8),
// written once for host and device code: which keys a query's window slots name, which queries
// see a given key, and the dropout counter of a (row, slot) pair. CUDA-free (the qualifiers
// below expand to nothing outside nvcc), so CPU tests check it against the dense oracle's own
// enumeration (tests/test_cuda_long_short.cpp) and the CUDA kernels (cuda/long_short.cu) use it.
//
// Geometry (ops/long_short.h): w ≥ 0, ext = max(⌊w/2⌋, 1) for w > 0, span s = w + 2·ext; query
// t's window slot u ∈ [0, s) is key j = ⌊t/seg⌋·seg − ext + u with seg = w. The self slot (w = 0
// with self_slot) is the same formula with seg = 1, ext = 0, s = 1 (slot 0 is key t); w = 0
// without it has s = 0 (no window).
#pragma once

#include <cstdint>

#include "lsformer/engine/philox.h"

#if defined(__CUDACC__)
#define LSF_GEOMETRY_FN __host__ __device__ inline
#else
#define LSF_GEOMETRY_FN inline
#endif

namespace lsf::ls_geometry {

struct Band {
  int64_t n = 0;    // sequence length
  int64_t seg = 1;  // queries sharing one window (w, or 1 for the self slot / no window)
  int64_t ext = 0;  // keys the window reaches beyond its segment on each side
  int64_t span = 0; // window slots per query (0: no window branch)
  int64_t R = 0;    // global (projected) slots before the window slots in a logit row

  LSF_GEOMETRY_FN int64_t slots() const { return R + span; }
  // Key named by window slot 0 of query t (may be negative; slot u names window_start(t) + u).
  LSF_GEOMETRY_FN int64_t window_start(int64_t t) const { return t / seg * seg - ext; }
  // Whether window slot u of query t names a key inside [0, n) (padding is checked separately).
  LSF_GEOMETRY_FN bool in_sequence(int64_t t, int64_t u) const {
    const int64_t j = window_start(t) + u;
    return j >= 0 && j < n;
  }
  // The queries whose window contains key j: [first_query(j), end_query(j)), the whole segments
  // g with g·seg − ext ≤ j < g·seg − ext + span, clipped to the sequence (at most three segments
  // for w > 0). Empty when there is no window.
  LSF_GEOMETRY_FN int64_t first_query(int64_t j) const {
    if (span == 0) return 0;
    // smallest g with g·seg − ext + span > j  ⇔  g > (j + ext − span) / seg
    const int64_t g = floor_div(j + ext - span, seg) + 1;
    return g < 0 ? 0 : g * seg;
  }
  LSF_GEOMETRY_FN int64_t end_query(int64_t j) const {
    if (span == 0) return 0;
    // largest g with g·seg − ext ≤ j  ⇔  g ≤ (j + ext) / seg
    const int64_t e = (floor_div(j + ext, seg) + 1) * seg;
    return e > n ? n : e;
  }
  // Segments per block of queries rounded up so that a block holds whole segments.
  LSF_GEOMETRY_FN int64_t round_to_segments(int64_t queries) const {
    const int64_t q = queries < seg ? seg : queries;
    return (q + seg - 1) / seg * seg;
  }
  // Queries per block of the CUDA row kernels: `want` rounded up to whole segments, at most
  // the (segment-aligned) sequence.
  LSF_GEOMETRY_FN int64_t tile_queries(int64_t want) const {
    const int64_t t = round_to_segments(want), all = round_to_segments(n);
    return t < all ? t : all;
  }
  // Keys a tile of `queries` (whole segments from t0) reads: [window_start(t0),
  // window_start(t0) + band_rows(queries)), i.e. the last segment's window end.
  LSF_GEOMETRY_FN int64_t band_rows(int64_t queries) const { return span > 0 ? queries + span - seg : 0; }
  // Index of slot i of row (bh, t) in the contiguous probability tensor [B, h, n, R + s]: the
  // element number lsf::dropout draws its Philox word for (word idx % 4 of block idx / 4).
  LSF_GEOMETRY_FN uint64_t dropout_index(int64_t bh, int64_t t, int64_t i) const {
    return uint64_t((bh * n + t) * slots() + i);
  }

  LSF_GEOMETRY_FN static int64_t floor_div(int64_t a, int64_t b) {
    const int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  }
};

// Word idx % 4 of Philox4x32-10 block offset + idx / 4 for `seed`: the word lsf::dropout draws
// for element idx (engine/philox.h, shared by the CPU and CUDA kernels), so device code draws
// exactly the CPU's dropout words (tested against philox_block on the CPU).
LSF_GEOMETRY_FN uint32_t philox_word(uint64_t seed, uint64_t offset, uint64_t idx) {
  return philox::block_words(seed, offset + idx / 4).w[idx % 4];
}

// The window of segment size w > 0 (docs/transformer-ls.md §1.6): it reaches ext = max(⌊w/2⌋, 1)
// keys beyond its segment on each side, so it spans w + 2·ext keys (2w for even w ≥ 2, 3 for
// w = 1, 2w − 1 for odd w). The one definition of the band for the 1-D op (CPU and CUDA) and,
// per axis, for the 2-D module (its "side" and T).
LSF_GEOMETRY_FN int64_t half_window(int64_t w) { return w / 2 > 1 ? w / 2 : 1; }
LSF_GEOMETRY_FN int64_t window_span(int64_t w) { return w + 2 * half_window(w); }

// The band of a long-short geometry: window w, self slot, n tokens, R global slots.
LSF_GEOMETRY_FN Band make_band(int64_t window, bool self_slot, int64_t n, int64_t R) {
  Band b;
  b.n = n;
  b.R = R;
  if (window > 0) {
    b.seg = window;
    b.ext = half_window(window);
    b.span = window_span(window);
  } else {
    b.seg = 1;
    b.ext = 0;
    b.span = self_slot ? 1 : 0;
  }
  return b;
}

}  // namespace lsf::ls_geometry
