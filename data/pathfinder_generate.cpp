// Pathfinder generator (data/pathfinder_generate.h): contour growth with the cos² turn rule,
// separation of contours on the pixel grid, rendering with 4×4 supersampled coverage, and the
// release-layout writer.
#include "lsformer/data/pathfinder_generate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include "lsformer/data/pathfinder.h"
#include "lsformer/data/random_stream.h"
#include "lsformer/engine/error.h"
#include "lsformer/engine/region_errors.h"

namespace lsf::data {
namespace {

constexpr uint64_t kGenerateStream = 0x5046476e00000000ull;  // "PFGn": sample i uses stream + i
constexpr int kSuper = 4;                 // supersampling per pixel side for the coverage
constexpr float kInkThreshold = 0.25f;    // coverage below this is not drawn (and is no ink)
constexpr int kAttempts = 1000;           // whole-image attempts before giving up
constexpr int kDistractorTries = 4;       // placements tried per distractor contour
constexpr int kTurnCandidates = 33;       // turn angles evaluated per dash
constexpr int16_t kFree = -1;

struct Point {
  double y = 0, x = 0;
};

struct Ink {
  int64_t index;  // row * size + col
  float coverage;
};

// One image under construction: which contour (and which of its dashes) owns each ink pixel.
class Canvas {
 public:
  Canvas(int64_t size, const PathfinderGeometry& g)
      : n_(size), g_(g), owner_(size_t(size * size), kFree), dash_(size_t(size * size), 0) {}

  int64_t size() const { return n_; }

  // Coverage of a straight dash from `a` along angle `theta`, dash_length long, `thickness` wide,
  // flat ends (so the gap between dashes is exactly dash_gap along the contour).
  std::vector<Ink> raster_dash(Point a, double theta) const {
    const double dy = std::sin(theta), dx = std::cos(theta), half = g_.thickness / 2, len = g_.dash_length;
    const Point b{a.y + len * dy, a.x + len * dx};
    return raster([&](double y, double x) {
      const double along = (y - a.y) * dy + (x - a.x) * dx, across = -(y - a.y) * dx + (x - a.x) * dy;
      return along >= 0 && along <= len && std::abs(across) <= half;
    }, std::min(a.y, b.y) - half - 1, std::max(a.y, b.y) + half + 1, std::min(a.x, b.x) - half - 1,
       std::max(a.x, b.x) + half + 1);
  }

  std::vector<Ink> raster_disc(Point c, double radius) const {
    return raster([&](double y, double x) { return (y - c.y) * (y - c.y) + (x - c.x) * (x - c.x) <= radius * radius; },
                  c.y - radius - 1, c.y + radius + 1, c.x - radius - 1, c.x + radius + 1);
  }

  // Whether this ink may be drawn for `contour`: inside the border (`border`; markers may reach
  // the edge), and every ink pixel more than link_reach from the ink of other contours and of
  // this contour's dashes numbered below `oldest_near` (a dash keeps clear of its contour's older
  // dashes: no self-overlap); with `linked`, some pixel within link_reach of that ink (the
  // previous dash: the contour stays one chain).
  bool fits(const std::vector<Ink>& ink, int16_t contour, int oldest_near, bool border, const std::vector<Ink>* linked) const {
    if (ink.empty()) return false;
    const int64_t reach = g_.link_reach, pad = border ? g_.padding : 0;
    bool link = linked == nullptr;
    for (const Ink& p : ink) {
      const int64_t r = p.index / n_, c = p.index % n_;
      if (r < pad || c < pad || r >= n_ - pad || c >= n_ - pad) return false;
      for (int64_t qr = std::max<int64_t>(0, r - reach); qr <= std::min(n_ - 1, r + reach); ++qr)
        for (int64_t qc = std::max<int64_t>(0, c - reach); qc <= std::min(n_ - 1, c + reach); ++qc) {
          const size_t q = size_t(qr * n_ + qc);
          const int16_t o = owner_[q];
          if (o == kFree) continue;
          if (o != contour) return false;
          if (dash_[q] < oldest_near) return false;
        }
      if (!link)
        for (const Ink& q : *linked)
          if (std::abs(q.index / n_ - r) <= reach && std::abs(q.index % n_ - c) <= reach) {
            link = true;
            break;
          }
    }
    return link;
  }

