// CPU softmax and log_softmax, forward and backward, along any dim.
//
// The tensor is viewed as [outer, n, inner] with the softmax over n. When inner == 1 (the
// softmax dim is the last one) every row is contiguous: three short passes over a row that
// stays in L1 (max; exp and sum; scale), each a vectorised loop. Otherwise the kernel walks
// tiles of up to kColumnTile adjacent columns with per-column running max/sum, so the vectorised
// loop runs along the contiguous inner dim and nothing is transposed.
//
// Numerics. The max is subtracted before exp, so exp never overflows and every term is in
// [0, 1]. f32 rows accumulate in f32: the sum is over n terms in [0, 1] spread over 8 or 16
// vector lanes, so its relative error is at most about (n/8 + 4)·2^-24, plus 2^-23 from
// vexp (≤ 2 ulp) per term (whose argument x − max is rounded to f32 exactly as PyTorch rounds it);
// log_softmax adds one rounding of |max + log Σ|. That is the tolerance the tests derive
// (PyTorch also accumulates in f32 here). f64 uses libm's exp and f64 sums.
#include <cstring>
#include <limits>

#include "lsformer/ops/cpu/rowwise.h"
#include "lsformer/ops/softmax.h"
#include "lsformer/ops/kernels/softmax.h"

namespace lsf::cpu {
namespace {

// ---- forward ----

// y, x [rows, n]; rows [begin, end).
template <typename T, bool Log>
LSF_SIMD_CLONES void forward_rows(T* y, const T* x, int64_t n, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t i = 0; i < n; ++i) m = xr[i] > m ? xr[i] : m;
    T s = 0;
    if constexpr (Log) {
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n; ++i) s += vexp(T(xr[i] - m));
      const T shift = m + std::log(s);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] - shift;
    } else {
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n; ++i) {
        const T e = vexp(T(xr[i] - m));
        yr[i] = e;
        s += e;
      }
      const T inv = T(1) / s;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) yr[i] *= inv;
    }
  }
}

// y, x [outer, n, inner]; tasks [begin, end) enumerate (outer index, tile of `tile` ≤
// kColumnTile columns).
template <typename T, bool Log>
LSF_SIMD_CLONES void forward_columns(T* y, const T* x, int64_t n, int64_t inner, int64_t tile, int64_t begin,
                                     int64_t end) {
  const int64_t tiles = (inner + tile - 1) / tile;
  T m[kColumnTile], s[kColumnTile];
  for (int64_t task = begin; task < end; ++task) {
    const int64_t o = task / tiles, j0 = (task % tiles) * tile;
    const int64_t w = std::min(tile, inner - j0);
    const T* xb = x + o * n * inner + j0;
    T* yb = y + o * n * inner + j0;
    for (int64_t j = 0; j < w; ++j) {
      m[j] = -std::numeric_limits<T>::infinity();
      s[j] = 0;
    }
    for (int64_t i = 0; i < n; ++i) {
      const T* xi = xb + i * inner;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) m[j] = xi[j] > m[j] ? xi[j] : m[j];
    }
    for (int64_t i = 0; i < n; ++i) {
      const T* xi = xb + i * inner;
      T* yi = yb + i * inner;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) {
        const T e = vexp(T(xi[j] - m[j]));
        s[j] += e;
        if constexpr (!Log) yi[j] = e;
      }
    }
    if constexpr (Log) {
      for (int64_t j = 0; j < w; ++j) m[j] += std::log(s[j]);  // m becomes the logsumexp
      for (int64_t i = 0; i < n; ++i) {
        const T* xi = xb + i * inner;
        T* yi = yb + i * inner;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) yi[j] = xi[j] - m[j];
      }
    } else {
      for (int64_t j = 0; j < w; ++j) s[j] = T(1) / s[j];
      for (int64_t i = 0; i < n; ++i) {
        T* yi = yb + i * inner;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) yi[j] *= s[j];
      }
    }
  }
}

// ---- masked softmax (last dim): the forward of masked_softmax; its backward is softmax's ----

// One row: y = the softmax of x over the entries with keep[i·ks] ≠ 0, 0 elsewhere; all 0 when
// none is kept. The row is first written to y with −∞ at the dropped entries, then forward_rows
// runs on it in place (it stays in L1): the same loops as softmax of the −∞-masked logits, so
// the result equals softmax(masked_fill(x, !keep, −∞)) bit for bit, without that tensor.
template <typename T>
LSF_SIMD_CLONES void masked_forward_row(T* yr, const T* xr, const uint8_t* kr, int64_t ks, int64_t n) {
  const T ninf = -std::numeric_limits<T>::infinity();
  bool any = false;
  if (ks == 0) {  // the whole row kept or dropped
    if (kr[0] != 0) return forward_rows<T, false>(yr, xr, n, 0, 1);
  } else {
    // A row that keeps everything (no padding in this sequence) is a plain softmax row.
    if (ks == 1 && std::memchr(kr, 0, size_t(n)) == nullptr) return forward_rows<T, false>(yr, xr, n, 0, 1);
    for (int64_t i = 0; i < n; ++i) {
      const bool k = kr[i * ks] != 0;
      yr[i] = k ? xr[i] : ninf;
      any = any || k;
    }
  }
  if (!any) {  // nothing kept: a zero row, not NaN
    for (int64_t i = 0; i < n; ++i) yr[i] = T(0);
    return;
  }
  forward_rows<T, false>(yr, yr, n, 0, 1);
}

// ---- backward: softmax dx = y·(dy − Σ dy·y); log_softmax dx = dy − exp(y)·Σ dy ----

