// libFuzzer harness: the CIFAR-10 / CIFAR-100 binary readers (data/cifar.h); the first byte
// picks the format.
#include "fuzz_common.h"
#include "lsformer/data/cifar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string& path = lsf::fuzz::as_file(data + 1, size - 1, ".bin");
  lsf::fuzz::expect_only_lsf_errors([&] {
    if (data[0] % 2 == 0) lsf::data::read_cifar10({path});
    else lsf::data::read_cifar100({path}, data[0] % 4 == 1 ? lsf::data::Cifar100Labels::Fine : lsf::data::Cifar100Labels::Coarse);
  });
  return 0;
}
