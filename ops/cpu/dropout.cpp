// CPU dropout kernels. One Philox block gives the uniforms of four consecutive elements, so
// the forward loop runs over blocks; every element depends only on (seed, offset, index), so
// the loop parallelises freely and matches the CUDA kernel bit for bit (both take the words and
// the keep rule from engine/philox.h).
#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/dropout.h"
#include "lsformer/ops/kernels/dropout.h"

namespace lsf::cpu {
namespace {

void dropout_forward(const Tensor& y, const Tensor& mask, const Tensor& x, double p, GeneratorState state) {
  const int64_t n = x.numel();
  const int64_t blocks = int64_t(dropout_blocks(x));
  const uint32_t threshold = dropout_keep_threshold(p);
  uint8_t* m = mask.data_ptr<uint8_t>();
  dispatch_float(x.dtype(), "dropout", [&]<typename T>() {
    const T scale = T(1.0 / (1.0 - p));
    const T* in = x.data_ptr<T>();
    T* out = y.data_ptr<T>();
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t block = 0; block < blocks; ++block) {
      const PhiloxCounter words = philox_block(state.seed, state.offset + uint64_t(block));
      const int64_t end = std::min<int64_t>(4, n - 4 * block);
      for (int64_t j = 0; j < end; ++j) {
        const int64_t i = 4 * block + j;
        const bool keep = philox::dropout_keep(words[j], threshold);  // ⇔ uniform_f32_at(state, i) ≥ p
        m[i] = keep;
        out[i] = in[i] * (keep ? scale : T(0));
      }
    }
  });
}

void dropout_backward(const Tensor& dx, const Tensor& dy, const Tensor& mask, double scale) {
  dispatch_float(dy.dtype(), "dropout_backward", [&]<typename T>() {
    const T s = T(scale);
    map<T, T, uint8_t>(dx, [s](T g, uint8_t keep) { return T(g * (keep ? s : T(0))); }, dy, mask);
  });
}

}  // namespace

LSF_REGISTER_KERNEL(dropout_forward_kernel, DeviceType::CPU, dropout_forward);
LSF_REGISTER_KERNEL(dropout_backward_kernel, DeviceType::CPU, dropout_backward);

}  // namespace lsf::cpu
