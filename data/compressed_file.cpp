// zip entries through libzip and gzip files through zlib (data/compressed_file.h).
#include "lsformer/data/compressed_file.h"

#include <zip.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <sstream>
#include <system_error>

#include "lsformer/data/file_util.h"
#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {

std::string zip_error_text(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

// An archive opened read-only, discarded (never rewritten) when it goes out of scope.
struct ZipReader {
  zip_t* archive = nullptr;
  ZipReader(const std::string& path, const char* who) {
    check_regular_file(path, who);
    int code = 0;
    // No ZIP_CHECKCONS: archives written by other tools may differ harmlessly between local and
    // central headers; the entry's CRC-32, checked on reading, is what guards the bytes.
    archive = zip_open(path.c_str(), ZIP_RDONLY, &code);
    LSF_CHECK(archive != nullptr) << who << ": cannot read '" << path
                                  << "' as a zip archive: " << zip_error_text(code);
  }
  ~ZipReader() { zip_discard(archive); }
  ZipReader(const ZipReader&) = delete;
  ZipReader& operator=(const ZipReader&) = delete;
};

std::vector<std::string> entry_names(zip_t* archive) {
  std::vector<std::string> names;
  const zip_int64_t count = zip_get_num_entries(archive, 0);
  for (zip_int64_t i = 0; i < count; ++i) {
    const char* name = zip_get_name(archive, zip_uint64_t(i), 0);
    names.push_back(name ? name : "");
  }
  return names;
}

}  // namespace

std::vector<std::string> zip_entry_names(const std::string& zip_path, const char* who) {
  ZipReader zip(zip_path, who);
  return entry_names(zip.archive);
}

std::string read_zip_entry(const std::string& zip_path, const std::string& entry, const char* who) {
  ZipReader zip(zip_path, who);
  const zip_int64_t index = zip_name_locate(zip.archive, entry.c_str(), 0);
  if (index < 0) {
    std::ostringstream have;
    for (const std::string& name : entry_names(zip.archive)) have << (have.tellp() > 0 ? ", " : "") << "'" << name << "'";
    LSF_FAIL() << who << ": zip archive '" << zip_path << "' has no entry '" << entry << "' (it holds "
                     << (have.tellp() > 0 ? have.str() : std::string("no entries")) << ")";
  }
  zip_stat_t stat;
  zip_stat_init(&stat);
  LSF_CHECK(zip_stat_index(zip.archive, zip_uint64_t(index), 0, &stat) == 0 && (stat.valid & ZIP_STAT_SIZE))
      << who << ": cannot read the size of entry '" << entry << "' of '" << zip_path
      << "': " << zip_strerror(zip.archive);
  std::unique_ptr<zip_file_t, decltype(&zip_fclose)> file(zip_fopen_index(zip.archive, zip_uint64_t(index), 0),
                                                          &zip_fclose);
  LSF_CHECK(file != nullptr) << who << ": cannot open entry '" << entry << "' of '" << zip_path
                             << "': " << zip_strerror(zip.archive);
  // Grown as the data arrives, at most 16 MiB ahead: the size the directory records is checked
  // against what the entry really holds, never allocated up front (found by fuzzing: a 400-byte
  // archive recording 1.6 GB). Read until libzip reports the end: its CRC-32 check runs when the
  // end of the entry is reached, so stopping at stat.size would skip it.
  std::string bytes;
  zip_uint64_t done = 0;
  while (true) {
    const zip_uint64_t want = std::min<zip_uint64_t>(zip_uint64_t(1) << 24, (done < stat.size ? stat.size - done : 0) + 1);
    if (bytes.size() < done + want) bytes.resize(size_t(done + want));
    const zip_int64_t got = zip_fread(file.get(), bytes.data() + done, want);
    LSF_CHECK(got >= 0) << who << ": entry '" << entry << "' of '" << zip_path
                        << "' is damaged: " << zip_file_strerror(file.get());
    if (got == 0) break;
    LSF_CHECK(done + zip_uint64_t(got) <= stat.size)
        << who << ": entry '" << entry << "' of '" << zip_path << "' holds more than the "
        << stat.size << " bytes its directory records";
    done += zip_uint64_t(got);
  }
  bytes.resize(size_t(done));
  LSF_CHECK(done == stat.size) << who << ": entry '" << entry << "' of '" << zip_path << "' ended after " << done
                               << " of its " << stat.size << " bytes";
  return bytes;
}

