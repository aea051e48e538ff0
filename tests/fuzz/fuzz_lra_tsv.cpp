// libFuzzer harness: the LRA TSV readers (data/listops.h, data/text.h, data/retrieval.h); the
// first byte picks the reader, the rest is the file.
#include "fuzz_common.h"
#include "lsformer/data/listops.h"
#include "lsformer/data/retrieval.h"
#include "lsformer/data/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string& path = lsf::fuzz::as_file(data + 1, size - 1, ".tsv");
  lsf::fuzz::expect_only_lsf_errors([&] {
    switch (data[0] % 3) {
      case 0: lsf::data::read_listops_tsv(path); break;
      case 1: lsf::data::read_text_tsv(path, 64); break;
      default: lsf::data::read_retrieval_tsv(path, 64); break;
    }
  });
  return 0;
}
