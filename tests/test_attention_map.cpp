// Attention pictures (models/train/attention_layout.h, attention_map.h): the layout maths (window
// slots onto keys for the three long-short forms against the modules' own definitions, binning
// that keeps each row's mass, effective attention, colour runs), a synthetic n = 2048 picture
// that stays small and says how it was binned, and `lsf attention`'s library call on tiny trained
// runs of the three families (LRA, char-LM, vision): well-formed SVG with the expected parts, and
// errors naming the bad value and the valid range; the char-LM run's report.html with its sample.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "helpers.h"
#include "image_test_files.h"
#include "markup.h"
#include "run_helpers.h"
#include "lsformer/models/attention/long_short_2d.h"
#include "lsformer/models/nn/capture.h"
#include "lsformer/models/train/attention_layout.h"
#include "lsformer/models/train/attention_map.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/run_report.h"
#include "lsformer/ops/long_short.h"

namespace fs = std::filesystem;
using namespace lsf;
using namespace lsf::train;
using Catch::Contains;

namespace {

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("attention_map", name, /*create=*/true); }

// The texts of an SVG document.
std::string texts_of(const std::string& svg) {
  std::string out;
  size_t at = 0;
  while ((at = svg.find("<text", at)) != std::string::npos) {
    const size_t open = svg.find('>', at), close = svg.find("</text>", at);
    out += svg.substr(open + 1, close - open - 1) + "\n";
    at = close;
  }
  return out;
}

// The same joined by spaces: a caption sentence reads whole however the picture wrapped it.
std::string flat_texts_of(const std::string& svg) {
  std::string out = texts_of(svg);
  std::replace(out.begin(), out.end(), '\n', ' ');
  return out;
}

int count_tag(const std::vector<testing::Element>& elements, const std::string& tag) {
  int n = 0;
  for (const auto& e : elements) n += e.tag == tag;
  return n;
}

}  // namespace

TEST_CASE("window slots land on the keys each long-short form defines", "[attention_map]") {
  SECTION("bidirectional: slot u of query t is key ⌊t/w⌋·w − ext + u, the slot order of the fused op") {
    // The composed op's probabilities (ops/long_short.h) with one-hot keys: query t's window slot
    // u peaks exactly where its key is the query's own row, so the slot that holds key t is
    // u = t − (⌊t/w⌋·w − ext).
    const int64_t n = 12, w = 4;
    CHECK(bidirectional_window_span(w) == 8);
    CHECK(bidirectional_window_key(0, 0, w, n) == -1);  // before the sequence
    CHECK(bidirectional_window_key(0, 2, w, n) == 0);
    CHECK(bidirectional_window_key(5, 0, w, n) == 2);
    CHECK(bidirectional_window_key(5, 7, w, n) == 9);
    CHECK(bidirectional_window_key(11, 7, w, n) == -1);  // past the end
    CHECK(bidirectional_window_span(1) == 3);            // ext = max(⌊1/2⌋, 1) = 1
    Tensor q = zeros({1, 1, n, n}, TensorOptions(kF64)), k = zeros({1, 1, n, n}, TensorOptions(kF64));
    for (int64_t t = 0; t < n; ++t) q.narrow(2, t, 1).narrow(3, t, 1).fill_(30.0), k.narrow(2, t, 1).narrow(3, t, 1).fill_(1.0);
    const std::vector<double> p = long_short_attention_probabilities(q, k, Tensor(), Tensor(), {.window = w}).to_vector<double>();
    for (int64_t t = 0; t < n; ++t) {
      int64_t best = 0;
      for (int64_t u = 1; u < 8; ++u) best = p[size_t(t * 8 + u)] > p[size_t(t * 8 + best)] ? u : best;
      CHECK(bidirectional_window_key(t, best, w, n) == t);
    }
  }
  SECTION("causal: slot j is the key at distance w − 1 − j after the memory") {
    CHECK(causal_window_key(0, 3, 4, 8) == 8);  // the query's own position
    CHECK(causal_window_key(0, 0, 4, 8) == 5);  // three back, in the memory
    CHECK(causal_window_key(5, 1, 4, 8) == 11);
  }
  SECTION("2-D: the T×T block around the w×w group, −1 off the map (the module's zeros)") {
    CHECK(window2d_span(2) == 4);
    CHECK(window2d_key(5, 0, 2, 4) == -1);  // patch (1, 1): block starts at (−1, −1)
    CHECK(window2d_key(5, 5, 2, 4) == 0);   // (ty, tx) = (1, 1) → patch (0, 0)
    CHECK(window2d_key(15, 15, 2, 4) == -1);
    // The module gives exactly the off-map slots probability 0 (and the others > 0).
    manual_seed(4);
    nn::LongShortAttention2d m({.dim = 8, .heads = 1, .window = 2, .rank = 2});
    m.to(kF64);
    m.eval();
    nn::CaptureScope cap(m);
    Generator g(2);
    m.forward(randn({1, 36, 8}, TensorOptions(kF64), &g), {.height = 6, .width = 6});
    const std::vector<double> a = cap.get("attention").to_vector<double>();  // [1, 1, 36, 2 + 16]
    for (int64_t t = 0; t < 36; ++t)
      for (int64_t u = 0; u < 16; ++u) {
        INFO("query " << t << " slot " << u);
        CHECK((window2d_key(t, u, 2, 6) < 0) == (a[size_t(t * 18 + 2 + u)] == 0.0));
      }
  }
}

