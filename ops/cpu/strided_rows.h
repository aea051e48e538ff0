// Per-(batch, head) row matrices of a strided tensor, for the CPU kernels that read the
// attention operands in place (ops/cpu/long_short.cpp, ops/cpu/causal_long_short.cpp): the op
// passes views such as split_heads(X W), [B, n, h, e] memory seen as [B, h, n, e], with the
// feature axis contiguous (the ops guarantee it), and the kernels walk rows through the strides.
#pragma once

#include <cstdint>

#include "lsformer/engine/tensor.h"

namespace lsf::cpu {

// Element (b, head, row, f) at p[b·sb + head·sh + row·sl + f].
template <typename T>
struct Rows {
  T* p = nullptr;
  int64_t sb = 0, sh = 0, sl = 0;
  Rows() = default;
  // A [B, h, L, e] tensor, or an [h, L, e] table (sb = 0), or an [h, e] bias (sb = sl = 0).
  explicit Rows(const Tensor& t) : p(t.defined() ? static_cast<T*>(t.raw_data()) : nullptr) {
    if (!t.defined()) return;
    const int64_t nd = t.dim();
    sl = nd >= 3 ? t.strides()[size_t(nd - 2)] : 0;
    sh = t.strides()[size_t(nd >= 3 ? nd - 3 : 0)];
    sb = nd == 4 ? t.strides()[0] : 0;
  }
  // A contiguous [B, h, L, e] buffer.
  static Rows contiguous(T* data, int64_t h, int64_t L, int64_t e) {
    Rows r;
    r.p = data, r.sb = h * L * e, r.sh = L * e, r.sl = e;
    return r;
  }
  T* at(int64_t b, int64_t head) const { return p + b * sb + head * sh; }
};

}  // namespace lsf::cpu
