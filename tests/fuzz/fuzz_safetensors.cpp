// libFuzzer harness: the safetensors parser (engine/safetensors.h) on arbitrary bytes.
#include "fuzz_common.h"
#include "lsformer/engine/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lsf::fuzz::expect_only_lsf_errors([&] {
    lsf::parse_safetensors(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  });
  return 0;
}
