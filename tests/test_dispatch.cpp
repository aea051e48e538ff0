// Every kernel declared in the library is implemented on every built backend, or that backend
// says explicitly that it does not support it.
#include "helpers.h"
#include "lsformer/engine/dispatch.h"

using namespace lsf;

TEST_CASE("every kernel is implemented or marked unsupported on every built backend", "[dispatch]") {
  REQUIRE_FALSE(all_kernels().empty());
  bool cuda_built = false;
  for (KernelBase* k : all_kernels()) cuda_built = cuda_built || k->implemented(DeviceType::CUDA);
  std::vector<DeviceType> backends = {DeviceType::CPU};
  if (cuda_built) backends.push_back(DeviceType::CUDA);
  for (KernelBase* k : all_kernels()) {
    for (DeviceType t : backends) {
      INFO("kernel " << k->name() << " on " << device_type_name(t));
      CHECK((k->implemented(t) || k->marked_unsupported(t)));
    }
  }
}
