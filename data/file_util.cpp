// Small file helpers shared by the data readers and writers (see data/file_util.h).
#include "lsformer/data/file_util.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>

#include "lsformer/engine/error.h"
#include "lsformer/engine/file_read.h"

namespace lsf::data {

namespace {
// `path` opened as a regular file (engine/file_read.h: without blocking; a FIFO, device or socket
// is named as such), after the data readers' own wording for a missing file or a directory.
RegularFile open_regular_file(const std::string& path, const char* who) {
  std::error_code ec;
  LSF_CHECK(std::filesystem::exists(path, ec)) << who << ": file '" << path << "' does not exist";
  LSF_CHECK(!std::filesystem::is_directory(path, ec)) << who << ": '" << path << "' is a directory, expected a file";
  return RegularFile(path, std::string(who) + ":");
}
}  // namespace

void check_regular_file(const std::string& path, const char* who) { open_regular_file(path, who); }

std::ifstream open_input(const std::string& path, const char* who) {
  check_regular_file(path, who);
  std::ifstream in(path, std::ios::binary);
  LSF_CHECK(in.is_open()) << who << ": cannot open '" << path << "': " << std::strerror(errno);
  return in;
}

bool read_line(std::istream& in, std::string& line) {
  if (!std::getline(in, line)) return false;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

std::string read_file_bytes(const std::string& path, const char* who) {
  return open_regular_file(path, who).read_all(std::numeric_limits<uint64_t>::max());
}

std::vector<std::string_view> split_fields(std::string_view line, char sep) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t end = line.find(sep, start);
    if (end == std::string_view::npos) {
      fields.push_back(line.substr(start));
      return fields;
    }
    fields.push_back(line.substr(start, end - start));
    start = end + 1;
  }
}

std::string file_line(const std::string& path, int64_t line) {
  return path + ":" + std::to_string(line);
}

}  // namespace lsf::data
