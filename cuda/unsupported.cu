// Kernels deliberately without a CUDA implementation (yet); calling one on a CUDA tensor throws
// an lsf::Error naming kernel and device instead of a "missing kernel" surprise.
//   - conv2d forward/backward: a GPU convolution belongs on cuDNN, which lsformer does not
//     wrap yet (conv2d only serves the small image front-ends; run them on the CPU).
//   - batch norm and 2-D pooling (avg, max, adaptive avg): they serve the small CNN baseline and
//     CvT's convolutional projections, which run on the CPU with conv2d until cuDNN is wrapped.
//   - the causal long-short attention kernels: only the bidirectional op has fused GPU kernels
//     so far (cuda/long_short.cu); a causal layer runs on a GPU through its composed path
//     (set_fused(false)).
//   - masked softmax: on a GPU, masked_softmax (ops/softmax.h) runs its composition of
//     masked_fill and the CUDA softmax kernels.
//   - bias_gelu: on a GPU it runs its composition gelu(add(x, bias)) (ops/unary.h).
//   - linear's fused bias: on a GPU linear runs add(matmul(x, weight.t()), bias) (ops/matmul.h).
//   - linears' grouped products: on a GPU each layer runs linear's products (ops/matmul.h).
//   - round_to (autocast's rounding in f32, engine/core_kernels.h): on a GPU autocast makes real
//     16-bit tensors (to(kBF16)), so nothing calls it there.
#include "lsformer/engine/core_kernels.h"
#include "lsformer/engine/device.h"
#include "lsformer/ops/batch_norm.h"
#include "lsformer/ops/kernels/batch_norm.h"
#include "lsformer/ops/causal_long_short.h"
#include "lsformer/ops/kernels/causal_long_short.h"
#include "lsformer/ops/conv.h"
#include "lsformer/ops/kernels/conv.h"
#include "lsformer/ops/kernels/matmul.h"
#include "lsformer/ops/pool.h"
#include "lsformer/ops/kernels/pool.h"
#include "lsformer/ops/kernels/softmax.h"
#include "lsformer/ops/kernels/unary.h"

namespace lsf::cuda {

LSF_MARK_UNSUPPORTED(round_to_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(conv2d_forward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(conv2d_backward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(batch_norm_forward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(batch_norm_backward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(avg_pool2d_forward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(avg_pool2d_backward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(max_pool2d_forward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(max_pool2d_backward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(adaptive_avg_pool2d_forward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(adaptive_avg_pool2d_backward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(causal_long_short_forward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(causal_long_short_backward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(masked_softmax_forward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(bias_gelu_forward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(bias_gelu_backward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(linear_forward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(linear_weight_grad_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(linears_forward_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(linears_input_grad_kernel, DeviceType::CUDA);
LSF_MARK_UNSUPPORTED(linears_weight_grad_kernel, DeviceType::CUDA);

}  // namespace lsf::cuda