TEST_CASE("binning keeps each row's mass, effective attention, colour runs", "[attention_map]") {
  const AxisBins b = make_bins(10, 4);
  CHECK(b.per_bin == 3);
  CHECK(b.bins == 4);
  CHECK(b.begin(3) == 9);
  CHECK(b.end(3) == 10);
  CHECK(make_bins(2048, 192).per_bin == 11);
  CHECK(make_bins(2048, 192).bins == 187);
  CHECK(make_bins(5, 192).per_bin == 1);
  // Rows that sum to 1 (a softmax each) stay rows that sum to 1 after binning both axes.
  const int64_t rows = 7, cols = 10;
  std::vector<double> m(size_t(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    double z = 0;
    for (int64_t j = 0; j < cols; ++j) z += (m[size_t(i * cols + j)] = 1.0 + double((i * 3 + j * 5) % 7));
    for (int64_t j = 0; j < cols; ++j) m[size_t(i * cols + j)] /= z;
  }
  const AxisBins rb = make_bins(rows, 3), cb = make_bins(cols, 4);
  const std::vector<double> binned = bin_matrix(m, rows, cols, rb, cb);
  REQUIRE(binned.size() == size_t(rb.bins * cb.bins));
  for (int64_t i = 0; i < rb.bins; ++i) {
    double s = 0;
    for (int64_t j = 0; j < cb.bins; ++j) s += binned[size_t(i * cb.bins + j)];
    CHECK(std::fabs(s - 1.0) < 1e-12);  // sums of ≤ 70 terms of ~0.1 in f64
  }
  // Bin (0, 0) by hand: the mean over rows 0..2 of their sums over columns 0..2.
  double cell = 0;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j) cell += m[size_t(i * cols + j)] / 3.0;
  CHECK(std::fabs(binned[0] - cell) < 1e-15);

  // Window 0.5 on keys 1, 2; slots 0.3 and 0.2 pooling keys {0, 3} and {3}: total mass 1.
  const std::vector<double> e = effective_attention({0, 0.25, 0.25, 0}, {0.3, 0.2}, {0.5, 0, 0, 0.5, 0, 0, 0, 1}, 4);
  CHECK(e == std::vector<double>{0.15, 0.25, 0.25, 0.35});
  CHECK_THROWS_WITH(effective_attention({0, 0}, {1}, {1, 0, 0}, 2), Contains("effective_attention"));

  CHECK(colour_level(0.0, 1.0, 24) == 0);
  CHECK(colour_level(1.0 / 49, 1.0, 24) == 0);  // below half a step: white, not drawn
  CHECK(colour_level(1.0, 1.0, 24) == 24);
  CHECK(colour_level(0.5, 0.0, 24) == 0);  // an all-zero panel
  CHECK(level_colour(0, 24) == "#ffffff");
  CHECK(level_colour(24, 24) == "#08306b");
  const std::vector<LevelRun> runs = level_runs({0, 3, 3, 0, 5, 5, 5});
  REQUIRE(runs.size() == 2);
  CHECK((runs[0].begin == 1 && runs[0].length == 2 && runs[0].level == 3));
  CHECK((runs[1].begin == 4 && runs[1].length == 3 && runs[1].level == 5));
}

