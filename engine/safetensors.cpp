// safetensors reading and writing, exactly as the format defines it (docs/data-formats.md):
// header validation with one clear error per malformation, dtype mapping, alignment-then-name
// ordering, lsformer's CRC-32C checksums in the metadata (written, and verified when present), and
// atomic writes (temporary file, fsync, rename) shared with the trainer through
// write_file_atomically.
#include "lsformer/engine/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "lsformer/engine/autograd.h"
#include "lsformer/engine/core_kernels.h"
#include "lsformer/engine/crc32c.h"
#include "lsformer/engine/file_read.h"

namespace lsf {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; big-endian hosts would need byte swapping");

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference reader's limit

const char* format_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
    case DType::Bool: return "BOOL";
  }
  return "?";
}

DType parse_dtype(const std::string& s, const std::string& name, const std::string& source) {
  for (DType t : {kF32, kF64, kBF16, kF16, kI32, kI64, kU8, kBool})
    if (s == format_name(t)) return t;
  static const std::set<std::string> known = {"I8", "I16", "U16", "U32", "U64", "C64", "F4", "F6_E2M3",
                                              "F6_E3M2", "F8_E5M2", "F8_E4M3", "F8_E8M0",
                                              "F8_E4M3FNUZ", "F8_E5M2FNUZ"};
  LSF_CHECK(!known.count(s)) << source << ": tensor '" << name << "' has dtype " << s
                             << ", which lsformer does not support (supported: F32, F64, BF16, "
                                "F16, I32, I64, U8, BOOL)";
  LSF_FAIL() << source << ": tensor '" << name << "' has unknown dtype '" << s << "'";
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

std::string hex32(uint32_t v) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", v);
  return text;
}

// The CRC-32C of the header's content in a canonical form, the same whether computed from what
// is about to be written or from what was parsed: every metadata entry but the checksums' own
// (by key), then every tensor's name, dtype, shape and offsets (by name), NUL-separated.
uint32_t header_crc(const Metadata& metadata, std::vector<Entry> entries) {
  std::string canon;
  for (const auto& [k, v] : metadata) {
    if (k == kSafetensorsChecksumKey) continue;
    canon.append("m").append(1, '\0').append(k).append(1, '\0').append(v).append(1, '\0');
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  for (const Entry& e : entries) {
    canon.append("t").append(1, '\0').append(e.name).append(1, '\0').append(format_name(e.dtype)).append(1, '\0');
    for (int64_t d : e.shape) canon.append(std::to_string(d)).append(",");
    canon.append(1, '\0').append(std::to_string(e.begin)).append(1, '\0').append(std::to_string(e.end)).append(1, '\0');
  }
  return crc32c(canon);
}

// Checks the file's checksums (the kSafetensorsChecksumKey entry, when present) against the
// parsed header and the data buffer: a changed byte anywhere in the header's content or in a
// tensor is an error naming what changed, instead of a silently different model.
void verify_checksums(const Metadata& metadata, const std::vector<Entry>& entries, const char* data,
                      const std::string& source) {
  auto found = metadata.find(kSafetensorsChecksumKey);
  if (found == metadata.end()) return;  // written by another tool, or without checksums
  nlohmann::json sums;
  try {
    sums = nlohmann::json::parse(found->second);
  } catch (const nlohmann::json::exception&) {
    LSF_FAIL() << source << ": the checksum entry '" << kSafetensorsChecksumKey << "' is not valid JSON (corrupt file?)";
  }
  LSF_CHECK(sums.is_object() && sums.contains("header") && sums["header"].is_string() && sums.contains("tensors") &&
            sums["tensors"].is_object())
      << source << ": the checksum entry '" << kSafetensorsChecksumKey << "' is malformed (corrupt file?)";
  const std::string stored_header = sums["header"].get<std::string>();
  const std::string computed_header = hex32(header_crc(metadata, entries));
  LSF_CHECK(stored_header == computed_header)
      << source << ": the header's CRC-32C is " << computed_header << ", but " << stored_header
      << " was recorded when the file was written: a name, shape, dtype, offset or metadata value changed since "
         "(the file is corrupt)";
  const nlohmann::json& tensors = sums["tensors"];
  LSF_CHECK(tensors.size() == entries.size())
      << source << ": the checksum entry lists " << tensors.size() << " tensors, the header " << entries.size()
      << " (corrupt file?)";
  for (const Entry& e : entries) {
    auto it = tensors.find(e.name);
    LSF_CHECK(it != tensors.end() && it->is_string())
        << source << ": tensor '" << e.name << "' has no checksum (corrupt file?)";
    const std::string computed = hex32(crc32c(data + e.begin, e.end - e.begin));
    LSF_CHECK(it->get<std::string>() == computed)
        << source << ": tensor '" << e.name << "' fails its CRC-32C check (" << computed << ", recorded "
        << it->get<std::string>() << "): its bytes changed after the file was written (the file is corrupt)";
  }
}

}  // namespace

