// GCIDE from Debian's dict-gcide package as a char-LM corpus (data/debian_corpus.h).
#include "lsformer/data/debian_corpus.h"

#include <filesystem>
#include <system_error>

#include "lsformer/data/compressed_file.h"
#include "lsformer/data/file_util.h"
#include "lsformer/engine/error.h"

namespace lsf::data {

std::string read_dictd_text(const std::string& path) {
  const bool compressed = path.size() >= 3 && path.compare(path.size() - 3, 3, ".dz") == 0;
  return compressed ? read_gzip_file(path, "read_dictd_text") : read_file_bytes(path, "read_dictd_text");
}

CharCorpus read_gcide_corpus(const std::string& path) {
  const std::string text = read_dictd_text(path);
  return split_corpus("gcide", text, fractional_split_sizes(int64_t(text.size()), path), CharAlphabet::kBytes, path);
}

std::string find_gcide(const std::vector<std::string>& candidates) {
  std::string tried;
  for (const std::string& path : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) return path;
    tried += (tried.empty() ? "" : ", ") + path;
  }
  LSF_FAIL() << "the offline corpus needs Debian's dict-gcide package, which is not installed (looked for "
             << tried << "): run scripts/install-deps.sh (or: apt-get install dict-gcide)";
}

CharCorpus default_offline_corpus() { return read_gcide_corpus(find_gcide()); }

}  // namespace lsf::data
