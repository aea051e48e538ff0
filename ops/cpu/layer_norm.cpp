// CPU layer norm, forward and backward, over x viewed as [rows, n] (contiguous).
//
// Forward, per row (in L1): mean, then the biased variance as Σ(x − mean)²/n (two passes, so
// no cancellation as with E[x²] − mean²), then y = (x − mean)·rstd·w + b.
// Backward, per row, with x̂ = (x − mean)·rstd and g = dy·w:
//   dx = rstd·(g − mean(g) − x̂·mean(g·x̂))
// and dweight = Σ_rows dy·x̂, dbias = Σ_rows dy, accumulated by each thread over its own chunk
// of rows into its own buffer and summed across chunks at the end in chunk order (no atomics,
// deterministic for a given thread count).
//
// Vectors: the row loops are written with GCC vector extensions and compiled once per x86-64
// level (ops/cpu/vector_kernels.h); a row's sums run in four vector accumulators folded in
// registers. With OpenMP simd reductions, folding the lanes through the stack was most of a
// 64-wide row's time.
//
// Numerics. f32 rows accumulate in f32 over 4 × 4/8/16 vector lanes: relative error of the mean
// and variance sums about (n/8 + 4)·2^-24 (terms of the variance are non-negative). dweight
// and dbias sum up to `rows` terms: f32 within blocks of kFlushRows rows, then the block sums
// are added into f64, so their error is about (kFlushRows + 4)·2^-24 relative to Σ|terms|
// whatever the number of rows. f64 accumulates in f64 throughout.
#include <type_traits>
#include <vector>

#include "lsformer/ops/cpu/rowwise.h"
#include "lsformer/ops/cpu/vector_kernels.h"
#include "lsformer/ops/layer_norm.h"
#include "lsformer/ops/kernels/layer_norm.h"

