// TensorBoard event files (models/train/tensorboard.h): CRC-32C against published vectors, the
// TFRecord framing of every record checked byte by byte here (independently of
// read_tfrecords), the Event protocol buffers parsed back with the generated classes, corrupt
// files named as such, and a short training run's tb/ holding the config text, the scalars of
// metrics.jsonl (and the memory scalars) and the histograms every train.tensorboard_every steps,
// and a resumed run's second file with the restart mark that hides the steps it redoes.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "helpers.h"
#include "run_helpers.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/crc32c.h"
#include "lsformer/models/train/tensorboard.h"
#include "lsformer/models/train/trainer.h"
#include "tensorboard_event.pb.h"

namespace fs = std::filesystem;
using namespace lsf;
using Catch::Contains;

namespace {

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("tb", name); }

uint64_t le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | uint8_t(s[at + size_t(i)]);
  return v;
}

// Every record of a TFRecord file, each one's framing and both masked CRCs checked here.
std::vector<lsf::tb::Event> parse_events(const fs::path& path) {
  const std::string bytes = testing::read_file(path);
  std::vector<lsf::tb::Event> events;
  size_t at = 0;
  while (at < bytes.size()) {
    REQUIRE(bytes.size() - at >= 16);
    const uint64_t length = le(bytes, at, 8);
    CHECK(le(bytes, at + 8, 4) == train::mask_crc32c(train::crc32c(bytes.data() + at, 8)));
    REQUIRE(bytes.size() - at - 16 >= length);
    const std::string data = bytes.substr(at + 12, length);
    CHECK(le(bytes, at + 12 + length, 4) == train::mask_crc32c(train::crc32c(data)));
    lsf::tb::Event e;
    REQUIRE(e.ParseFromString(data));
    events.push_back(e);
    at += 16 + length;
  }
  CHECK(at == bytes.size());
  return events;
}

fs::path only_event_file(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
  REQUIRE(files.size() == 1);
  CHECK(files[0].filename().string().rfind("events.out.tfevents.", 0) == 0);
  return files[0];
}

}  // namespace

TEST_CASE("TFRecord's CRC mask inverts", "[tensorboard]") {
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu}) CHECK(train::unmask_crc32c(train::mask_crc32c(crc)) == crc);
  CHECK(train::mask_crc32c(0xE3069283u) != 0xE3069283u);
}

TEST_CASE("an event file holds framed Events: version, scalars, text and histograms", "[tensorboard]") {
  const fs::path dir = fresh_dir("writer");
  std::string path;
  {
    train::EventWriter w(dir.string());
    path = w.path();
    w.add_scalar("train/loss", 1.25, 10);
    w.add_text("config", "    {\"a\": 1}\n", 0);
    const std::vector<float> values = {-1.0f, 0.0f, 0.5f, 1.0f, 3.0f, NAN};
    w.add_histogram("parameters/w", values, 20, /*buckets=*/4);
    const std::vector<float> same = {2.0f, 2.0f, 2.0f};
    w.add_histogram("parameters/b", same, 20);
    w.add_histogram("gradients/none", std::vector<float>{}, 20);
    w.flush();
  }
  CHECK(only_event_file(dir).string() == path);
  const std::vector<lsf::tb::Event> events = parse_events(path);
  REQUIRE(events.size() == 6);
  CHECK(events[0].file_version() == "brain.Event:2");
  CHECK(events[0].wall_time() > 1.6e9);  // seconds since 1970, after 2020

  const auto& scalar = events[1];
  CHECK(scalar.step() == 10);
  REQUIRE(scalar.summary().value_size() == 1);
  CHECK(scalar.summary().value(0).tag() == "train/loss");
  CHECK(scalar.summary().value(0).simple_value() == 1.25f);

  const auto& text = events[2].summary().value(0);
  CHECK(text.tag() == "config");
  CHECK(text.metadata().plugin_data().plugin_name() == "text");
  CHECK(text.tensor().dtype() == lsf::tb::DT_STRING);
  CHECK(text.tensor().tensor_shape().dim_size() == 0);
  REQUIRE(text.tensor().string_val_size() == 1);
  CHECK(text.tensor().string_val(0) == "    {\"a\": 1}\n");

  // {-1, 0, 0.5, 1, 3} (the NaN left out) in 4 buckets of width 1 over [-1, 3]:
  // (-1..0] ∋ -1 (the first bucket starts at min), 0 lies on the first bucket's edge: its index
  // floor((0 - -1)/1) = 1 puts it in the second, with 0.5; 1 in the third; 3 (= max) in the last.
  const auto& h = events[3].summary().value(0).histo();
  CHECK(events[3].summary().value(0).tag() == "parameters/w");
  CHECK(events[3].step() == 20);
  CHECK(h.num() == 5);
  CHECK(h.min() == -1.0);
  CHECK(h.max() == 3.0);
  CHECK(h.sum() == 3.5);
  CHECK(h.sum_squares() == 1 + 0 + 0.25 + 1 + 9);
  REQUIRE(h.bucket_limit_size() == 4);
  CHECK(std::vector<double>(h.bucket_limit().begin(), h.bucket_limit().end()) == std::vector<double>{0, 1, 2, 3});
  CHECK(std::vector<double>(h.bucket().begin(), h.bucket().end()) == std::vector<double>{1, 2, 1, 1});

  const auto& same = events[4].summary().value(0).histo();  // equal values: one bucket
  CHECK((same.num() == 3 && same.min() == 2 && same.max() == 2 && same.bucket_size() == 1 && same.bucket(0) == 3));
  const auto& empty = events[5].summary().value(0).histo();
  CHECK((empty.num() == 0 && empty.bucket_size() == 0));

  // read_tfrecords agrees with the hand-made reader.
  const std::vector<std::string> records = train::read_tfrecords(path);
  REQUIRE(records.size() == events.size());
  for (size_t i = 0; i < records.size(); ++i) CHECK(records[i] == events[i].SerializeAsString());
  fs::remove_all(dir);
}

