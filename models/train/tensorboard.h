// TensorBoard event files: what `lsf train` writes to RUN_DIR/tb/ so that `tensorboard --logdir
// runs` shows every run (scalars, the resolved config as text, histograms of parameters and
// gradients).
//
//   EventWriter tb("runs/quickstart/tb");          // tb/events.out.tfevents.<unix time>.<host>
//   tb.add_text("config", "```json\n...\n```", 0);
//   tb.add_scalar("train/loss", 1.83, 250);
//   tb.add_histogram("parameters/head.weight", values, 500);
//   tb.flush();
//
// The file is a TFRecord stream: each record is
//   uint64 length | uint32 masked CRC-32C of those 8 bytes | length bytes of data | uint32 masked CRC-32C of the data
// (little-endian; crc32c.h), and each record's data is one serialized Event protocol buffer
// (tensorboard_event.proto, compiled with Debian's protoc). The first record holds
// file_version "brain.Event:2". A resumed run's file then holds a SessionLog START at the first
// step it redoes (mark_restart): TensorBoard drops the earlier files' events from that step on,
// so the steps an interrupted run logged after its last checkpoint do not show twice. Scalars
// are Summary.Value.simple_value; histograms HistogramProto with equal-width buckets; text a DT_STRING TensorProto tagged with the "text"
// plugin (TensorBoard renders it as Markdown). Non-finite values are left out of a histogram
// (its `num` counts the finite ones) since TensorBoard cannot place them on an axis.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace lsf::train {

class EventWriter {
 public:
  // Creates `dir` (and parents) and a new event file in it, events.out.tfevents.<unix time>.<host>
  // (with a ".1", ".2", ... suffix when a regular file of that name exists: a run resumed within
  // the second it started in keeps the first file); an error names the path when it cannot be
  // written.
  explicit EventWriter(const std::string& dir);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  const std::string& path() const;
  // The run restarts at `step` (a resumed run: its checkpoint's step + 1): a SessionLog START
  // event, on which TensorBoard discards what earlier files of the directory hold at steps ≥ step.
  void mark_restart(int64_t step);
  void add_scalar(const std::string& tag, double value, int64_t step);
  void add_text(const std::string& tag, const std::string& markdown, int64_t step);
  // `values` summarised in `buckets` (≥ 1) equal-width buckets between their min and max.
  void add_histogram(const std::string& tag, std::span<const float> values, int64_t step, int buckets = 30);
  // Pushes what was written to the file (records are complete on disk after this).
  void flush();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The data of every record of a TFRecord file, in order, after checking each record's framing
// and both CRCs; an error names the file, the record's index and byte offset, and what is wrong
// (a truncated header or body, a length or data checksum mismatch).
std::vector<std::string> read_tfrecords(const std::string& path);

}  // namespace lsf::train
