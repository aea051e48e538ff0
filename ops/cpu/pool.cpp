// CPU 2-D pooling kernels over planes [P, H, W] → [P, Ho, Wo] (P = N·C), parallel over planes.
// Every output cell is computed on its own (no running sums across windows), so results do not
// depend on the thread count. Backward writes dx plane by plane: average pooling adds each
// dy / divisor over its window, max pooling adds dy at the saved argmax (overlapping windows
// accumulate, in output order).
#include <algorithm>
#include <cmath>
#include <limits>

#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/cpu/simd.h"
#include "lsformer/ops/pool.h"
#include "lsformer/ops/kernels/pool.h"

namespace lsf::cpu {
namespace {

struct Window {
  int64_t h0, h1, w0, w1;  // the clipped window [h0, h1) × [w0, w1)
  int64_t divisor;
};

// Average-pooling window of output cell (oh, ow) with PyTorch's divisor rule.
Window avg_window(const Pool2dOptions& o, int64_t H, int64_t W, int64_t oh, int64_t ow) {
  int64_t hs = oh * o.stride.h - o.padding.h, ws = ow * o.stride.w - o.padding.w;
  int64_t he = std::min(hs + o.kernel_size.h, H + o.padding.h), we = std::min(ws + o.kernel_size.w, W + o.padding.w);
  const int64_t padded = (he - hs) * (we - ws);
  hs = std::max<int64_t>(hs, 0);
  ws = std::max<int64_t>(ws, 0);
  he = std::min(he, H);
  we = std::min(we, W);
  return {hs, he, ws, we, o.count_include_pad ? padded : (he - hs) * (we - ws)};
}

template <typename T>
void avg_forward_typed(const Tensor& y, const Tensor& x, const Pool2dOptions& o) {
  const int64_t P = x.size(0), H = x.size(1), W = x.size(2), Ho = y.size(1), Wo = y.size(2);
  const T* xp = x.data_ptr<T>();
  T* yp = y.data_ptr<T>();
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain && P > 1)
  for (int64_t p = 0; p < P; ++p) {
    const T* plane = xp + p * H * W;
    for (int64_t oh = 0; oh < Ho; ++oh) {
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const Window win = avg_window(o, H, W, oh, ow);
        T s = 0;
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) s += plane[h * W + w];
        // A window entirely in the padding (possible only with ceil_mode) has divisor 0: 0/0
        // would be NaN, PyTorch's CPU kernel leaves it 0 too.
        yp[(p * Ho + oh) * Wo + ow] = win.divisor > 0 ? s / T(win.divisor) : T(0);
      }
    }
  }
}

template <typename T>
void avg_backward_typed(const Tensor& dx, const Tensor& dy, const Pool2dOptions& o) {
  const int64_t P = dx.size(0), H = dx.size(1), W = dx.size(2), Ho = dy.size(1), Wo = dy.size(2);
  const T* gp = dy.data_ptr<T>();
  T* dp = dx.data_ptr<T>();
#pragma omp parallel for schedule(static) if (dx.numel() >= kParallelGrain && P > 1)
  for (int64_t p = 0; p < P; ++p) {
    T* plane = dp + p * H * W;
    std::fill(plane, plane + H * W, T(0));
    for (int64_t oh = 0; oh < Ho; ++oh) {
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const Window win = avg_window(o, H, W, oh, ow);
        if (win.divisor <= 0) continue;
        const T g = gp[(p * Ho + oh) * Wo + ow] / T(win.divisor);
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) plane[h * W + w] += g;
      }
    }
  }
}

