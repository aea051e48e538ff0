// Small file helpers shared by the data readers and writers: open-or-throw naming the path,
// line reading that accepts both "\n" and "\r\n" ends, field splitting (atomic writes:
// engine/safetensors.h write_file_atomically).
//
// Every error message starts with the calling function's name (`who`) and the path, so a user
// sees e.g. "read_text_tsv: cannot open 'train.tsv': No such file or directory".
#pragma once

#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace lsf::data {

// Throws naming `who` and the path unless `path` exists and is a regular file (after symlinks):
// a directory, a FIFO (a plain open blocks until a writer comes), a device or a socket is
// refused (engine/file_read.h RegularFile, which opens without blocking).
void check_regular_file(const std::string& path, const char* who);

// Opens `path` (checked by check_regular_file) for binary reading; throws naming `who` and the
// path when that fails.
std::ifstream open_input(const std::string& path, const char* who);

// Reads one line without its end ("\n", or "\r\n" as Python's csv.writer writes); false at EOF.
bool read_line(std::istream& in, std::string& line);

// The whole file as bytes; throws naming `who` and the path on failure.
std::string read_file_bytes(const std::string& path, const char* who);

// Splits on every `sep` (empty fields kept): "a\t\tb" → {"a", "", "b"}.
std::vector<std::string_view> split_fields(std::string_view line, char sep);

// "<path>:<line>" as used at the start of every row error.
std::string file_line(const std::string& path, int64_t line);

}  // namespace lsf::data