std::string serialize_safetensors(const NamedTensors& tensors, const Metadata& metadata, bool checksums) {
  NoGradGuard no_grad;
  LSF_CHECK(!metadata.count(kSafetensorsChecksumKey))
      << "save_safetensors: the metadata key '" << kSafetensorsChecksumKey << "' is reserved for the file's checksums";
  std::set<std::string> seen;
  std::vector<std::pair<std::string, Tensor>> items;
  for (const auto& [name, t] : tensors) {
    LSF_CHECK(!name.empty()) << "save_safetensors: empty tensor name";
    LSF_CHECK(name != "__metadata__") << "save_safetensors: '__metadata__' is reserved, not a tensor name";
    LSF_CHECK(seen.insert(name).second) << "save_safetensors: duplicate tensor name '" << name << "'";
    LSF_CHECK(t.defined()) << "save_safetensors: tensor '" << name << "' is undefined";
    items.emplace_back(name, t.to(kCPU).contiguous());
  }
  // Descending alignment, then name: each tensor starts at a multiple of its element size.
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    size_t sa = dtype_size(a.second.dtype()), sb = dtype_size(b.second.dtype());
    return sa != sb ? sa > sb : a.first < b.first;
  });
  std::vector<Entry> entries;
  uint64_t offset = 0;
  for (const auto& [name, t] : items) {
    entries.push_back({name, t.dtype(), t.shape(), offset, offset + uint64_t(t.nbytes())});
    offset += t.nbytes();
  }
  Metadata meta = metadata;
  if (checksums) {
    nlohmann::ordered_json sums = nlohmann::ordered_json::object();
    sums["header"] = hex32(header_crc(metadata, entries));
    nlohmann::ordered_json per_tensor = nlohmann::ordered_json::object();
    for (const auto& [name, t] : items) per_tensor[name] = hex32(crc32c(t.raw_data(), t.nbytes()));
    sums["tensors"] = per_tensor;
    meta[kSafetensorsChecksumKey] = sums.dump();
  }
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!meta.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : meta) m[k] = v;
    header["__metadata__"] = m;
  }
  for (const Entry& e : entries)
    header[e.name] = {{"dtype", format_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // the data buffer starts 8-byte aligned
  std::string out(8, '\0');
  uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  out += json;
  out.reserve(out.size() + offset);
  for (const auto& [name, t] : items) out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  return out;
}

SafetensorsContents parse_safetensors(const std::string& bytes, const std::string& source) {
  LSF_CHECK(bytes.size() >= 8) << source << ": truncated safetensors file (" << bytes.size()
                               << " bytes, shorter than the 8-byte header length)";
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  LSF_CHECK(n <= kMaxHeaderBytes) << source << ": header length " << n << " exceeds the "
                                  << kMaxHeaderBytes << "-byte limit (not a safetensors file?)";
  LSF_CHECK(8 + n <= bytes.size()) << source << ": header length " << n << " runs past the end of the "
                                   << bytes.size() << "-byte file (truncated?)";
  const std::string header_text = bytes.substr(8, n);
  LSF_CHECK(!header_text.empty() && header_text[0] == '{')
      << source << ": the JSON header must start with '{'";

  // Parse, refusing duplicate keys in the top-level object (nlohmann would keep the last).
  std::set<std::string> keys;
  std::string duplicate;
  auto track = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && !keys.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text, track);
  } catch (const nlohmann::json::exception& e) {
    LSF_FAIL() << source << ": the header is not valid JSON (" << e.what() << ")";
  }
  LSF_CHECK(duplicate.empty()) << source << ": duplicate entry '" << duplicate << "' in the header";
  LSF_CHECK(header.is_object()) << source << ": the header must be a JSON object";

  SafetensorsContents out;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      LSF_CHECK(v.is_object()) << source << ": __metadata__ must be an object of strings";
      for (auto m = v.begin(); m != v.end(); ++m) {
        LSF_CHECK(m.value().is_string()) << source << ": __metadata__ value for '" << m.key()
                                         << "' is not a string";
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    LSF_CHECK(v.is_object()) << source << ": entry '" << name << "' is not an object";
    for (auto f = v.begin(); f != v.end(); ++f)
      LSF_CHECK(f.key() == "dtype" || f.key() == "shape" || f.key() == "data_offsets")
          << source << ": entry '" << name << "' has unknown field '" << f.key() << "'";
    LSF_CHECK(v.contains("dtype") && v["dtype"].is_string())
        << source << ": entry '" << name << "' has no string 'dtype'";
    LSF_CHECK(v.contains("shape") && v["shape"].is_array())
        << source << ": entry '" << name << "' has no 'shape' array";
    LSF_CHECK(v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2)
        << source << ": entry '" << name << "' needs 'data_offsets': [begin, end]";
    Entry e;
    e.name = name;
    e.dtype = parse_dtype(v["dtype"].get<std::string>(), name, source);
    for (const auto& d : v["shape"]) {
      LSF_CHECK(d.is_number_unsigned()) << source << ": entry '" << name
                                        << "' has a shape entry that is not a non-negative integer";
      const uint64_t s = d.get<uint64_t>();
      LSF_CHECK(s <= uint64_t(INT64_MAX)) << source << ": entry '" << name << "' has dimension " << s
                                          << ", beyond the 64-bit signed range of a shape";
      e.shape.push_back(int64_t(s));
    }
    // Checked against overflow and the one-tensor limit (F32 [2^31, 2^31] is 2^64 bytes, which
    // an unchecked product would wrap to 0 and accept with an empty buffer).
    const uint64_t nbytes = checked_nbytes(e.shape, e.dtype, source + ": entry '" + name + "'");
    for (const auto& o : v["data_offsets"])
      LSF_CHECK(o.is_number_unsigned()) << source << ": entry '" << name
                                        << "' has data_offsets that are not non-negative integers";
    e.begin = v["data_offsets"][0].get<uint64_t>();
    e.end = v["data_offsets"][1].get<uint64_t>();
    LSF_CHECK(e.begin <= e.end) << source << ": entry '" << name << "' has data_offsets [" << e.begin
                                << ", " << e.end << "] with begin after end";
    LSF_CHECK(e.end - e.begin == nbytes)
        << source << ": entry '" << name << "' spans " << e.end - e.begin << " bytes, but shape "
        << e.shape << " of " << v["dtype"].get<std::string>() << " needs " << nbytes;
    entries.push_back(std::move(e));
  }

  // The tensors must tile the buffer exactly: no gaps, no overlaps, nothing after the last.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const uint64_t buffer_size = bytes.size() - 8 - n;
  uint64_t expected = 0;
  for (const Entry& e : entries) {
    LSF_CHECK(e.begin == expected) << source << ": entry '" << e.name << "' starts at byte " << e.begin
                                   << " of the data buffer, expected " << expected
                                   << " (tensors must tile the buffer without gaps or overlaps)";
    expected = e.end;
  }
  LSF_CHECK(expected == buffer_size) << source << ": the tensors cover " << expected
                                     << " bytes but the data buffer holds " << buffer_size
                                     << (expected > buffer_size ? " (truncated file?)" : " (trailing bytes)");
  const char* data = bytes.data() + 8 + n;
  verify_checksums(out.metadata, entries, data, source);
  out.metadata.erase(kSafetensorsChecksumKey);  // the file's own, not the caller's
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, TensorOptions(e.dtype));
    if (e.end > e.begin) std::memcpy(t.raw_data(), data + e.begin, e.end - e.begin);
    if (e.dtype == kBool) {
      const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
      for (int64_t i = 0; i < t.numel(); ++i)
        LSF_CHECK(p[i] <= 1) << source << ": BOOL tensor '" << e.name << "' holds byte " << int(p[i])
                             << " at element " << i << " (only 0 and 1 are valid)";
    }
    out.tensors.emplace(e.name, t);
  }
  return out;
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  LSF_CHECK(fs::is_directory(dir)) << "cannot write '" << path << "': directory '" << dir.string() << "' does not exist";
  std::string tmp_name = ".";  // built with append: GCC 12 warns falsely on chained operator+
  tmp_name.append(target.filename().string()).append(".tmp.").append(std::to_string(::getpid()));
  const std::string tmp = (dir / tmp_name).string();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    LSF_CHECK(out.is_open()) << "cannot create '" << tmp << "' (writing '" << path << "'): " << std::strerror(errno);
    errno = 0;  // a failed write leaves its reason (ENOSPC, EIO, EROFS, ...) here
    try {
      write(out);
    } catch (...) {
      out.close();
      ::unlink(tmp.c_str());
      throw;
    }
    out.close();
    if (!out) {
      const int err = errno;
      ::unlink(tmp.c_str());
      LSF_FAIL() << "writing '" << path << "' failed (its temporary '" << tmp
                 << "' is removed; the previous file, if any, is intact): " << (err ? std::strerror(err) : "unknown error");
    }
  }
  // The data must be on disk before the rename makes it the file's content.
  int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    LSF_FAIL() << "flushing '" << tmp << "' failed: " << std::strerror(err);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    LSF_FAIL() << "renaming '" << tmp << "' to '" << path << "' failed: " << std::strerror(err);
  }
  // Persist the rename itself.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  write_file_atomically(path, [&](std::ostream& out) { out.write(bytes.data(), std::streamsize(bytes.size())); });
}

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata, bool checksums) {
  write_file_atomically(path, serialize_safetensors(tensors, metadata, checksums));
}

SafetensorsContents load_safetensors(const std::string& path) {
  // Header first: a file that is not safetensors (or a huge unrelated one) is refused after
  // 8 bytes, before its content is read; only regular files are read at all.
  RegularFile file(path, "load_safetensors: cannot read");
  LSF_CHECK(file.size() >= 8) << "load_safetensors: '" << path << "' is truncated (" << file.size()
                              << " bytes, shorter than the 8-byte header length)";
  uint64_t n = 0;
  file.read_at(0, &n, 8);
  LSF_CHECK(n <= kMaxHeaderBytes) << "load_safetensors: '" << path << "': header length " << n << " exceeds the "
                                  << kMaxHeaderBytes << "-byte limit (not a safetensors file?)";
  LSF_CHECK(8 + n <= file.size()) << "load_safetensors: '" << path << "': header length " << n
                                  << " runs past the end of the " << file.size() << "-byte file (truncated?)";
  // The whole file is held in memory once; the tensors' own bytes are capped by
  // checked_nbytes in the parser, so the file's size bounds every allocation.
  return parse_safetensors(file.read_all(kMaxTensorBytes), path);
}

}  // namespace lsf
