// Small file helpers shared by the data readers and writers (see data/file_util.h).
#include "lsformer/data/file_util.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "lsformer/engine/error.h"
#include "lsformer/engine/file_read.h"

namespace lsf::data {

void check_regular_file(const std::string& path, const char* who) {
  std::error_code ec;
  LSF_CHECK(std::filesystem::exists(path, ec)) << who << ": file '" << path << "' does not exist";
  LSF_CHECK(!std::filesystem::is_directory(path, ec)) << who << ": '" << path << "' is a directory, expected a file";
  RegularFile(path, std::string(who) + ":");  // opens without blocking; names a FIFO, device or socket
}

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
  std::ifstream in = open_input(path, who);
  std::string bytes;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  LSF_CHECK(size >= 0) << who << ": cannot determine the size of '" << path << "'";
  bytes.resize(size_t(size));
  in.seekg(0, std::ios::beg);
  in.read(bytes.data(), size);
  LSF_CHECK(in.gcount() == size) << who << ": short read from '" << path << "' (" << in.gcount()
                                 << " of " << size << " bytes)";
  return bytes;
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