// The 2×2, stride-2, unpadded max pool (the common one) of one plane: the same rule as the
// general loop below (first maximum in row-major order, the first NaN wins) as selects, without
// the per-element branches. A candidate v replaces the running best unless v ≤ best or best is
// already NaN: for a number best that is "v > best or v is NaN".
template <typename T>
LSF_SIMD_CLONES void max_plane_2x2(const T* plane, int64_t W, int64_t Ho, int64_t Wo, T* y, int64_t* idx) {
  for (int64_t oh = 0; oh < Ho; ++oh) {
    const T* r0 = plane + 2 * oh * W;
    const T* r1 = r0 + W;
    T* yr = y + oh * Wo;
    int64_t* ir = idx + oh * Wo;
    const int64_t base = 2 * oh * W;
    // Straight-line selects (no data-dependent branches: ReLU outputs tie often, which a branch
    // predictor cannot follow), vectorised over ow.
#pragma omp simd
    for (int64_t ow = 0; ow < Wo; ++ow) {
      const T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
      const bool take_b = !(b <= a) & (a == a);  // & not &&: no branches
      const T m1 = take_b ? b : a;
      const bool take_c = !(c <= m1) & (m1 == m1);
      const T m2 = take_c ? c : m1;
      const bool take_d = !(d <= m2) & (m2 == m2);
      yr[ow] = take_d ? d : m2;
      const int32_t arg = take_d ? int32_t(W) + 1 : take_c ? int32_t(W) : take_b ? 1 : 0;
      ir[ow] = base + 2 * ow + arg;
    }
  }
}

template <typename T>
void max_forward_typed(const Tensor& y, const Tensor& indices, const Tensor& x, const Pool2dOptions& o) {
  const int64_t P = x.size(0), H = x.size(1), W = x.size(2), Ho = y.size(1), Wo = y.size(2);
  const T* xp = x.data_ptr<T>();
  T* yp = y.data_ptr<T>();
  int64_t* ip = indices.data_ptr<int64_t>();
  if (o.kernel_size == Int2(2) && o.stride == Int2(2) && o.padding == Int2(0) && 2 * Ho <= H && 2 * Wo <= W) {
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain && P > 1)
    for (int64_t p = 0; p < P; ++p) max_plane_2x2(xp + p * H * W, W, Ho, Wo, yp + p * Ho * Wo, ip + p * Ho * Wo);
    return;
  }
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain && P > 1)
  for (int64_t p = 0; p < P; ++p) {
    const T* plane = xp + p * H * W;
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const int64_t hs = oh * o.stride.h - o.padding.h;
      const int64_t h0 = std::max<int64_t>(hs, 0), h1 = std::min(hs + o.kernel_size.h, H);
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t ws = ow * o.stride.w - o.padding.w;
        const int64_t w0 = std::max<int64_t>(ws, 0), w1 = std::min(ws + o.kernel_size.w, W);
        T best = -std::numeric_limits<T>::infinity();
        int64_t arg = h0 * W + w0;  // a window never lies wholly in the padding (p ≤ k/2)
        for (int64_t h = h0; h < h1; ++h) {
          for (int64_t w = w0; w < w1; ++w) {
            const T v = plane[h * W + w];
            if (v > best || std::isnan(v)) {
              best = v;
              arg = h * W + w;
              if (std::isnan(v)) goto done;  // NaN wins; the first one is kept
            }
          }
        }
      done:
        yp[(p * Ho + oh) * Wo + ow] = best;
        ip[(p * Ho + oh) * Wo + ow] = arg;
      }
    }
  }
}

template <typename T>
void max_backward_typed(const Tensor& dx, const Tensor& dy, const Tensor& indices) {
  const int64_t P = dx.size(0), HW = dx.size(1) * dx.size(2), L = dy.size(1) * dy.size(2);
  const T* gp = dy.data_ptr<T>();
  const int64_t* ip = indices.data_ptr<int64_t>();
  T* dp = dx.data_ptr<T>();
#pragma omp parallel for schedule(static) if (dx.numel() >= kParallelGrain && P > 1)
  for (int64_t p = 0; p < P; ++p) {
    T* plane = dp + p * HW;
    std::fill(plane, plane + HW, T(0));
    for (int64_t i = 0; i < L; ++i) plane[ip[p * L + i]] += gp[p * L + i];
  }
}

// Adaptive bins: cell i of `out` covers [⌊i·in/out⌋, ⌈(i+1)·in/out⌉).
int64_t bin_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
int64_t bin_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

