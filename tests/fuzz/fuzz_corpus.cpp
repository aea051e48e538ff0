// libFuzzer harness: the char-LM corpora (data/char_corpus.h, data/compressed_file.h,
// data/debian_corpus.h): enwik8 and text8 (raw, .zip or .gz), any text source, and the dictd
// (.dz) GCIDE reader; the first byte picks the reader, the second the file's kind.
#include "fuzz_common.h"
#include "lsformer/data/char_corpus.h"
#include "lsformer/data/compressed_file.h"
#include "lsformer/data/debian_corpus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const char* suffixes[] = {".txt", ".zip", ".gz", ".dz"};
  const std::string& path = lsf::fuzz::as_file(data + 2, size - 2, suffixes[data[1] % 4]);
  // Splits scaled to the input: the Hutter sizes would reject every small file at once.
  const lsf::data::SplitSizes sizes{.train = int64_t(size) / 2, .dev = int64_t(size) / 4, .test = int64_t(size) / 4};
  lsf::fuzz::expect_only_lsf_errors([&] {
    switch (data[0] % 4) {
      case 0: lsf::data::read_enwik8(path, sizes); break;
      case 1: lsf::data::read_text8(path, sizes); break;
      case 2: lsf::data::read_text_source(path, "fuzz"); break;
      default: lsf::data::read_dictd_text(path); break;
    }
  });
  return 0;
}
