// Reading files that come from outside (checkpoints, configs): only regular files are read, so a
// FIFO cannot block the tool, /dev/zero cannot stream forever, and a directory is an error that
// names the path and says it is a directory. Sizes are known (fstat) and capped before anything
// is read.
#pragma once

#include <cstdint>
#include <string>

namespace lsf {

// An open, regular, readable file; closes itself.
class RegularFile {
 public:
  // Opens `path` without blocking (O_NONBLOCK, so a FIFO never waits for a writer) and throws an
  // lsf::Error unless it is a regular file. Every message reads "<who> '<path>': <reason>",
  // e.g. "cannot read config file 'runs/x': it is a directory, not a regular file".
  RegularFile(const std::string& path, const std::string& who);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  uint64_t size() const { return size_; }
  // Reads exactly `n` bytes at byte `offset` into `out`; throws when the file is shorter.
  void read_at(uint64_t offset, void* out, uint64_t n) const;
  // The whole file; throws when it holds more than `max_bytes`.
  std::string read_all(uint64_t max_bytes) const;

 private:
  std::string path_, who_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The content of the regular file `path`, at most `max_bytes` (else an error naming the size);
// `who` as for RegularFile.
std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& who);

}  // namespace lsf
