// Internal (not installed): the kernel table entries of the fused bidirectional long-short attention
// (ops/long_short.h): the window geometry and dropout description the kernels take.
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/kernels/long_short_geometry.h"
#include "lsformer/ops/long_short.h"

namespace lsf {

struct LongShortGeometry {
  int64_t window = 0;      // w ≥ 0 (n must be a multiple of w when w > 0)
  bool self_slot = false;  // w = 0 only: one window slot, the query's own key
  int64_t block = 0;       // queries per kernel task (rounded up to whole segments); 0: automatic
  // The kernel multiplies q by T(q_scale) as it reads it and dq by it as it writes it: bit for
  // bit mul(q, q_scale) before the kernel and its backward, without that op's two passes over q.
  // The CPU kernels take any finite value; the CUDA kernels only 1 (long_short_attention scales
  // q with mul there).
  double q_scale = 1.0;
  // Derived: ext and span of the window band; `seg` groups queries that share a band.
  int64_t ext() const { return window > 0 ? ls_geometry::half_window(window) : 0; }
  int64_t span() const { return window > 0 ? ls_geometry::window_span(window) : (self_slot ? 1 : 0); }
  int64_t seg() const { return window > 0 ? window : 1; }
};

struct LongShortDropout {
  uint32_t threshold = 0;  // keep slot i ⇔ (Philox word i >> 8) ≥ threshold; 0 keeps all
  double scale = 1.0;      // kept probabilities are multiplied by this (1/(1 − p))
  GeneratorState state;    // the counter range reserved for the [B, h, n, R + s] tensor
};

// out [B, h, n, e] (overwritten), lse [B, h, n] (log-sum-exp of each row's logits; overwritten);
// q, k, v [B, h, n, e], kbar, vbar [B, h, R, e] (R may be 0), mask [B, n] u8 (1 = real token),
// all of one float dtype except the mask. q, k, v, out (and the backward's dout, dq, dk, dv) may
// have any strides with a unit stride along e (token-major views such as split_heads(X W));
// lse, kbar, vbar, their gradients and the mask are contiguous.
LSF_DECLARE_KERNEL(long_short_forward_kernel,
                   void(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& kbar, const Tensor& vbar, const Tensor& mask, LongShortGeometry geo,
                        LongShortDropout drop));

// Gradients (each overwritten; an undefined one is not computed): dq, dk, dv [B, h, n, e],
// dkbar, dvbar [B, h, R, e], from dout [B, h, n, e] and the forward's inputs and lse.
LSF_DECLARE_KERNEL(long_short_backward_kernel,
                   void(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dkbar,
                        const Tensor& dvbar, const Tensor& dout, const Tensor& lse, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& kbar, const Tensor& vbar,
                        const Tensor& mask, LongShortGeometry geo, LongShortDropout drop));

}  // namespace lsf
