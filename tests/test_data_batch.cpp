// BatchLoader: padding and masks, pad_multiple and seq_len, truncation, paired documents,
// determinism by seed, epoch boundaries (each example once per epoch) and argument errors.
#include <algorithm>
#include <cmath>
#include <set>

#include "lsformer/data/batch.h"
#include "helpers.h"

using namespace lsf;
using namespace lsf::data;

namespace {

// n examples; example i has i % 7 + 1 tokens, token j of it is 1 + (i + j) % 20, label i % 3.
std::shared_ptr<const Dataset> make_dataset(int64_t n, bool paired = false) {
  auto d = std::make_shared<Dataset>();
  d->name = "toy";
  d->vocab_size = 21;
  d->num_classes = 3;
  d->paired = paired;
  for (int64_t i = 0; i < n; ++i) {
    Example e;
    for (int64_t j = 0; j < i % 7 + 1; ++j) e.tokens.push_back(int32_t(1 + (i + j) % 20));
    if (paired)
      for (int64_t j = 0; j < 2 * (i % 5) + 1; ++j) e.tokens2.push_back(int32_t(20 - j % 20));
    e.label = int32_t(i % 3);
    d->examples.push_back(e);
  }
  return d;
}

// Checks one row of a padded batch against the example it came from.
void check_row(const Batch& b, int64_t row, const Example& e, int64_t length) {
  const auto tokens = b.tokens.to_vector<int64_t>();
  const auto mask = b.mask.to_vector<bool>();
  const int64_t used = std::min<int64_t>(length, int64_t(e.tokens.size()));
  for (int64_t i = 0; i < length; ++i) {
    const int64_t expected = i < used ? e.tokens[size_t(i)] : 0;
    REQUIRE(tokens[size_t(row * length + i)] == expected);
    REQUIRE(mask[size_t(row * length + i)] == (i < used));
  }
}

}  // namespace

TEST_CASE("batch: pads to the longest example rounded up to pad_multiple", "[data]") {
  auto d = make_dataset(10);
  BatchOptions o;
  o.batch_size = 4;
  o.pad_multiple = 4;
  o.shuffle = false;
  BatchLoader loader(d, o);
  REQUIRE(loader.batches_per_epoch() == 3);  // 4 + 4 + 2, the last batch kept
  const Batch b0 = loader.batch(0);        // lengths 1, 2, 3, 4 → L = 4
  CHECK(b0.tokens.shape() == Shape{4, 4});
  CHECK(b0.tokens.dtype() == kI64);
  CHECK(b0.mask.dtype() == kBool);
  CHECK(b0.mask.shape() == Shape{4, 4});
  CHECK(b0.labels.dtype() == kI64);
  CHECK(b0.labels.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 0});
  CHECK_FALSE(b0.tokens2.defined());
  for (int64_t r = 0; r < 4; ++r) check_row(b0, r, d->examples[size_t(r)], 4);
  const Batch b1 = loader.batch(1);  // lengths 5, 6, 7, 1 → 7 → L = 8
  CHECK(b1.tokens.shape() == Shape{4, 8});
  for (int64_t r = 0; r < 4; ++r) check_row(b1, r, d->examples[size_t(4 + r)], 8);
  const Batch b2 = loader.batch(2);  // the smaller last batch: lengths 2, 3 → L = 4
  CHECK(b2.tokens.shape() == Shape{2, 4});
  CHECK(b2.labels.to_vector<int64_t>() == std::vector<int64_t>{2, 0});
  check_row(b2, 1, d->examples[9], 4);
  // The next epoch starts over (no shuffle: the same first batch).
  CHECK(loader.batch(3).tokens.to_vector<int64_t>() == b0.tokens.to_vector<int64_t>());
}