TEST_CASE("an n = 2048 long-short picture is binned, says so, and stays small", "[attention_map]") {
  const int64_t n = 2048, w = 64, s = bidirectional_window_span(w), r = 8;
  SequencePicture p;
  p.title = "synthetic";
  p.queries = p.keys = n;
  p.slots = r;
  p.on_slots.assign(size_t(n * r), 0.5 / double(r));
  std::vector<double> window(size_t(n * s), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t u = 0; u < s; ++u) {
      const int64_t j = bidirectional_window_key(t, u, w, n);
      if (j >= 0) window[size_t(t * s + u)] = 0.5 / double(w) * (1.0 + 0.5 * std::sin(double(j)));
    }
  p.on_keys = scatter_to_keys(window, n, s, n, [&](int64_t t, int64_t u) { return bidirectional_window_key(t, u, w, n); });
  p.in_band = scatter_to_keys(std::vector<double>(size_t(n * s), 1.0), n, s, n,
                              [&](int64_t t, int64_t u) { return bidirectional_window_key(t, u, w, n); });
  p.pooling.assign(size_t(r * n), 1.0 / double(n));
  const std::string svg = draw_sequence_picture(p, 1000, 192).str();
  const auto elements = testing::parse_markup(svg);
  CHECK(svg.size() < 600 * 1024);
  CHECK(count_tag(elements, "rect") < 12000);
  CHECK_THAT(texts_of(svg), Contains("a cell is 11 queries × 11 keys") && Contains("query 1000"));
  CHECK_THROWS_WITH(draw_sequence_picture(p, 2048, 192), Contains("query 2048 outside 0..2047"));
}

