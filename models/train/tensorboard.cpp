// TensorBoard event files (see tensorboard.h): the TFRecord framing and the Event messages.
#include "lsformer/models/train/tensorboard.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "lsformer/engine/error.h"
#include "lsformer/models/train/crc32c.h"
#include "tensorboard_event.pb.h"

namespace lsf::train {
namespace {

namespace fs = std::filesystem;

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// The 8 little-endian bytes of v (the platforms we build for are little-endian; written
// byte by byte so the file is right on any).
std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xFFu);
  return s;
}
std::string le32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xFFu);
  return s;
}
uint64_t read_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

struct EventWriter::Impl {
  std::string path;
  std::ofstream out;

  // Why the last stream operation failed (errno is cleared before each).
  static const char* reason() { return errno ? std::strerror(errno) : "unknown error"; }

  void write_record(const std::string& data) {
    const std::string length = le64(data.size());
    errno = 0;
    out << length << le32(mask_crc32c(crc32c(length))) << data << le32(mask_crc32c(crc32c(data)));
    LSF_CHECK(out) << "cannot write TensorBoard event file '" << path << "': " << reason();
  }
  void write_event(const tb::Event& event) {
    std::string data;
    LSF_CHECK(event.SerializeToString(&data)) << "internal: an Event for '" << path << "' did not serialize";
    write_record(data);
  }
  // An Event at `step` holding one summary value, which `fill` sets up.
  template <typename Fill>
  void write_value(const std::string& tag, int64_t step, Fill fill) {
    tb::Event event;
    event.set_wall_time(unix_seconds());
    event.set_step(step);
    tb::Summary::Value* value = event.mutable_summary()->add_value();
    value->set_tag(tag);
    fill(*value);
    write_event(event);
  }
};

EventWriter::EventWriter(const std::string& dir) : impl_(std::make_unique<Impl>()) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  LSF_CHECK(!ec) << "cannot create TensorBoard directory '" << dir << "': " << ec.message();
  const double now = unix_seconds();
  const std::string base =
      (fs::path(dir) / ("events.out.tfevents." + std::to_string(int64_t(now)) + "." + host_name())).string();
  // Never truncate an existing event file: a run resumed within the second it started in would
  // lose the first run's events. TensorBoard reads a directory's files in name order, which the
  // suffix keeps. (Only regular files are stepped over: a name taken by anything else is opened,
  // and fails by name if it cannot be written.)
  impl_->path = base;
  for (int suffix = 1; fs::is_regular_file(impl_->path, ec); ++suffix) impl_->path = base + "." + std::to_string(suffix);
  errno = 0;
  impl_->out.open(impl_->path, std::ios::binary | std::ios::trunc);
  LSF_CHECK(impl_->out) << "cannot create TensorBoard event file '" << impl_->path << "': " << Impl::reason();
  tb::Event version;
  version.set_wall_time(now);
  version.set_file_version("brain.Event:2");
  impl_->write_event(version);
  flush();
}

EventWriter::~EventWriter() = default;

const std::string& EventWriter::path() const { return impl_->path; }

void EventWriter::mark_restart(int64_t step) {
  tb::Event event;
  event.set_wall_time(unix_seconds());
  event.set_step(step);
  event.mutable_session_log()->set_status(tb::SessionLog::START);
  impl_->write_event(event);
}

void EventWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  impl_->write_value(tag, step, [&](tb::Summary::Value& v) { v.set_simple_value(float(value)); });
}

void EventWriter::add_text(const std::string& tag, const std::string& markdown, int64_t step) {
  impl_->write_value(tag, step, [&](tb::Summary::Value& v) {
    v.mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
    tb::TensorProto* t = v.mutable_tensor();
    t->set_dtype(tb::DT_STRING);
    t->mutable_tensor_shape();  // present and empty: a scalar string
    t->add_string_val(markdown);
  });
}

void EventWriter::add_histogram(const std::string& tag, std::span<const float> values, int64_t step, int buckets) {
  LSF_CHECK(buckets >= 1) << "add_histogram('" << tag << "'): buckets must be ≥ 1, got " << buckets;
  double lo = INFINITY, hi = -INFINITY, sum = 0.0, sum_squares = 0.0;
  int64_t n = 0;
  for (float f : values) {
    if (!std::isfinite(f)) continue;
    const double x = f;
    lo = std::min(lo, x), hi = std::max(hi, x);
    sum += x, sum_squares += x * x;
    ++n;
  }
  impl_->write_value(tag, step, [&](tb::Summary::Value& v) {
    tb::HistogramProto* h = v.mutable_histo();
    h->set_num(double(n));
    if (n == 0) return;  // an empty histogram: num 0, no buckets
    h->set_min(lo), h->set_max(hi), h->set_sum(sum), h->set_sum_squares(sum_squares);
    // Equal-width buckets over [lo, hi]; one bucket when every value is the same.
    const int k = hi > lo ? int(std::min<int64_t>(buckets, n)) : 1;
    const double width = (hi - lo) / k;
    std::vector<double> counts(size_t(k), 0.0);
    for (float f : values) {
      if (!std::isfinite(f)) continue;
      const int b = width > 0 ? int((double(f) - lo) / width) : 0;
      counts[size_t(std::clamp(b, 0, k - 1))] += 1.0;
    }
    for (int b = 0; b < k; ++b) {
      h->add_bucket_limit(b == k - 1 ? hi : lo + width * (b + 1));
      h->add_bucket(counts[size_t(b)]);
    }
  });
}

void EventWriter::flush() {
  errno = 0;
  impl_->out.flush();
  LSF_CHECK(impl_->out) << "cannot write TensorBoard event file '" << impl_->path << "': " << Impl::reason();
}

std::vector<std::string> read_tfrecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LSF_CHECK(in) << "cannot read TFRecord file '" << path << "'";
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t index = records.size();
    LSF_CHECK(bytes.size() - at >= 12) << "'" << path << "': record " << index << " at byte " << at
                                       << " is truncated (" << bytes.size() - at << " bytes left, a header needs 12)";
    const uint64_t length = read_le(p + at, 8);
    const uint32_t length_crc = uint32_t(read_le(p + at + 8, 4));
    LSF_CHECK(unmask_crc32c(length_crc) == crc32c(p + at, 8))
        << "'" << path << "': record " << index << " at byte " << at << ": the length's checksum does not match";
    LSF_CHECK(length <= bytes.size() - at - 12 && bytes.size() - at - 12 - length >= 4)
        << "'" << path << "': record " << index << " at byte " << at << " is truncated (length " << length << ", "
        << bytes.size() - at - 12 << " bytes left)";
    std::string data = bytes.substr(at + 12, size_t(length));
    const uint32_t data_crc = uint32_t(read_le(p + at + 12 + length, 4));
    LSF_CHECK(unmask_crc32c(data_crc) == crc32c(data))
        << "'" << path << "': record " << index << " at byte " << at << ": the data's checksum does not match";
    records.push_back(std::move(data));
    at += 12 + size_t(length) + 4;
  }
  return records;
}

}  // namespace lsf::train
