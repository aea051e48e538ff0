// Regular-file reading with the checks of file_read.h: open non-blocking, fstat, refuse what is
// not a regular file (naming directories as such), cap the size, read with pread.
#include "lsformer/engine/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lsformer/engine/error.h"

namespace lsf {
namespace {
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}
}  // namespace

RegularFile::RegularFile(const std::string& path, const std::string& who) : path_(path), who_(who) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    LSF_FAIL() << who << " '" << path << "': " << (err == ENOENT ? "no such file" : std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    LSF_FAIL() << who << " '" << path << "': stat failed: " << std::strerror(err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    LSF_FAIL() << who << " '" << path << "': it is " << kind_of(st.st_mode) << ", not a regular file";
  }
  size_ = uint64_t(st.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

void RegularFile::read_at(uint64_t offset, void* out, uint64_t n) const {
  LSF_CHECK(offset <= size_ && n <= size_ - offset)
      << who_ << " '" << path_ << "': it holds " << size_ << " bytes; reading " << n << " bytes at byte " << offset
      << " runs past its end (truncated?)";
  char* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, p, n, off_t(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int err = errno;
      LSF_FAIL() << who_ << " '" << path_ << "': read error: " << std::strerror(err);
    }
    LSF_CHECK(got > 0) << who_ << " '" << path_ << "': it ended at byte " << offset
                       << " while being read (shrunk by another process?)";
    p += got;
    offset += uint64_t(got);
    n -= uint64_t(got);
  }
}

std::string RegularFile::read_all(uint64_t max_bytes) const {
  LSF_CHECK(size_ <= max_bytes) << who_ << " '" << path_ << "': it holds " << size_ << " bytes, more than the "
                                << max_bytes << "-byte limit for this kind of file";
  std::string bytes(size_, '\0');
  read_at(0, bytes.data(), size_);
  return bytes;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& who) {
  return RegularFile(path, who).read_all(max_bytes);
}

}  // namespace lsf