TEST_CASE("lsf attention on a trained LRA run: the window band, the slots, P, named errors", "[attention_map][train]") {
  const fs::path dir = fresh_dir("lra");
  std::ostringstream log;
  testing::run_training(parse_config(R"({
    "data": {"task": "listops", "seed": 3,
             "generate": {"enabled": true, "train": 64, "dev": 16, "test": 16,
                          "min_length": 8, "max_length": 24, "max_depth": 3, "max_args": 3}},
    "model": {"vocab_size": 16, "max_seq_len": 32, "dim": 16, "heads": 2, "ffn_dim": 32, "window": 4, "rank": 3,
              "head_hidden": 16},
    "schedule": {"name": "constant"},
    "train": {"steps": 6, "batch_size": 8, "eval_every": 6, "log_every": 3, "checkpoint_every": 0, "seed": 1, "threads": 1}
  })"), dir / "run", log);
  const std::string ckpt = (dir / "run" / "best.safetensors").string();
  for (int64_t layer : {0, 1}) {
    INFO("layer " << layer);
    const std::string svg = attention_map(ckpt, {.split = "dev", .index = 2, .layer = layer, .head = 1}).str();
    const auto elements = testing::parse_markup(svg);
    CHECK(count_tag(elements, "rect") > 50);
    const std::string texts = texts_of(svg);
    CHECK_THAT(texts, Contains("model.transformer_" + std::to_string(layer) + ".mha), head 1") &&
                          Contains("window (w = 4, span 8)") && Contains("3 projection slots") &&
                          Contains("P: what each slot pools") && Contains("listops dev example 2"));
    if (layer == 1) CHECK_THAT(texts, Contains("CLS + 3 projection slots"));  // the last layer gets the CLS
  }
  // PNG through Cairo, and errors that name the value and the range.
  const fs::path png = dir / "attn.png";
  write_attention_map(ckpt, {.split = "test", .index = 0}, png.string());
  CHECK(fs::file_size(png) > 1000);
  CHECK_THROWS_WITH(attention_map(ckpt, {.index = 16}), Contains("example index 16 is out of range for the dev split (0..15)"));
  CHECK_THROWS_WITH(attention_map(ckpt, {.layer = 2}),
                    Contains("--layer 2 is out of range: the model has 2 attention layers (0: model.transformer_0.mha, "
                             "1: model.transformer_1.mha)"));
  CHECK_THROWS_WITH(attention_map(ckpt, {.head = 2}), Contains("--head 2 is out of range: layer 0") && Contains("(0..1)"));
  CHECK_THROWS_WITH(attention_map(ckpt, {.split = "valid"}), Contains("unknown split 'valid' (expected train, dev or test)"));
  CHECK_THROWS_WITH(attention_map(ckpt, {.query = 500}), Contains("--query 500 is out of range"));
  CHECK_THROWS_WITH(write_attention_map(ckpt, {}, (dir / "a.pdf").string()), Contains("as .svg or .png, got '.pdf'"));

  // Full attention and Linformer draw their own matrices (--set: the same data, another model).
  for (const char* kind : {"full", "linformer"}) {
    INFO(kind);
    std::ostringstream other_log;
    std::vector<std::string> model = {std::string("model.attention=") + kind, "model.pooling=cls"};
    if (std::string(kind) == "linformer") model = {"model.attention=linformer", "model.pooling=mean", "model.linformer_k=4"};
    testing::run_training(parse_config(testing::read_file(dir / "run" / "config.json"), model), dir / kind, other_log);
    const std::string svg = attention_map((dir / kind / "best.safetensors").string(), {.index = 2}).str();
    testing::parse_markup(svg);
    CHECK_THAT(texts_of(svg), Contains(std::string(kind) == "full" ? "Full attention: every query over every token"
                                                                   : "4 projected slots"));
  }
  fs::remove_all(dir);
}