namespace lsf::cpu {
namespace {

constexpr int64_t kFlushRows = 64;

// y, x [rows, n]; mean, rstd [rows]; w, b [n] or null. Rows [begin, end).
template <typename T, int Bytes, bool HasW, bool HasB>
LSF_VECTOR_INLINE void forward_rows_body(std::bool_constant<HasW>, std::bool_constant<HasB>, T* y, T* mean, T* rstd,
                                         const T* x, const T* w, const T* b, int64_t n, T eps, int64_t begin,
                                         int64_t end) {
  using S = Simd<T, Bytes>;
  using V = typename S::V;
  const int64_t nv = n / S::W * S::W;  // the whole vectors of a row; the rest one by one
  const T inv_n = T(1) / T(n);
  for (int64_t r = begin; r < end; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    T s = sum_vectors<T, Bytes>(nv, [&](int64_t i) LSF_VECTOR_LAMBDA { return S::load(xr + i); });
    for (int64_t i = nv; i < n; ++i) s += xr[i];
    const T mu = s * inv_n;
    T v = sum_vectors<T, Bytes>(nv, [&](int64_t i) LSF_VECTOR_LAMBDA {
      const V d = S::load(xr + i) - mu;
      return d * d;
    });
    for (int64_t i = nv; i < n; ++i) v += (xr[i] - mu) * (xr[i] - mu);
    const T rs = T(1) / std::sqrt(v * inv_n + eps);
    mean[r] = mu;
    rstd[r] = rs;
    auto out = [&](auto h, int64_t i) LSF_VECTOR_LAMBDA {
      if constexpr (HasW) h *= S::load(w + i);
      if constexpr (HasB) h += S::load(b + i);
      return h;
    };
    for (int64_t i = 0; i < nv; i += S::W) S::store(yr + i, out((S::load(xr + i) - mu) * rs, i));
    for (int64_t i = nv; i < n; ++i) {
      T h = (xr[i] - mu) * rs;
      if constexpr (HasW) h *= w[i];
      if constexpr (HasB) h += b[i];
      yr[i] = h;
    }
  }
}

// dx, dy, x [rows, n]; mean, rstd [rows]; w [n] or null. Rows [begin, end).
// When Params: tile [2n] (scratch, f32 block sums) and acc [2n] (this chunk's dweight then
// dbias sums, f64) are accumulated into (+=).
template <typename T, int Bytes, bool HasW, bool DX, bool Params>
LSF_VECTOR_INLINE void backward_rows_body(std::bool_constant<HasW>, std::bool_constant<DX>, std::bool_constant<Params>,
                                          T* dx, T* tile, double* acc, const T* dy, const T* x, const T* mean,
                                          const T* rstd, const T* w, int64_t n, int64_t begin, int64_t end) {
  using S = Simd<T, Bytes>;
  using V = typename S::V;
  const int64_t nv = n / S::W * S::W;
  const T inv_n = T(1) / T(n);
  T* tw = tile;
  T* tb = tile + n;
  for (int64_t r = begin; r < end; ++r) {
    const T* dyr = dy + r * n;
    const T* xr = x + r * n;
    const T mu = mean[r], rs = rstd[r];
    auto g_of = [&](int64_t i) LSF_VECTOR_LAMBDA {
      if constexpr (HasW) return S::load(dyr + i) * S::load(w + i);
      else return S::load(dyr + i);
    };
    auto xh_of = [&](int64_t i) LSF_VECTOR_LAMBDA { return (S::load(xr + i) - mu) * rs; };
    T a = 0, c = 0;  // mean(g) and mean(g·x̂)
    if constexpr (DX) {
      T sg = sum_vectors<T, Bytes>(nv, g_of);
      T sgx = sum_vectors<T, Bytes>(nv, [&](int64_t i) LSF_VECTOR_LAMBDA { return g_of(i) * xh_of(i); });
      for (int64_t i = nv; i < n; ++i) {
        const T g = HasW ? dyr[i] * w[i] : dyr[i];
        sg += g;
        sgx += g * ((xr[i] - mu) * rs);
      }
      a = sg * inv_n;
      c = sgx * inv_n;
    }
    // One pass for dx and the parameter sums: dy and x are read from L1 once more.
    T* dxr = DX ? dx + r * n : nullptr;
    for (int64_t i = 0; i < nv; i += S::W) {
      const V xh = xh_of(i);
      if constexpr (DX) S::store(dxr + i, rs * (g_of(i) - a - xh * c));
      if constexpr (Params) {
        const V d = S::load(dyr + i);
        S::store(tw + i, S::load(tw + i) + d * xh);
        S::store(tb + i, S::load(tb + i) + d);
      }
    }
    for (int64_t i = nv; i < n; ++i) {
      const T xh = (xr[i] - mu) * rs;
      if constexpr (DX) {
        const T g = HasW ? dyr[i] * w[i] : dyr[i];
        dxr[i] = rs * (g - a - xh * c);
      }
      if constexpr (Params) {
        tw[i] += dyr[i] * xh;
        tb[i] += dyr[i];
      }
    }
    if constexpr (Params) {
      if ((r - begin) % kFlushRows == kFlushRows - 1 || r == end - 1) {
#pragma omp simd
        for (int64_t i = 0; i < 2 * n; ++i) {
          acc[i] += double(tile[i]);
          tile[i] = 0;
        }
      }
    }
  }
}

LSF_PER_VECTOR_LEVEL(forward_rows)
LSF_PER_VECTOR_LEVEL(backward_rows)

void layer_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t rows = mean.numel();
  const int64_t n = rows > 0 ? x.numel() / rows : 0;
  if (rows == 0) return;
  dispatch_float(x.dtype(), "layer_norm", [&]<typename T>() {
    T* py = y.data_ptr<T>();
    T* pm = mean.data_ptr<T>();
    T* pr = rstd.data_ptr<T>();
    const T* px = x.data_ptr<T>();
    const T* pw = weight.defined() ? weight.data_ptr<T>() : nullptr;
    const T* pb = bias.defined() ? bias.data_ptr<T>() : nullptr;
    auto fwd = [&]<bool W, bool B>() {
      parallel_rows(rows, n, [&](int64_t b, int64_t e) {
        forward_rows<T>(std::bool_constant<W>{}, std::bool_constant<B>{}, py, pm, pr, px, pw, pb, n, T(eps), b, e);
      });
    };
    if (pw && pb) fwd.template operator()<true, true>();
    else if (pw) fwd.template operator()<true, false>();
    else if (pb) fwd.template operator()<false, true>();
    else fwd.template operator()<false, false>();
  });
}

void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                         const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight) {
  const int64_t rows = mean.numel();
  const int64_t n = rows > 0 ? x.numel() / rows : (dweight.defined() ? dweight.numel() : dbias.numel());
  const bool params = dweight.defined() || dbias.defined();
  dispatch_float(x.dtype(), "layer_norm backward", [&]<typename T>() {
    const int64_t chunks = chunk_count(rows, n);
    // Per chunk: block sums in T and chunk sums in f64, [2n] each (dweight then dbias).
    ChunkScratch<T> tiles(params ? chunks : 0, 2 * n);
    ChunkScratch<double> sums(params ? chunks : 0, 2 * n);
    T* pdx = dx.defined() ? dx.data_ptr<T>() : nullptr;
    const T* pdy = dy.data_ptr<T>();
    const T* px = x.data_ptr<T>();
    const T* pm = mean.data_ptr<T>();
    const T* pr = rstd.data_ptr<T>();
    const T* pw = weight.defined() ? weight.data_ptr<T>() : nullptr;
    auto bwd = [&]<bool W, bool DX, bool P>() {
      for_each_chunk(rows, chunks, [&](int64_t c, int64_t b, int64_t e) {
        backward_rows<T>(std::bool_constant<W>{}, std::bool_constant<DX>{}, std::bool_constant<P>{}, pdx,
                         P ? tiles.chunk(c) : nullptr, P ? sums.chunk(c) : nullptr, pdy, px, pm, pr, pw, n, b, e);
      });
    };
    auto with_w = [&]<bool W>() {
      if (pdx && params) bwd.template operator()<W, true, true>();
      else if (pdx) bwd.template operator()<W, true, false>();
      else if (params) bwd.template operator()<W, false, true>();
    };
    if (pw) with_w.template operator()<true>();
    else with_w.template operator()<false>();
    if (!params) return;
    // Reduce the chunk sums in chunk order.
    T* pdw = dweight.defined() ? dweight.data_ptr<T>() : nullptr;
    T* pdb = dbias.defined() ? dbias.data_ptr<T>() : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      double sw = 0, sb = 0;
      for (int64_t c = 0; c < chunks; ++c) {
        sw += sums.chunk(c)[i];
        sb += sums.chunk(c)[n + i];
      }
      if (pdw) pdw[i] = T(sw);
      if (pdb) pdb[i] = T(sb);
    }
  });
}

}  // namespace

LSF_REGISTER_KERNEL(layer_norm_forward_kernel, DeviceType::CPU, layer_norm_forward);
LSF_REGISTER_KERNEL(layer_norm_backward_kernel, DeviceType::CPU, layer_norm_backward);

}  // namespace lsf::cpu
