// libFuzzer harness: PNG and JPEG decoding (data/image_decode.h) from memory; the first byte
// picks the decoder (sniffed, PNG, JPEG) and the channel count asked for (1 or 3).
#include "fuzz_common.h"
#include "lsformer/data/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int64_t channels = (data[0] & 4) ? 3 : 1;
  lsf::fuzz::expect_only_lsf_errors([&] {
    switch (data[0] % 3) {
      case 0: lsf::data::decode_image(data + 1, size - 1, "fuzz", channels); break;
      case 1: lsf::data::decode_png(data + 1, size - 1, "fuzz", channels); break;
      default: lsf::data::decode_jpeg(data + 1, size - 1, "fuzz", channels); break;
    }
  });
  return 0;
}
