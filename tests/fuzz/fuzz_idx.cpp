// libFuzzer harness: the IDX reader (data/idx.h) of MNIST / Fashion-MNIST, plain or gzipped;
// the first byte picks the expected rank (1..4).
#include "fuzz_common.h"
#include "lsformer/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool gz = size > 2 && data[1] == 0x1f && data[2] == 0x8b;
  const std::string& path = lsf::fuzz::as_file(data + 1, size - 1, gz ? ".gz" : ".idx");
  lsf::fuzz::expect_only_lsf_errors([&] { lsf::data::read_idx_u8(path, 1 + data[0] % 4); });
  return 0;
}