TEST_CASE("read_tfrecords names a corrupt or truncated record", "[tensorboard]") {
  const fs::path dir = fresh_dir("corrupt");
  std::string path;
  {
    train::EventWriter w(dir.string());
    path = w.path();
    w.add_scalar("a", 1.0, 1);
  }
  const std::string good = testing::read_file(path);
  const size_t first = 16 + le(good, 0, 8);  // where the second record starts
  auto write = [&](const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  };
  std::string bad = good;
  bad[first + 12] ^= 0x01;  // a data byte of record 1
  write(bad);
  CHECK_THROWS_WITH(train::read_tfrecords(path), Contains("record 1 at byte " + std::to_string(first)) &&
                                                     Contains("the data's checksum does not match"));
  bad = good;
  bad[first] ^= 0x01;  // record 1's length
  write(bad);
  CHECK_THROWS_WITH(train::read_tfrecords(path), Contains("the length's checksum does not match"));
  write(good.substr(0, good.size() - 2));
  CHECK_THROWS_WITH(train::read_tfrecords(path), Contains("record 1") && Contains("is truncated"));
  CHECK_THROWS_WITH(train::read_tfrecords((dir / "missing").string()), Contains("cannot read TFRecord file"));
  fs::remove_all(dir);
}

TEST_CASE("a training run writes tb/: the config, metrics.jsonl's scalars and periodic histograms", "[tensorboard][train]") {
  const fs::path dir = fresh_dir("run");
  std::ostringstream log;
  train::TrainOptions options;
  options.out_dir = dir.string();
  options.log = &log;
  options.out = &log;
  options.progress = 0;
  train::train(train::parse_config(testing::kTinyListopsRun,
                                   {"train.eval_every=6", "train.log_every=3", "train.tensorboard_every=5"}),
               options);
  INFO(log.str());

  std::map<std::string, std::map<int64_t, float>> scalars;  // tag → step → value
  std::map<std::string, std::vector<int64_t>> histograms;     // tag → steps
  std::string config_text;
  for (const auto& e : parse_events(only_event_file(dir / "tb"))) {
    for (const auto& v : e.summary().value()) {
      if (v.has_histo()) histograms[v.tag()].push_back(e.step());
      else if (v.has_tensor()) config_text = v.tensor().string_val(0);
      else scalars[v.tag()][e.step()] = v.simple_value();
    }
  }
  CHECK_THAT(config_text, Contains("\"tensorboard_every\": 5"));

  // Every train line of metrics.jsonl has its scalars (as float32), every dev evaluation too.
  int train_lines = 0, dev_lines = 0;
  std::ifstream in(dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto m = nlohmann::json::parse(line);
    const int64_t step = m.at("step");
    if (m.at("split") == "train") {
      ++train_lines;
      for (const char* key : {"loss", "accuracy", "lr", "samples_per_s", "grad_norm"})
        CHECK(scalars[std::string("train/") + key][step] == float(m.at(key).get<double>()));
      CHECK(m.at("grad_norm").get<double>() > 0);
    } else if (m.at("split") == "dev" && !m.contains("final")) {
      ++dev_lines;
      CHECK(scalars["dev/accuracy"][step] == float(m.at("accuracy").get<double>()));
      CHECK(scalars["dev/loss"][step] == float(m.at("loss").get<double>()));
    } else if (m.at("split") == "test") {
      CHECK(scalars["test/accuracy"][step] == float(m.at("accuracy").get<double>()));
    }
  }
  CHECK(train_lines == 4);  // steps 3, 6, 9, 12
  // Memory with every training log line: the CPU allocator's live and peak bytes (a model's
  // parameters and Adam's moments are live, so > 0; peak ≥ live) and the process's resident set.
  for (const char* tag : {"memory/cpu_current_bytes", "memory/cpu_peak_bytes", "memory/rss_bytes", "memory/rss_peak_bytes"}) {
    INFO(tag);
    CHECK(scalars[tag].size() == 4);
    for (const auto& [step, value] : scalars[tag]) CHECK(value > 0);
  }
  for (const auto& [step, current] : scalars["memory/cpu_current_bytes"]) {
    CHECK(scalars["memory/cpu_peak_bytes"][step] >= current);
    CHECK(scalars["memory/rss_peak_bytes"][step] >= scalars["memory/rss_bytes"][step]);
    CHECK(scalars["memory/rss_bytes"][step] >= current);  // the tensors are part of the resident set
  }
  CHECK(dev_lines == 2);    // steps 6, 12
  CHECK(scalars["train/loss"].size() == 4);
  CHECK(scalars["dev/accuracy"].size() == 2);
  CHECK(scalars.count("dev/correct") == 0);  // counts are not scalars

  // Histograms of every parameter and gradient at steps 5 and 10.
  CHECK(histograms.size() > 4);
  for (const auto& [tag, steps] : histograms) {
    INFO(tag);
    CHECK((tag.rfind("parameters/", 0) == 0 || tag.rfind("gradients/", 0) == 0));
    CHECK(steps == std::vector<int64_t>{5, 10});
  }
  fs::remove_all(dir);
}