  void commit(const std::vector<Ink>& ink, int16_t contour, int16_t dash) {
    for (const Ink& p : ink) {
      owner_[size_t(p.index)] = contour;
      dash_[size_t(p.index)] = dash;
    }
    drawn_.push_back(ink);
  }

  // Removes the last `count` committed shapes (a distractor that could not be finished).
  void rollback(size_t count) {
    for (size_t i = 0; i < count; ++i) {
      for (const Ink& p : drawn_.back()) owner_[size_t(p.index)] = kFree;
      drawn_.pop_back();
    }
  }

  size_t shapes() const { return drawn_.size(); }

  std::vector<uint8_t> render() const {
    std::vector<float> coverage(size_t(n_ * n_), 0.0f);
    for (const auto& shape : drawn_)
      for (const Ink& p : shape) coverage[size_t(p.index)] = std::max(coverage[size_t(p.index)], p.coverage);
    std::vector<uint8_t> out(coverage.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(std::lround(255.0f * coverage[i]));
    return out;
  }

 private:
  template <typename Inside>
  std::vector<Ink> raster(Inside inside, double y0, double y1, double x0, double x1) const {
    std::vector<Ink> out;
    const int64_t r0 = std::max<int64_t>(0, int64_t(std::floor(y0))), r1 = std::min<int64_t>(n_ - 1, int64_t(std::ceil(y1)));
    const int64_t c0 = std::max<int64_t>(0, int64_t(std::floor(x0))), c1 = std::min<int64_t>(n_ - 1, int64_t(std::ceil(x1)));
    for (int64_t r = r0; r <= r1; ++r)
      for (int64_t c = c0; c <= c1; ++c) {
        int hits = 0;
        for (int i = 0; i < kSuper; ++i)
          for (int j = 0; j < kSuper; ++j) hits += inside(double(r) + (i + 0.5) / kSuper, double(c) + (j + 0.5) / kSuper);
        const float coverage = float(hits) / float(kSuper * kSuper);
        if (coverage >= kInkThreshold) out.push_back({r * n_ + c, coverage});
      }
    return out;
  }

  int64_t n_;
  PathfinderGeometry g_;
  std::vector<int16_t> owner_;  // [n*n] contour owning the ink pixel, kFree where none
  std::vector<int16_t> dash_;   // [n*n] which dash of its contour (markers: one past the last)
  std::vector<std::vector<Ink>> drawn_;
};

// A contour being grown one dash at a time.
struct Contour {
  int16_t id = 0;
  Point tip;              // where the first dash starts
  Point end;              // where the last dash ends
  double theta = 0;       // direction of the last dash
  int16_t dashes = 0;
  std::vector<Ink> last;  // ink of the last dash
};

// Adds one dash to `k` (the first from its tip in a random direction, later ones turning by δ
// with weight cos²(continuity·δ)); false when no placement fits.
bool grow(Canvas& canvas, Contour& k, const PathfinderGeometry& g, PhiloxStream& rng) {
  struct Candidate {
    double theta;
    Point start;
    std::vector<Ink> ink;
    double weight;
  };
  std::vector<Candidate> feasible;
  double total = 0;
  const double max_turn = std::numbers::pi / (2 * g.continuity);
  const double jitter = rng.uniform();
  for (int i = 0; i < kTurnCandidates; ++i) {
    double theta, weight;
    if (k.dashes == 0) {
      theta = 2 * std::numbers::pi * (i + jitter) / kTurnCandidates;
      weight = 1.0;
    } else {
      const double delta = -max_turn + 2 * max_turn * (i + jitter) / kTurnCandidates;
      theta = k.theta + delta;
      weight = std::pow(std::cos(g.continuity * delta), 2);
    }
    const Point start = k.dashes == 0 ? k.tip : Point{k.end.y + g.dash_gap * std::sin(theta), k.end.x + g.dash_gap * std::cos(theta)};
    std::vector<Ink> ink = canvas.raster_dash(start, theta);
    if (weight <= 0 || !canvas.fits(ink, k.id, k.dashes - 2, /*border=*/true, k.dashes == 0 ? nullptr : &k.last)) continue;
    total += weight;
    feasible.push_back({theta, start, std::move(ink), weight});
  }
  if (feasible.empty()) return false;
  double pick = rng.uniform() * total;
  size_t chosen = 0;
  while (chosen + 1 < feasible.size() && pick >= feasible[chosen].weight) pick -= feasible[chosen++].weight;
  Candidate& c = feasible[chosen];
  canvas.commit(c.ink, k.id, k.dashes);
  k.theta = c.theta;
  k.end = {c.start.y + g.dash_length * std::sin(c.theta), c.start.x + g.dash_length * std::cos(c.theta)};
  k.last = std::move(c.ink);
  ++k.dashes;
  return true;
}

// A uniform point at least `margin` inside the image.
Point uniform_point(int64_t n, double margin, PhiloxStream& rng) {
  return {margin + rng.uniform() * (double(n) - 2 * margin), margin + rng.uniform() * (double(n) - 2 * margin)};
}

bool inside(Point p, int64_t n, double margin) {
  return p.y >= margin && p.x >= margin && p.y <= double(n) - margin && p.x <= double(n) - margin;
}

// One attempt at a whole image; false when the target contours or markers do not fit.
bool attempt(const PathfinderGeometry& g, int64_t n, int32_t label, PhiloxStream& rng, PathfinderSample* out) {
  Canvas canvas(n, g);
  const double margin = double(g.padding) + g.marker_radius + 1;
  Contour targets[2];
  targets[0].id = 0;
  targets[0].tip = uniform_point(n, margin, rng);
  targets[1].id = 1;
  bool placed = false;
  for (int t = 0; t < 20 && !placed; ++t) {
    const double phi = 2 * std::numbers::pi * rng.uniform();
    targets[1].tip = {targets[0].tip.y + g.seed_distance * std::sin(phi), targets[0].tip.x + g.seed_distance * std::cos(phi)};
    placed = inside(targets[1].tip, n, margin);
  }
  if (!placed) return false;
  // Markers: the origin on one target's tip; the terminal on the far end of the same target
  // (label 1) or of the other (label 0). A marker is ink of the contour it sits on. The origin
  // is drawn before the contours grow (its place is known), so the other contour keeps clear of
  // it from the start instead of failing the whole attempt at the end; as dash 0's ink, it is
  // also "older" ink its own contour's later dashes keep clear of.
  const int first = int(rng.below(2));
  const Contour& origin = targets[first];
  const Contour& terminal = targets[label == 1 ? first : 1 - first];
  canvas.commit(canvas.raster_disc(origin.tip, g.marker_radius), origin.id, 0);
  out->markers[0] = {int64_t(std::floor(origin.tip.y)), int64_t(std::floor(origin.tip.x))};

  // The two targets grow in turns, one dash each, so neither takes all the room.
  for (int64_t s = 0; s < g.contour_length; ++s)
    for (Contour& k : targets)
      if (!grow(canvas, k, g, rng)) return false;

  std::vector<Ink> disc = canvas.raster_disc(terminal.end, g.marker_radius);
  // a marker may touch any dash of its own contour
  if (!canvas.fits(disc, terminal.id, /*oldest_near=*/0, /*border=*/false, nullptr)) return false;
  canvas.commit(disc, terminal.id, terminal.dashes);
  out->markers[1] = {int64_t(std::floor(terminal.end.y)), int64_t(std::floor(terminal.end.x))};

  // Distractors: same dashes and turns, contour_length / 3 dashes; one that cannot be finished
  // is removed and tried elsewhere, and skipped after kDistractorTries (as the original's
  // allow_incomplete).
  for (int64_t d = 0; d < g.distractors; ++d)
    for (int t = 0; t < kDistractorTries; ++t) {
      Contour k;
      k.id = int16_t(2 + d);
      k.tip = uniform_point(n, double(g.padding) + 1, rng);
      const size_t before = canvas.shapes();
      bool ok = true;
      for (int64_t s = 0; s < g.distractor_length && ok; ++s) ok = grow(canvas, k, g, rng);
      if (ok) break;
      canvas.rollback(canvas.shapes() - before);
    }
  out->pixels = canvas.render();
  out->label = label;
  return true;
}

void check_options(const PathfinderOptions& o) {
  LSF_CHECK(o.size == 32 || o.size == 64 || o.size == 128)
      << "pathfinder: image size must be 32, 64 or 128, got " << o.size;
  LSF_CHECK(int(o.difficulty) >= 0 && int(o.difficulty) < 3) << "pathfinder: unknown difficulty " << int(o.difficulty);
}

// Samples [first, first + count). They are independent (one stream each), so they are made in
// parallel and the result does not depend on the thread count; the first error is rethrown
// (and the samples after it are not made).
std::vector<PathfinderSample> generate_samples(const PathfinderOptions& options, int64_t first, int64_t count) {
  std::vector<PathfinderSample> samples(static_cast<size_t>(count));
  RegionErrors errors;
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < count; ++i)
    errors.run([&] { samples[size_t(i)] = generate_pathfinder_sample(options, first + i); });
  errors.rethrow();
  return samples;
}

}  // namespace

PathfinderGeometry pathfinder_geometry(int64_t size, PathfinderDifficulty difficulty) {
  check_options({.size = size, .difficulty = difficulty});
  PathfinderGeometry g;
  g.contour_length = difficulty == PathfinderDifficulty::Baseline ? 6 : difficulty == PathfinderDifficulty::Length9 ? 9 : 14;
  g.distractor_length = g.contour_length / 3;
  // Distractor dashes per image: 20 at 32 px and 35 at 128 px as the LRA generation scripts;
  // 28 at 64 px in between.
  const int64_t distractor_dashes = size == 32 ? 20 : size == 64 ? 28 : 35;
  g.distractors = distractor_dashes / g.distractor_length;
  if (size == 32) {
    g.dash_length = 2, g.dash_gap = 1.25, g.thickness = 1.0, g.marker_radius = 1.5, g.seed_distance = 7, g.continuity = 1.0;
    g.padding = 1, g.link_reach = 2;
  } else if (size == 64) {
    g.dash_length = 3, g.dash_gap = 1.5, g.thickness = 1.25, g.marker_radius = 2.0, g.seed_distance = 12, g.continuity = 1.4;
    g.padding = 1, g.link_reach = 2;
  } else {
    g.dash_length = 5, g.dash_gap = 2.25, g.thickness = 1.5, g.marker_radius = 3.0, g.seed_distance = 20, g.continuity = 1.8;
    g.padding = 1, g.link_reach = 3;
  }
  return g;
}

PathfinderSample generate_pathfinder_sample(const PathfinderOptions& options, int64_t index) {
  check_options(options);
  LSF_CHECK(index >= 0) << "pathfinder: sample index must be ≥ 0, got " << index;
  const PathfinderGeometry g = pathfinder_geometry(options.size, options.difficulty);
  PhiloxStream rng(options.seed, kGenerateStream + uint64_t(index));
  const int32_t label = int32_t(index % 2);
  PathfinderSample sample;
  for (int a = 0; a < kAttempts; ++a)
    if (attempt(g, options.size, label, rng, &sample)) return sample;
  LSF_FAIL() << "pathfinder: no " << options.size << "×" << options.size << " "
             << kPathfinderDifficultyNames[int(options.difficulty)] << " image found in " << kAttempts
             << " attempts (sample " << index << ")";
}

Dataset generate_pathfinder_dataset(const PathfinderOptions& options, int64_t first, int64_t count) {
  LSF_CHECK(first >= 0 && count >= 0) << "pathfinder: bad sample range [" << first << ", " << first << " + " << count << ")";
  Dataset d;
  d.name = "pathfinder";
  d.vocab_size = 256;
  d.num_classes = 2;
  d.examples.resize(size_t(count));
  std::vector<PathfinderSample> samples = generate_samples(options, first, count);
  for (int64_t i = 0; i < count; ++i) {
    d.examples[size_t(i)].tokens.assign(samples[size_t(i)].pixels.begin(), samples[size_t(i)].pixels.end());
    d.examples[size_t(i)].label = samples[size_t(i)].label;
  }
  return d;
}

int64_t write_pathfinder_dataset(const std::string& dir, const PathfinderOptions& options, int64_t count, int64_t batch_size) {
  check_options(options);
  LSF_CHECK(count >= 1) << "pathfinder: --count must be ≥ 1, got " << count;
  LSF_CHECK(batch_size >= 1) << "pathfinder: batch size must be ≥ 1, got " << batch_size;
  namespace fs = std::filesystem;
  const PathfinderGeometry g = pathfinder_geometry(options.size, options.difficulty);
  fs::create_directories(fs::path(dir) / "metadata");
  int64_t positives = 0;
  // Images are generated (in parallel) a chunk at a time and their metadata lines streamed to
  // the file: memory stays bounded whatever --count and --batch-size are (a sample depends on
  // its index alone, so chunking changes no image).
  constexpr int64_t kChunk = 1024;
  for (int64_t b = 0; b * batch_size < count; ++b) {
    const int64_t begin = b * batch_size, end = std::min(count, begin + batch_size);
    const std::string batch = std::to_string(b);
    fs::create_directories(fs::path(dir) / "imgs" / batch);
    const fs::path meta = fs::path(dir) / "metadata" / (batch + ".npy");
    const fs::path tmp = meta.string() + ".tmp";
    std::ofstream out(tmp, std::ios::binary);
    LSF_CHECK(out.good()) << "pathfinder: cannot write '" << tmp.string() << "'";
    for (int64_t chunk = begin; chunk < end; chunk += kChunk) {
      const std::vector<PathfinderSample> samples = generate_samples(options, chunk, std::min(kChunk, end - chunk));
      std::string lines;
      for (int64_t i = chunk; i < chunk + int64_t(samples.size()); ++i) {
        const PathfinderSample& s = samples[size_t(i - chunk)];
        const std::string name = "sample_" + std::to_string(i) + ".png";
        write_gray_png((fs::path(dir) / "imgs" / batch / name).string(), s.pixels, options.size, options.size);
        positives += s.label;
        // The release's fields: path, file, index, label, continuity, contour length, distractor
        // length, paddle length, paddle thickness, paddle margin, contrast count.
        lines += "imgs/" + batch + " " + name + " " + std::to_string(i) + " " + std::to_string(s.label) + " " +
                 std::to_string(g.continuity) + " " + std::to_string(g.contour_length) + " " +
                 std::to_string(g.distractor_length) + " " + std::to_string(g.dash_length) + " " +
                 std::to_string(g.thickness) + " " + std::to_string(g.dash_gap) + " 1\n";
      }
      out << lines;
      LSF_CHECK(out.good()) << "pathfinder: writing '" << tmp.string() << "' failed";
    }
    out.close();
    LSF_CHECK(out.good()) << "pathfinder: writing '" << tmp.string() << "' failed";
    fs::rename(tmp, meta);
  }
  return positives;
}

std::vector<uint8_t> pathfinder_contact_sheet(const PathfinderOptions& options, int64_t rows, int64_t cols, int64_t zoom,
                                              int64_t* height, int64_t* width) {
  check_options(options);
  LSF_CHECK(rows >= 1 && cols >= 1 && zoom >= 1) << "pathfinder: contact sheet needs rows, cols, zoom ≥ 1";
  const int64_t cells = rows * cols, n = options.size, sep = 2 * zoom, cell = n * zoom;
  std::vector<PathfinderSample> positives, negatives;
  for (int64_t i = 0; int64_t(positives.size() + negatives.size()) < cells; ++i) {
    PathfinderSample s = generate_pathfinder_sample(options, i);
    auto& into = s.label == 1 ? positives : negatives;
    if (int64_t(into.size()) < (s.label == 1 ? (cells + 1) / 2 : cells / 2)) into.push_back(std::move(s));
  }
  positives.insert(positives.end(), negatives.begin(), negatives.end());
  *height = rows * cell + (rows + 1) * sep;
  *width = cols * cell + (cols + 1) * sep;
  std::vector<uint8_t> sheet(size_t(*height * *width), 128);
  for (int64_t k = 0; k < cells; ++k) {
    const int64_t top = sep + (k / cols) * (cell + sep), left = sep + (k % cols) * (cell + sep);
    for (int64_t y = 0; y < cell; ++y)
      for (int64_t x = 0; x < cell; ++x)
        sheet[size_t((top + y) * *width + left + x)] = positives[size_t(k)].pixels[size_t((y / zoom) * n + x / zoom)];
  }
  return sheet;
}

}  // namespace lsf::data
