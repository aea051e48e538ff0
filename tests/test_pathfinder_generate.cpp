// The Pathfinder generator (data/pathfinder_generate.h): the label is a property of the pixels
// (a positive's markers are joined by ink, a negative's are not: flood fill with the generator's
// link reach, docs/data-formats.md §1.4.6), labels are balanced, every sample is a pure function
// of (options, index), and what `lsf data pathfinder` writes is what read_pathfinder reads.
#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "lsformer/data/pathfinder.h"
#include "lsformer/data/pathfinder_generate.h"
#include "helpers.h"

using namespace lsf;
using namespace lsf::data;

namespace {

namespace fs = std::filesystem;

struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("lsf_pathfinder_" + tag + "_" + std::to_string(std::random_device{}()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Whether ink (pixels > 0) joins pixel `from` to pixel `to` when a step may jump up to `reach`
// pixels in each direction (breadth-first flood fill from `from`).
bool ink_connects(const std::vector<uint8_t>& pixels, int64_t n, std::array<int64_t, 2> from, std::array<int64_t, 2> to,
                  int64_t reach) {
  std::vector<char> seen(pixels.size(), 0);
  std::deque<int64_t> queue{from[0] * n + from[1]};
  seen[size_t(queue.front())] = 1;
  while (!queue.empty()) {
    const int64_t p = queue.front();
    queue.pop_front();
    if (p == to[0] * n + to[1]) return true;
    const int64_t r = p / n, c = p % n;
    for (int64_t qr = std::max<int64_t>(0, r - reach); qr <= std::min(n - 1, r + reach); ++qr)
      for (int64_t qc = std::max<int64_t>(0, c - reach); qc <= std::min(n - 1, c + reach); ++qc) {
        const size_t q = size_t(qr * n + qc);
        if (pixels[q] > 0 && !seen[q]) {
          seen[q] = 1;
          queue.push_back(int64_t(q));
        }
      }
  }
  return false;
}

}  // namespace

TEST_CASE("pathfinder generate: positives' markers are joined by ink, negatives' are not", "[data][pathfinder]") {
  // Every size and difficulty; 40 samples of the LRA task's setting (32 px, 14 dashes).
  struct Case {
    int64_t size;
    PathfinderDifficulty difficulty;
    int64_t samples;
  };
  for (const Case& c : {Case{32, PathfinderDifficulty::Length14, 40}, Case{32, PathfinderDifficulty::Length9, 10},
                        Case{32, PathfinderDifficulty::Baseline, 10}, Case{64, PathfinderDifficulty::Length14, 6},
                        Case{128, PathfinderDifficulty::Length14, 4}}) {
    const PathfinderOptions options{.size = c.size, .difficulty = c.difficulty, .seed = 3};
    const PathfinderGeometry g = pathfinder_geometry(c.size, c.difficulty);
    for (int64_t i = 0; i < c.samples; ++i) {
      INFO("size " << c.size << ", " << kPathfinderDifficultyNames[int(c.difficulty)] << ", sample " << i);
      const PathfinderSample s = generate_pathfinder_sample(options, i);
      REQUIRE(int64_t(s.pixels.size()) == c.size * c.size);
      for (const auto& m : s.markers) {
        REQUIRE(m[0] >= 0);
        REQUIRE(m[1] < c.size);
        CHECK(s.pixels[size_t(m[0] * c.size + m[1])] == 255);  // a marker's centre is fully inked
      }
      CHECK(ink_connects(s.pixels, c.size, s.markers[0], s.markers[1], g.link_reach) == (s.label == 1));
      // More than the two target contours' worth of ink: the distractors are there.
      const auto inked = std::count_if(s.pixels.begin(), s.pixels.end(), [](uint8_t v) { return v > 0; });
      CHECK(inked > 2 * g.contour_length * int64_t(g.dash_length));
    }
  }
}

TEST_CASE("pathfinder generate: labels alternate, so sets are balanced", "[data][pathfinder]") {
  const Dataset d = generate_pathfinder_dataset({.size = 32, .seed = 5}, /*first=*/7, /*count=*/30);
  REQUIRE(d.examples.size() == 30);
  CHECK(d.vocab_size == 256);
  CHECK(d.num_classes == 2);
  int64_t positives = 0;
  for (const Example& e : d.examples) {
    positives += e.label;
    CHECK(e.tokens.size() == 1024);
  }
  CHECK(positives == 15);
}

TEST_CASE("pathfinder generate: each sample is a pure function of (options, index)", "[data][pathfinder]") {
  const PathfinderOptions a{.size = 32, .seed = 11};
  const PathfinderSample s = generate_pathfinder_sample(a, 4);
  CHECK(generate_pathfinder_sample(a, 4).pixels == s.pixels);
  CHECK(generate_pathfinder_sample({.size = 32, .seed = 12}, 4).pixels != s.pixels);
  CHECK(generate_pathfinder_sample(a, 5).pixels != s.pixels);
  // A dataset's example k is sample first + k, whatever the thread count.
  const Dataset d = generate_pathfinder_dataset(a, /*first=*/2, /*count=*/4);
  CHECK(d.examples[2].tokens == std::vector<int32_t>(s.pixels.begin(), s.pixels.end()));
  CHECK(d.examples[2].label == s.label);
}

TEST_CASE("pathfinder generate: the release layout it writes is what read_pathfinder reads", "[data][pathfinder]") {
  ScratchDir dir("layout");
  const PathfinderOptions options{.size = 32, .difficulty = PathfinderDifficulty::Baseline, .seed = 2};
  // 20 images in batches of 8: imgs/{0,1,2}, metadata/{0,1,2}.npy.
  CHECK(write_pathfinder_dataset(dir.path.string(), options, 20, 8) == 10);
  CHECK(fs::is_regular_file(dir.path / "imgs" / "2" / "sample_19.png"));
  CHECK(fs::is_regular_file(dir.path / "metadata" / "2.npy"));
  std::map<std::vector<int32_t>, int32_t> written;
  for (int64_t i = 0; i < 20; ++i) {
    const PathfinderSample s = generate_pathfinder_sample(options, i);
    written[std::vector<int32_t>(s.pixels.begin(), s.pixels.end())] = s.label;
  }
  REQUIRE(written.size() == 20);
  size_t seen = 0;
  for (const char* split : {"train", "val", "test"}) {
    const Dataset d = read_pathfinder(dir.path.string(), split, /*seed=*/0);
    for (const Example& e : d.examples) {
      REQUIRE(written.count(e.tokens) == 1);
      CHECK(written.at(e.tokens) == e.label);
      ++seen;
    }
  }
  CHECK(seen == 20);
}

TEST_CASE("pathfinder generate: a folder larger than one generation chunk is written whole and in order", "[data][pathfinder]") {
  // 1100 images in one folder: generated 1024 at a time (memory stays bounded for any
  // --batch-size), the metadata lines streamed in index order.
  ScratchDir dir("chunks");
  const PathfinderOptions options{.size = 32, .difficulty = PathfinderDifficulty::Baseline, .seed = 3};
  const int64_t positives = write_pathfinder_dataset(dir.path.string(), options, 1100, 5000);
  std::ifstream meta(dir.path / "metadata" / "0.npy");
  int64_t lines = 0, labels = 0;
  std::vector<int64_t> labels_by_index;
  for (std::string line; std::getline(meta, line); ++lines) {
    std::istringstream fields(line);
    std::string folder, file;
    int64_t index = -1, label = -1;
    fields >> folder >> file >> index >> label;
    REQUIRE(index == lines);
    labels += label;
    labels_by_index.push_back(label);
  }
  CHECK(lines == 1100);
  CHECK(labels == positives);
  CHECK(fs::is_regular_file(dir.path / "imgs" / "0" / "sample_1099.png"));
  // The second chunk's images are the samples of their indices.
  for (int64_t i : {1024, 1099}) CHECK(labels_by_index.at(size_t(i)) == generate_pathfinder_sample(options, i).label);
}

TEST_CASE("pathfinder generate: bad options are errors naming them", "[data][pathfinder]") {
  CHECK_THROWS_WITH(generate_pathfinder_sample({.size = 48}, 0), Catch::Contains("size must be 32, 64 or 128, got 48"));
  CHECK_THROWS_WITH(generate_pathfinder_sample({.size = 32}, -1), Catch::Contains("index must be ≥ 0"));
  ScratchDir dir("bad");
  CHECK_THROWS_WITH(write_pathfinder_dataset(dir.path.string(), {.size = 32}, 0), Catch::Contains("--count must be ≥ 1"));
}