TEST_CASE("batch: seq_len pads or truncates every batch to exactly that length", "[data]") {
  auto d = make_dataset(14);
  BatchOptions o;
  o.batch_size = 7;
  o.seq_len = 6;
  o.pad_multiple = 3;
  o.shuffle = false;
  BatchLoader loader(d, o);
  const Batch b = loader.batch(0);  // lengths 1..7: the 7-token example keeps its first 6
  REQUIRE(b.tokens.shape() == Shape{7, 6});
  for (int64_t r = 0; r < 7; ++r) check_row(b, r, d->examples[size_t(r)], 6);
  const auto mask = b.mask.to_vector<bool>();
  CHECK(std::count(mask.begin() + 36, mask.end(), true) == 6);  // last row all real
}

TEST_CASE("batch: paired datasets pad the second document separately", "[data]") {
  auto d = make_dataset(6, /*paired=*/true);
  BatchOptions o;
  o.batch_size = 3;
  o.pad_multiple = 2;
  o.shuffle = false;
  BatchLoader loader(d, o);
  const Batch b = loader.batch(1);  // examples 3, 4, 5: tokens2 lengths 7, 9, 1 → L2 = 10
  REQUIRE(b.tokens2.shape() == Shape{3, 10});
  REQUIRE(b.mask2.shape() == Shape{3, 10});
  CHECK(b.tokens.shape() == Shape{3, 6});  // lengths 4, 5, 6
  const auto t2 = b.tokens2.to_vector<int64_t>();
  const auto m2 = b.mask2.to_vector<bool>();
  for (int64_t r = 0; r < 3; ++r) {
    const auto& e = d->examples[size_t(3 + r)].tokens2;
    for (int64_t i = 0; i < 10; ++i) {
      REQUIRE(t2[size_t(r * 10 + i)] == (i < int64_t(e.size()) ? e[size_t(i)] : 0));
      REQUIRE(m2[size_t(r * 10 + i)] == (i < int64_t(e.size())));
    }
  }
}

TEST_CASE("batch: the mask comes from lengths, so a pixel value 0 stays a real token", "[data]") {
  auto d = std::make_shared<Dataset>();
  d->name = "image";
  d->vocab_size = 256;
  d->num_classes = 10;
  d->examples = {Example{{0, 255, 0, 7}, {}, 3}, Example{{0, 0}, {}, 9}};
  BatchOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  const Batch b = BatchLoader(d, o).batch(0);
  CHECK(b.mask.to_vector<bool>() == std::vector<bool>{true, true, true, true, true, true, false, false});
  CHECK(b.tokens.to_vector<int64_t>() == std::vector<int64_t>{0, 255, 0, 7, 0, 0, 0, 0});
}

TEST_CASE("batch: shuffled epochs visit every example once and depend only on (seed, epoch)",
          "[data]") {
  auto d = make_dataset(23);
  BatchOptions o;
  o.batch_size = 5;
  o.seed = 42;
  BatchLoader loader(d, o);
  REQUIRE(loader.batches_per_epoch() == 5);
  std::vector<std::vector<int64_t>> epochs;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> seen;
    for (int64_t k = 0; k < 5; ++k) {
      const auto idx = loader.batch_indices(epoch * 5 + k);
      CHECK(int64_t(idx.size()) == (k < 4 ? 5 : 3));
      seen.insert(seen.end(), idx.begin(), idx.end());
    }
    std::vector<int64_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> all(23);
    for (int64_t i = 0; i < 23; ++i) all[size_t(i)] = i;
    CHECK(sorted == all);  // each example exactly once per epoch
    epochs.push_back(seen);
  }
  CHECK(epochs[0] != epochs[1]);  // a fresh permutation at each epoch boundary
  CHECK(epochs[1] != epochs[2]);

  // A pure function of the index: a second loader asked in another order agrees, and the
  // batch tensors match the indices.
  BatchLoader again(d, o);
  for (int64_t k : {13, 2, 7, 0, 14}) {
    CHECK(again.batch_indices(k) == loader.batch_indices(k));
    const Batch a = again.batch(k), b = loader.batch(k);
    CHECK(a.tokens.to_vector<int64_t>() == b.tokens.to_vector<int64_t>());
    CHECK(a.labels.to_vector<int64_t>() == b.labels.to_vector<int64_t>());
  }
  const auto idx = loader.batch_indices(6);
  const Batch b6 = loader.batch(6);
  const int64_t length = b6.tokens.size(1);
  for (size_t r = 0; r < idx.size(); ++r) check_row(b6, int64_t(r), d->examples[size_t(idx[r])], length);

  o.seed = 43;
  BatchLoader other(d, o);
  CHECK(other.epoch_order(0) != loader.epoch_order(0));

  // drop_last: 4 full batches of 5, 20 distinct examples per epoch.
  o.drop_last = true;
  BatchLoader dropping(d, o);
  REQUIRE(dropping.batches_per_epoch() == 4);
  std::set<int64_t> distinct;
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t i : dropping.batch_indices(k)) distinct.insert(i);
  CHECK(distinct.size() == 20);
}

