// safetensors files (the format of HuggingFace's safetensors library), read and written
// exactly as the format defines it:
//   [8-byte little-endian header length N][N bytes of JSON header, space-padded][data buffer]
// The header maps names to {"dtype", "shape", "data_offsets": [begin, end)} (offsets relative
// to the buffer) and may hold "__metadata__" (string → string). Tensors are written in order
// of descending dtype alignment, then name, with N a multiple of 8, so every tensor is
// naturally aligned. Every malformed file is rejected with an lsf::Error saying what is wrong.
// Writes are atomic: a temporary file in the same directory is fsynced and renamed over the
// target, so an interrupted save never destroys the previous file.
#pragma once

#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "lsformer/engine/tensor.h"

namespace lsf {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

struct SafetensorsContents {
  std::map<std::string, Tensor> tensors;  // CPU tensors, by name
  Metadata metadata;                      // "__metadata__", empty when absent
};

// Checksums. With `checksums` (the default) the file's metadata also holds, under this key, a
// JSON object {"header": CRC, "tensors": {NAME: CRC, …}}: the CRC-32C (engine/crc32c.h, 8 hex
// digits) of every tensor's bytes and of the header's content (every other metadata entry and
// every tensor's name, dtype, shape and offsets). Loading verifies them whenever the key is
// present, so a changed byte is an error naming the tensor (or the header) instead of a
// silently different model; files without the key (other tools') load unchecked. Other readers
// see one more metadata string and ignore it. The key is the file's own: it is not returned in
// SafetensorsContents::metadata and cannot be passed in.
inline constexpr const char* kSafetensorsChecksumKey = "lsformer.crc32c";

// Saves tensors (any device; copied to the host) with optional metadata. Names must be unique
// and not "__metadata__"; tensors sharing storage are written as independent copies.
void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {},
                      bool checksums = true);
SafetensorsContents load_safetensors(const std::string& path);
// The same, to and from memory.
std::string serialize_safetensors(const NamedTensors& tensors, const Metadata& metadata = {}, bool checksums = true);
SafetensorsContents parse_safetensors(const std::string& bytes, const std::string& source = "<memory>");

// Writes `bytes` to `path` atomically (temporary file, fsync, rename, fsync of the directory):
// an interrupted write never leaves a half-written file under `path` nor loses the old one.
void write_file_atomically(const std::string& path, const std::string& bytes);
// The same, the content streamed by `write` (for files too large to hold in memory twice). If
// `write` throws, the temporary file is removed and the exception passes on.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace lsf
