// Reading whole files out of the two compressed containers the char-LM corpora come in:
//   zip   the Hutter-prize enwik8.zip and text8.zip (one deflated entry each), read with libzip
//   gzip  Debian's dictd databases (*.dict.dz: gzip with dictzip's random-access table in the
//         FEXTRA field, which plain gzip readers skip), read with zlib
//
// Why these libraries: both are Debian's standard, long-maintained implementations. libzip
// (libzip-dev) parses the central directory, handles zip64 and stored/deflated entries and checks
// each entry's CRC-32 when it is read to the end, so a corrupt archive is an error instead of
// silently wrong bytes; a hand-written zip parser over raw zlib would have to redo all of that.
// zlib (zlib1g-dev, already pulled in by libpng) is what libzip itself inflates with, and its
// gz* API reads multi-member gzip and checks the CRC-32 and length of every member.
// CMake finds libzip through pkg-config: Debian's libzip CMake package names the zipcmp / zipmerge
// / ziptool programs, which live in other packages, so find_package(libzip) fails without them.
//
// Every error names the calling function (`who`), the file and what is wrong.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lsf::data {

// The bytes of the entry `entry` of the zip archive `zip_path`. Throws when the file is missing
// or not a zip, when the archive has no such entry (listing the entries it has), or when the
// entry cannot be read back intact (truncated archive, bad CRC).
std::string read_zip_entry(const std::string& zip_path, const std::string& entry, const char* who);

// Names of the archive's entries, in central-directory order.
std::vector<std::string> zip_entry_names(const std::string& zip_path, const char* who);

// The decompressed bytes of a gzip file (all members, concatenated). Throws when the file is
// missing, is not gzip (zlib would otherwise pass plain bytes through), is truncated, or fails
// its CRC / length check.
std::string read_gzip_file(const std::string& path, const char* who);

// Writes `entries` (name → bytes, in order) as a zip archive with deflated entries, replacing
// any file at zip_path. The tests build their tiny enwik8.zip with it (the same library that
// reads it, so a fixture needs no zip tool).
void write_zip(const std::string& zip_path, const std::vector<std::pair<std::string, std::string>>& entries,
               const char* who);

// Writes `bytes` gzip-compressed to `path` (one member, no dictzip table). Used by the tests to
// build a small dictd-style *.dict.dz.
void write_gzip_file(const std::string& path, const std::string& bytes, const char* who);

}  // namespace lsf::data
