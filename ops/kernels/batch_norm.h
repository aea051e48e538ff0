// Internal (not installed): the kernel table entries of batch_norm (ops/batch_norm.h).
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/batch_norm.h"

namespace lsf {

// x [N, C, S] contiguous → y [N, C, S] (overwritten), mean [C] and invstd [C] (overwritten; the
// statistics used, which the backward reuses) and, when `training`, var [C] (the biased batch
// variance; overwritten). Eval (!training): mean and invstd from running_mean / running_var [C].
// weight / bias [C] contiguous or undefined (1 / 0).
LSF_DECLARE_KERNEL(batch_norm_forward_kernel,
                   void(const Tensor& y, const Tensor& mean, const Tensor& invstd, const Tensor& var, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                        const Tensor& running_var, bool training, double eps));

// Gradients (each overwritten; undefined ones are not computed): dx [N, C, S], dweight [C],
// dbias [C], from dy and x [N, C, S] (contiguous), mean and invstd [C], weight [C] or undefined.
LSF_DECLARE_KERNEL(batch_norm_backward_kernel,
                   void(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x,
                        const Tensor& mean, const Tensor& invstd, const Tensor& weight, bool training));

}  // namespace lsf