std::string read_gzip_file(const std::string& path, const char* who) {
  check_regular_file(path, who);
  gzFile gz = gzopen(path.c_str(), "rb");
  LSF_CHECK(gz != nullptr) << who << ": cannot open '" << path << "'";
  std::unique_ptr<gzFile_s, decltype(&gzclose_r)> guard(gz, &gzclose_r);
  gzbuffer(gz, 1 << 18);
  std::string bytes;
  std::string chunk(size_t(1) << 20, '\0');
  while (true) {
    const int got = gzread(gz, chunk.data(), unsigned(chunk.size()));
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(gz, &code);
      LSF_FAIL() << who << ": cannot decompress '" << path << "' (truncated or damaged gzip data): " << message;
    }
    // zlib passes non-gzip input (an empty file too) through unchanged ("transparent" reading);
    // a corpus reader asked for a .dz file must not mistake arbitrary bytes for its text.
    LSF_CHECK(!gzdirect(gz)) << who << ": '" << path << "' is not gzip-compressed (no gzip header)";
    if (got == 0) break;
    bytes.append(chunk.data(), size_t(got));
  }
  // A stream cut inside a member reads as a clean end of data above; gzclose_r reports it.
  const int closed = gzclose_r(guard.release());
  LSF_CHECK(closed == Z_OK) << who << ": '" << path << "' is truncated or damaged (zlib error " << closed
                            << (closed == Z_BUF_ERROR ? ": the gzip stream ends early" : "") << ")";
  return bytes;
}

void write_zip(const std::string& zip_path, const std::vector<std::pair<std::string, std::string>>& entries,
               const char* who) {
  int code = 0;
  zip_t* archive = zip_open(zip_path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  LSF_CHECK(archive != nullptr) << who << ": cannot create zip archive '" << zip_path
                                << "': " << zip_error_text(code);
  for (const auto& [name, bytes] : entries) {
    // The buffer must stay alive until zip_close, which reads it: `entries` outlives the call.
    zip_source_t* source = zip_source_buffer(archive, bytes.data(), bytes.size(), 0);
    zip_int64_t index = source ? zip_file_add(archive, name.c_str(), source, ZIP_FL_ENC_UTF_8) : -1;
    if (index < 0) {
      const std::string message = zip_strerror(archive);
      if (source) zip_source_free(source);
      zip_discard(archive);
      LSF_FAIL() << who << ": cannot add entry '" << name << "' to '" << zip_path << "': " << message;
    }
    zip_set_file_compression(archive, zip_uint64_t(index), ZIP_CM_DEFLATE, 9);
  }
  if (zip_close(archive) != 0) {
    const std::string message = zip_strerror(archive);
    zip_discard(archive);
    LSF_FAIL() << who << ": cannot write zip archive '" << zip_path << "': " << message;
  }
}

void write_gzip_file(const std::string& path, const std::string& bytes, const char* who) {
  gzFile gz = gzopen(path.c_str(), "wb9");
  LSF_CHECK(gz != nullptr) << who << ": cannot create '" << path << "'";
  size_t done = 0;
  while (done < bytes.size()) {
    const unsigned want = unsigned(std::min<size_t>(bytes.size() - done, size_t(1) << 30));
    const int wrote = gzwrite(gz, bytes.data() + done, want);
    if (wrote <= 0) {
      int code = 0;
      const std::string message = gzerror(gz, &code);
      gzclose_w(gz);
      LSF_FAIL() << who << ": cannot write '" << path << "': " << message;
    }
    done += size_t(wrote);
  }
  LSF_CHECK(gzclose_w(gz) == Z_OK) << who << ": cannot finish writing '" << path << "'";
}

}  // namespace lsf::data