// dx, dy, y [rows, n]; rows [begin, end).
template <typename T, bool Log>
LSF_SIMD_CLONES void backward_rows(T* dx, const T* dy, const T* y, int64_t n, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const T* dyr = dy + r * n;
    const T* yr = y + r * n;
    T* dxr = dx + r * n;
    T s = 0;
    if constexpr (Log) {
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n; ++i) s += dyr[i];
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) dxr[i] = dyr[i] - vexp(yr[i]) * s;
    } else {
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n; ++i) s += dyr[i] * yr[i];
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) dxr[i] = yr[i] * (dyr[i] - s);
    }
  }
}

// dx, dy, y [outer, n, inner]; tasks as in forward_columns.
template <typename T, bool Log>
LSF_SIMD_CLONES void backward_columns(T* dx, const T* dy, const T* y, int64_t n, int64_t inner, int64_t tile,
                                      int64_t begin, int64_t end) {
  const int64_t tiles = (inner + tile - 1) / tile;
  T s[kColumnTile];
  for (int64_t task = begin; task < end; ++task) {
    const int64_t o = task / tiles, j0 = (task % tiles) * tile;
    const int64_t w = std::min(tile, inner - j0);
    const int64_t base = o * n * inner + j0;
    for (int64_t j = 0; j < w; ++j) s[j] = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T* dyi = dy + base + i * inner;
      const T* yi = y + base + i * inner;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) s[j] += Log ? dyi[j] : dyi[j] * yi[j];
    }
    for (int64_t i = 0; i < n; ++i) {
      const T* dyi = dy + base + i * inner;
      const T* yi = y + base + i * inner;
      T* dxi = dx + base + i * inner;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) {
        if constexpr (Log) dxi[j] = dyi[j] - vexp(yi[j]) * s[j];
        else dxi[j] = yi[j] * (dyi[j] - s[j]);
      }
    }
  }
}

// Rows when the softmax dim is innermost, column tiles otherwise (columns(tile, begin, end)).
template <typename RowsFn, typename ColumnsFn>
void run(const SoftmaxGeometry& g, RowsFn&& rows, ColumnsFn&& columns) {
  if (g.inner == 1) {
    parallel_rows(g.outer, g.n, rows);
  } else {
    const int64_t tile = column_tile(g.outer, g.inner);
    const int64_t tiles = (g.inner + tile - 1) / tile;
    parallel_rows(g.outer * tiles, g.n * std::min(tile, g.inner),
                  [&](int64_t b, int64_t e) { columns(tile, b, e); });
  }
}

Tensor contiguous_input(const Tensor& t) { return t.is_contiguous() ? t : t.detach().contiguous(); }

void softmax_forward(bool log, const Tensor& y, const Tensor& x, int64_t dim) {
  const SoftmaxGeometry g = softmax_geometry(x.shape(), dim);
  const Tensor xc = contiguous_input(x);
  dispatch_float(x.dtype(), log ? "log_softmax" : "softmax", [&]<typename T>() {
    const T* px = xc.data_ptr<T>();
    T* py = y.data_ptr<T>();
    auto fwd = [&]<bool Log>() {
      run(g, [&](int64_t b, int64_t e) { forward_rows<T, Log>(py, px, g.n, b, e); },
          [&](int64_t tile, int64_t b, int64_t e) { forward_columns<T, Log>(py, px, g.n, g.inner, tile, b, e); });
    };
    if (log) fwd.template operator()<true>();
    else fwd.template operator()<false>();
  });
}

void softmax_backward(bool log, const Tensor& dx, const Tensor& dy, const Tensor& y, int64_t dim) {
  const SoftmaxGeometry g = softmax_geometry(y.shape(), dim);
  const Tensor dyc = contiguous_input(dy), yc = contiguous_input(y);
  dispatch_float(y.dtype(), log ? "log_softmax backward" : "softmax backward", [&]<typename T>() {
    const T* pdy = dyc.data_ptr<T>();
    const T* py = yc.data_ptr<T>();
    T* pdx = dx.data_ptr<T>();
    auto bwd = [&]<bool Log>() {
      run(g, [&](int64_t b, int64_t e) { backward_rows<T, Log>(pdx, pdy, py, g.n, b, e); },
          [&](int64_t tile, int64_t b, int64_t e) {
            backward_columns<T, Log>(pdx, pdy, py, g.n, g.inner, tile, b, e);
          });
    };
    if (log) bwd.template operator()<true>();
    else bwd.template operator()<false>();
  });
}

void masked_softmax_forward(const Tensor& y, const Tensor& x, const Tensor& keep) {
  const int64_t nd = x.dim(), n = x.size(-1), rows = x.numel() / n;
  const Tensor xc = contiguous_input(x);
  const uint8_t* pk = static_cast<const uint8_t*>(keep.raw_data());
  const int64_t ks = keep.stride(-1);
  // keep's offset of row r (r enumerates x's leading dims in row-major order).
  auto keep_row = [&](int64_t r) {
    int64_t offset = 0;
    for (int64_t d = nd - 2; d >= 0; --d) {
      const int64_t size = x.size(d);
      offset += (r % size) * keep.stride(d);
      r /= size;
    }
    return pk + offset;
  };
  dispatch_float(x.dtype(), "masked_softmax", [&]<typename T>() {
    const T* px = xc.data_ptr<T>();
    T* py = y.data_ptr<T>();
    parallel_rows(rows, n, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) masked_forward_row<T>(py + r * n, px + r * n, keep_row(r), ks, n);
    });
  });
}

}  // namespace

LSF_REGISTER_KERNEL(softmax_forward_kernel, DeviceType::CPU, softmax_forward);
LSF_REGISTER_KERNEL(softmax_backward_kernel, DeviceType::CPU, softmax_backward);
LSF_REGISTER_KERNEL(masked_softmax_forward_kernel, DeviceType::CPU, masked_softmax_forward);

}  // namespace lsf::cpu
