// The kernel tables (see dispatch.h): the list of every kernel, and the error that names a kernel
// a device lacks (or that its backend marked unsupported).
#include "lsformer/engine/dispatch.h"

namespace lsf {

std::vector<KernelBase*>& all_kernels() {
  static std::vector<KernelBase*> kernels;
  return kernels;
}

void KernelBase::throw_missing(Device device) const {
  if (unsupported_[int(device.type)]) {
    LSF_FAIL() << name_ << ": not supported on " << device_type_name(device.type)
               << " (move the tensors to a device that supports it)";
  }
  LSF_FAIL() << name_ << ": no kernel for device " << device
             << (device.is_cuda() ? " (this build of lsformer has no CUDA backend, or it lacks this op)"
                                  : "");
}

}  // namespace lsf