template <typename T>
void adaptive_forward_typed(const Tensor& y, const Tensor& x) {
  const int64_t P = x.size(0), H = x.size(1), W = x.size(2), Ho = y.size(1), Wo = y.size(2);
  const T* xp = x.data_ptr<T>();
  T* yp = y.data_ptr<T>();
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelGrain && P > 1)
  for (int64_t p = 0; p < P; ++p) {
    const T* plane = xp + p * H * W;
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const int64_t h0 = bin_start(oh, H, Ho), h1 = bin_end(oh, H, Ho);
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t w0 = bin_start(ow, W, Wo), w1 = bin_end(ow, W, Wo);
        T s = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) s += plane[h * W + w];
        yp[(p * Ho + oh) * Wo + ow] = s / T((h1 - h0) * (w1 - w0));
      }
    }
  }
}

template <typename T>
void adaptive_backward_typed(const Tensor& dx, const Tensor& dy) {
  const int64_t P = dx.size(0), H = dx.size(1), W = dx.size(2), Ho = dy.size(1), Wo = dy.size(2);
  const T* gp = dy.data_ptr<T>();
  T* dp = dx.data_ptr<T>();
#pragma omp parallel for schedule(static) if (dx.numel() >= kParallelGrain && P > 1)
  for (int64_t p = 0; p < P; ++p) {
    T* plane = dp + p * H * W;
    std::fill(plane, plane + H * W, T(0));
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const int64_t h0 = bin_start(oh, H, Ho), h1 = bin_end(oh, H, Ho);
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t w0 = bin_start(ow, W, Wo), w1 = bin_end(ow, W, Wo);
        const T g = gp[(p * Ho + oh) * Wo + ow] / T((h1 - h0) * (w1 - w0));
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) plane[h * W + w] += g;
      }
    }
  }
}

void avg_forward(const Tensor& y, const Tensor& x, const Pool2dOptions& o) {
  dispatch_float(x.dtype(), "avg_pool2d", [&]<typename T>() { avg_forward_typed<T>(y, x, o); });
}
void avg_backward(const Tensor& dx, const Tensor& dy, const Pool2dOptions& o) {
  dispatch_float(dy.dtype(), "avg_pool2d_backward", [&]<typename T>() { avg_backward_typed<T>(dx, dy, o); });
}
void max_forward(const Tensor& y, const Tensor& indices, const Tensor& x, const Pool2dOptions& o) {
  dispatch_float(x.dtype(), "max_pool2d", [&]<typename T>() { max_forward_typed<T>(y, indices, x, o); });
}
void max_backward(const Tensor& dx, const Tensor& dy, const Tensor& indices) {
  dispatch_float(dy.dtype(), "max_pool2d_backward", [&]<typename T>() { max_backward_typed<T>(dx, dy, indices); });
}
void adaptive_forward(const Tensor& y, const Tensor& x) {
  dispatch_float(x.dtype(), "adaptive_avg_pool2d", [&]<typename T>() { adaptive_forward_typed<T>(y, x); });
}
void adaptive_backward(const Tensor& dx, const Tensor& dy) {
  dispatch_float(dy.dtype(), "adaptive_avg_pool2d_backward",
                 [&]<typename T>() { adaptive_backward_typed<T>(dx, dy); });
}

}  // namespace

LSF_REGISTER_KERNEL(avg_pool2d_forward_kernel, DeviceType::CPU, avg_forward);
LSF_REGISTER_KERNEL(avg_pool2d_backward_kernel, DeviceType::CPU, avg_backward);
LSF_REGISTER_KERNEL(max_pool2d_forward_kernel, DeviceType::CPU, max_forward);
LSF_REGISTER_KERNEL(max_pool2d_backward_kernel, DeviceType::CPU, max_backward);
LSF_REGISTER_KERNEL(adaptive_avg_pool2d_forward_kernel, DeviceType::CPU, adaptive_forward);
LSF_REGISTER_KERNEL(adaptive_avg_pool2d_backward_kernel, DeviceType::CPU, adaptive_backward);

}  // namespace lsf::cpu