TEST_CASE("lsf attention on an LRA pixel task: over the image, and full attention's CLS token", "[attention_map][train]") {
  const fs::path dir = fresh_dir("pixels");
  std::ostringstream log;
  testing::run_training(parse_config(R"({
    "data": {"task": "pathfinder", "seed": 6, "generate": {"enabled": true, "train": 8, "dev": 4, "test": 4}},
    "model": {"vocab_size": 256, "max_seq_len": 1024, "dim": 8, "heads": 2, "ffn_dim": 16, "layers": 2, "window": 8,
              "rank": 2, "head_hidden": 8},
    "schedule": {"name": "constant"},
    "train": {"steps": 2, "batch_size": 4, "eval_every": 2, "log_every": 1, "checkpoint_every": 0, "seed": 1, "threads": 1}
  })"), dir / "run", log);
  const std::string ckpt = (dir / "run" / "best.safetensors").string();
  for (int64_t layer : {0, 1}) {
    INFO("layer " << layer);
    const std::string svg = attention_map(ckpt, {.split = "dev", .index = 1, .layer = layer}).str();
    testing::parse_markup(svg);
    const std::string texts = flat_texts_of(svg);
    CHECK_THAT(texts, Contains("pathfinder dev example 1") && Contains("The 32×32 pixels are one sequence in row-major order") &&
                          Contains("the query is pixel 528 (row 16, column 16)") && Contains("window + slots through P") &&
                          Contains("slot 1: "));
    CHECK((texts.find("the CLS gets") != std::string::npos) == (layer == 1));  // the last layer has the CLS
  }
  CHECK_THAT(flat_texts_of(attention_map(ckpt, {.split = "dev", .query = 33}).str()), Contains("(row 1, column 1)"));
  CHECK_THROWS_WITH(attention_map(ckpt, {.query = 1024}), Contains("--query 1024 is out of range for this 32×32 image (0..1023"));

  // Full attention pooled at the CLS: the last layer's sequence starts with the CLS token, drawn
  // as the global token over the image and as a slot in the sequence picture.
  std::ostringstream full_log;
  testing::run_training(parse_config(testing::read_file(dir / "run" / "config.json"), {"model.attention=full"}),
                        dir / "full", full_log);
  const std::string full_ckpt = (dir / "full" / "best.safetensors").string();
  const std::string full = flat_texts_of(attention_map(full_ckpt, {.index = 1, .layer = 1}).str());
  CHECK_THAT(full, Contains("Full attention: every query over every token") && Contains("the CLS gets") &&
                       Contains("This last layer also attends to the CLS token"));
  CHECK(full.find("window + slots through P") == std::string::npos);
  CHECK(flat_texts_of(attention_map(full_ckpt, {.index = 1, .layer = 0}).str()).find("CLS") == std::string::npos);
  // One layer: the first attention layer is the last, and its sequence starts with the CLS.
  std::ostringstream one_log;
  testing::run_training(parse_config(testing::read_file(dir / "run" / "config.json"),
                                     {"model.attention=full", "model.layers=1"}),
                        dir / "one", one_log);
  CHECK_THAT(flat_texts_of(attention_map((dir / "one" / "best.safetensors").string(), {.index = 1}).str()),
             Contains("This last layer also attends to the CLS token") && Contains("the CLS gets"));
  fs::remove_all(dir);
}

TEST_CASE("lsf attention on a char-LM run: memory and block keys, chunk slots, its report's sample", "[attention_map][train][lm]") {
  const fs::path dir = fresh_dir("lm");
  std::ofstream(dir / "train.txt") << std::string(400, 'a') + "the tide rolls in and out of the sea. ";
  std::ofstream(dir / "dev.txt") << "the sea rolls in, the tide rolls out; the sea and the tide. ";
  std::ofstream(dir / "test.txt") << "the tide and the sea roll in and out. ";
  std::ostringstream log;
  testing::run_training(parse_config(R"({
    "data": {"task": "lm", "corpus": "splits", "path": ")" + dir.string() + R"(", "eval_batch_size": 1},
    "model": {"dim": 16, "heads": 2, "layers": 1, "ffn_dim": 32, "block_length": 8, "memory_length": 8,
              "chunk_length": 2, "rank": 1, "window": 4},
    "schedule": {"name": "constant"},
    "train": {"steps": 4, "batch_size": 2, "eval_every": 4, "log_every": 2, "checkpoint_every": 0, "seed": 2, "threads": 1}
  })"), dir / "run", log);
  const std::string ckpt = (dir / "run" / "best.safetensors").string();
  const std::string svg = attention_map(ckpt, {.split = "dev", .index = 3}).str();
  testing::parse_markup(svg);
  const std::string texts = texts_of(svg);
  CHECK_THAT(texts, Contains("window (the last w = 4 keys)") && Contains("8 chunk slots (m: memory, b: block)") &&
                        Contains("memory") && Contains("block") && Contains("char-LM dev block 3: characters 24..31"));
  CHECK_THROWS_WITH(attention_map(ckpt, {.index = 7}), Contains("block index 7 is out of range for the dev split (0..6"));

  // The run's report: well formed, self-contained (its one figure, the curves, inline), with a
  // text sample of the best checkpoint after the prompt.
  const std::string html = testing::read_file(write_run_report((dir / "run").string(), {.sample_tokens = 40}));
  int svgs = 0;
  for (const auto& e : testing::parse_markup(html, {"meta", "br"})) {
    svgs += e.tag == "svg";
    CHECK(!e.attributes.count("src"));
    CHECK(!e.attributes.count("href"));
    CHECK(e.tag != "img");
  }
  CHECK(svgs == 1);
  CHECK_THAT(html, Contains("<h2>Sample</h2>") && Contains("40 characters from best.safetensors") && Contains("<pre>the <b>"));
  CHECK(html.find("No sample") == std::string::npos);

  // The full-attention char-LM (the quick_full baseline): [memory ; block] keys, no slots.
  std::ostringstream full_log;
  testing::run_training(parse_config(testing::read_file(dir / "run" / "config.json"), {"model.attention=full"}),
                        dir / "full", full_log);
  const std::string full = attention_map((dir / "full" / "best.safetensors").string(), {.index = 3}).str();
  testing::parse_markup(full);
  CHECK_THAT(texts_of(full), Contains("Full attention over [memory ; block]") && Contains("memory"));
  fs::remove_all(dir);
}