namespace {

// What TensorBoard's event accumulator keeps of a run directory's scalars: every value of its
// files in name order, appended (a step logged twice is shown twice), and a SessionLog START at
// step s dropping every value read so far at steps ≥ s. Tag → (step, value) in reading order.
std::map<std::string, std::vector<std::pair<int64_t, float>>> displayed_scalars(const fs::path& tb_dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(tb_dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::map<std::string, std::vector<std::pair<int64_t, float>>> shown;
  for (const fs::path& file : files)
    for (const auto& e : parse_events(file)) {
      if (e.has_session_log() && e.session_log().status() == lsf::tb::SessionLog::START)
        for (auto& [tag, points] : shown) std::erase_if(points, [&](const auto& p) { return p.first >= e.step(); });
      for (const auto& v : e.summary().value())
        if (!v.has_histo() && !v.has_tensor()) shown[v.tag()].emplace_back(e.step(), v.simple_value());
    }
  return shown;
}

}  // namespace

TEST_CASE("a resumed run adds an event file whose restart mark hides the steps it redoes", "[tensorboard][train]") {
  const train::RunConfig config =
      train::parse_config(testing::kTinyListopsRun, {"train.eval_every=0", "train.log_every=3"});
  const fs::path dir = fresh_dir("resumed");
  std::ostringstream log;
  // Stopped at step 6; resumed up to step 9; then, as if it had crashed there before saving, the
  // step-6 checkpoint is put back and the run resumed again to the end: steps 7–9 are redone.
  testing::run_training(config, dir, log, /*resume=*/false, /*stop_after=*/6);
  fs::copy_file(dir / "last.safetensors", dir / "step6.safetensors");
  testing::run_training(config, dir, log, /*resume=*/true, /*stop_after=*/9);
  fs::copy_file(dir / "step6.safetensors", dir / "last.safetensors", fs::copy_options::overwrite_existing);
  CHECK(testing::run_training(config, dir, log, /*resume=*/true).finished);
  INFO(log.str());

  // Three files, none overwritten although the runs started within the same second or two.
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir / "tb")) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() == 3);
  // The first file has no restart mark; each resumed one has it right after its version record,
  // at its checkpoint's step + 1.
  const std::vector<int64_t> restarts = {-1, 7, 7};
  for (size_t f = 0; f < files.size(); ++f) {
    INFO(files[f]);
    const std::vector<lsf::tb::Event> events = parse_events(files[f]);
    REQUIRE(events.size() >= 2);
    CHECK(events[0].file_version() == "brain.Event:2");
    int marks = 0;
    for (const auto& e : events) marks += e.has_session_log();
    CHECK(marks == (restarts[f] < 0 ? 0 : 1));
    if (restarts[f] >= 0) {
      CHECK(events[1].session_log().status() == lsf::tb::SessionLog::START);
      CHECK(events[1].step() == restarts[f]);
    }
  }
  // The second file logged step 9 of the abandoned attempt (without the third file's mark it
  // would show twice); what TensorBoard shows is each logged step once, in order, with
  // metrics.jsonl's values (whose abandoned line the last resume dropped).
  std::vector<std::pair<int64_t, float>> expected;
  std::vector<int64_t> steps;
  std::ifstream in(dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto m = nlohmann::json::parse(line);
    if (m.at("split") != "train") continue;
    expected.emplace_back(m.at("step").get<int64_t>(), float(m.at("loss").get<double>()));
    steps.push_back(expected.back().first);
  }
  CHECK(steps == std::vector<int64_t>{3, 6, 9, 12});
  CHECK(displayed_scalars(dir / "tb").at("train/loss") == expected);
  fs::remove_all(dir);
}