TEST_CASE("batch: the epoch permutation is uniform", "[data]") {
  // Where example 0 lands in a 5-element permutation, over 2000 epochs: each position has
  // probability 1/5, so its count is Binomial(2000, 0.2) with σ = sqrt(2000·0.2·0.8) ≈ 17.9;
  // a 5σ band fails a correct shuffle with probability < 1e-6 per position.
  auto d = make_dataset(5);
  BatchOptions o;
  o.batch_size = 5;
  o.seed = 7;
  BatchLoader loader(d, o);
  std::vector<int64_t> counts(5, 0);
  for (int64_t epoch = 0; epoch < 2000; ++epoch) {
    const auto order = loader.epoch_order(epoch);
    counts[size_t(std::find(order.begin(), order.end(), 0) - order.begin())]++;
  }
  const double sigma = std::sqrt(2000 * 0.2 * 0.8);
  for (int64_t c : counts) CHECK(std::abs(double(c) - 400.0) <= 5 * sigma);
}

TEST_CASE("batch: bad options and bad data are errors", "[data]") {
  auto d = make_dataset(4);
  BatchOptions o;
  o.batch_size = 0;
  CHECK_THROWS_WITH(BatchLoader(d, o), Catch::Contains("batch_size must be ≥ 1"));
  o = {};
  o.pad_multiple = 0;
  CHECK_THROWS_WITH(BatchLoader(d, o), Catch::Contains("pad_multiple"));
  o = {};
  o.seq_len = 10;
  o.pad_multiple = 8;
  CHECK_THROWS_WITH(BatchLoader(d, o), Catch::Contains("seq_len 10 is not a multiple of pad_multiple 8"));
  o = {};
  o.seq_len = -1;
  CHECK_THROWS_WITH(BatchLoader(d, o), Catch::Contains("seq_len"));
  o = {};
  o.batch_size = 5;
  o.drop_last = true;
  CHECK_THROWS_WITH(BatchLoader(d, o), Catch::Contains("only 4 examples"));
  CHECK_THROWS_WITH(BatchLoader(std::make_shared<Dataset>(), BatchOptions{}),
                    Catch::Contains("has no examples"));
  CHECK_THROWS_WITH(BatchLoader(nullptr, BatchOptions{}), Catch::Contains("no dataset"));
  CHECK_THROWS_WITH(BatchLoader(d, BatchOptions{}).batch(-1), Catch::Contains("≥ 0"));
  auto bad = std::make_shared<Dataset>(*d);
  bad->examples[1].tokens[0] = 21;  // vocab_size is 21
  CHECK_THROWS_WITH(BatchLoader(bad, BatchOptions{}).batch(0),
                    Catch::Contains("token id 21") && Catch::Contains("[0, 21)"));
  bad = std::make_shared<Dataset>(*d);
  bad->examples[2].label = 3;
  CHECK_THROWS_WITH(BatchLoader(bad, BatchOptions{}).batch(0), Catch::Contains("label 3"));
}
