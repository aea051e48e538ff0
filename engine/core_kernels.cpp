// The kernel table entries the engine itself needs (fill, strided copy, in-place add, cross-device
// copy; declared in core_kernels.h). Every backend registers its implementations against them.
#include "lsformer/engine/core_kernels.h"

namespace lsf {
LSF_DEFINE_KERNEL(fill_kernel, void(const Tensor& dst, double value));
LSF_DEFINE_KERNEL(copy_kernel, void(const Tensor& dst, const Tensor& src));
LSF_DEFINE_KERNEL(add_inplace_kernel, void(const Tensor& dst, const Tensor& src));
LSF_DEFINE_KERNEL(round_to_kernel, void(const Tensor& dst, const Tensor& src, DType low));
LSF_DEFINE_KERNEL(cross_device_copy_kernel, void(const Tensor& dst, const Tensor& src));
}  // namespace lsf