TEST_CASE("lsf attention on a vision run: drawn over the image for one query patch", "[attention_map][train][vision]") {
  const fs::path dir = fresh_dir("vision");
  // MNIST-layout files of 8×8 images: a bright square whose corner depends on the class.
  for (auto [prefix, n] : {std::pair{"train", 32}, std::pair{"t10k", 8}}) {
    std::string images = test::idx_header({uint32_t(n), 8, 8}), labels = test::idx_header({uint32_t(n)});
    for (int i = 0; i < n; ++i) {
      for (int y = 0; y < 8; ++y)
        for (int x = 0; x < 8; ++x) images.push_back(char(((y < 4) == (i % 2 == 0) && x < 4) ? 200 : 20 + (x * y + i) % 30));
      labels.push_back(char(i % 2));
    }
    test::write_bytes((dir / (std::string(prefix) + "-images-idx3-ubyte")).string(), images);
    test::write_bytes((dir / (std::string(prefix) + "-labels-idx1-ubyte")).string(), labels);
  }
  std::ostringstream log;
  testing::run_training(parse_config(R"({
    "data": {"task": "image", "source": "mnist", "path": ")" + dir.string() + R"(", "image_size": 8,
             "random_resized_crop": false, "hflip": 0, "rand_augment": "", "erasing": 0, "mixup": 0, "cutmix": 0,
             "label_smoothing": 0, "crop_pct": 1.0, "eval_batch_size": 8, "workers": 1, "prefetch": 2},
    "model": {"name": "vil:l1,h2,d16,n1,s1,g1,p2,f2,a0,r2_l2,h2,d32,n1,s0,g0,p2,f2,a0"},
    "schedule": {"name": "constant"},
    "train": {"steps": 4, "batch_size": 8, "eval_every": 4, "log_every": 2, "checkpoint_every": 0, "seed": 5, "threads": 1}
  })"), dir / "run", log);
  const std::string ckpt = (dir / "run" / "best.safetensors").string();
  const std::string svg = attention_map(ckpt, {.split = "dev", .index = 1, .layer = 0, .query = 5}).str();
  testing::parse_markup(svg);
  CHECK_THAT(texts_of(svg), Contains("2-D long-short attention on the 4×4 map") && Contains("window + slots through P") &&
                                Contains("slot 1: ") && Contains("image 1"));
  const std::string full = attention_map(ckpt, {.split = "dev", .index = 1, .layer = 1}).str();
  testing::parse_markup(full);
  CHECK_THAT(texts_of(full), Contains("Full attention on the 2×2 map"));
  CHECK_THROWS_WITH(attention_map(ckpt, {.split = "dev", .layer = 0, .query = 16}),
                    Contains("--query 16 is out of range for this layer's 4×4 patch map (0..15"));
  fs::remove_all(dir);
}
