// CUDA kernels of the fused bidirectional long-short attention: the contract of ops/long_short.h
// (same tensors, layouts, slot order [global R | window s], padding rules, log-sum-exp and
// dropout numbering as ops/cpu/long_short.cpp), for f32, bf16, f16 (fp32 compute) and f64.
// q, k, v, out, dout, dq, dk, dv are read through their strides (unit stride along e required),
// so contiguous tensors and [B, n, h, e] memory viewed as [B, h, n, e] both work; kbar, vbar,
// lse and the mask must be contiguous. The lse input of the backward is not read: each row's
// normaliser is recomputed in the compute type (a bf16 lse would be too coarse).
//
// Forward (ls_forward): one block of 8 warps per (batch·head, tile of `tile` queries = whole
// segments). The block stages the R projected keys/values of its head and the window band of
// its tile (keys [start(t0), start(t_last) + s)) in shared memory in the compute type, with an
// odd row stride so that lanes reading different rows hit different banks. A warp takes one
// query at a time: lanes compute the R + s logits (one slot per lane), the warp reduces max and
// sum (exact two-pass softmax over the short row, kept in shared memory), then lanes sweep the
// head dimension for Σ p_i·v_i. Only out and the per-row log-sum-exp reach global memory.
// Memory per query, forward: q and out rows (2e) + the band (1 + (s − w)/tile)·2e + 2R·e/tile
// elements, e.g. w 8, R 32, e 64, tile 64: ≈ 5.3·e elements ≈ 1.3 KB/token in f32.
// Band rows that do not fit in shared memory (very wide windows × heads) are read from global
// memory (L2) instead — same arithmetic, no staging. For large R the rows kernel's dK̄/dV̄
// partial sums and then K̄/V̄ themselves leave shared memory the same way (make_args).
//
// Backward, three deterministic kernels (no floating-point atomics anywhere):
//  1. ls_backward_rows, laid out like the forward: recomputes each row's softmax (max and sum
//     in the compute type — bf16 log-sum-exp outputs would be too coarse to reuse), forms
//     dp_i = f_i·(dout·v_i), D = Σ p_i·dp_i, ds_i = p_i·(dp_i − D), writes dq = Σ ds_i·k_i,
//     the row's log-sum-exp and D to a [B·h, n] workspace, and per-block partial sums of
//     dK̄ = Σ_t ds_t,i·q_t and dV̄ = Σ_t p_t,i·f_t,i·dout_t (threads own (i, f) pairs and add
//     the warps' rows in warp order after each barrier).
//  2. ls_backward_keys, key-centric: one block per (batch·head, 32 keys); each key's queries are
//     the ≤ 3 segments whose band holds it (ops/kernels/long_short_geometry.h). Query rows (q, dout,
//     log-sum-exp, D) are staged 32 at a time; a warp owns a key, lanes take one query each to
//     recompute p, ds and p·f, and the key's dK/dV rows are summed over queries in order.
//  3. ls_reduce_bar: dK̄/dV̄ = the per-block partials summed in block order.
// Tensor cores: the logit tiles (queries × [global | band] keys, length e) and the weighted sums
// (p × V, dsᵀ × Q, pdᵀ × dout) are small GEMMs; mma.sync m16n8k16 (bf16) / wgmma tiles would
// replace the lane-per-slot dot products in the three "slot loops" marked MMA below.
//
// Numerics: f32/bf16/f16 accumulate in f32, f64 in f64; logits are length-e dot products and
// sums run over R + s slots (rows) or ≤ 3·w queries (dK/dV) or n/tile partials (dK̄/dV̄).
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "lsformer/cuda/long_short_tiles.cuh"
#include "lsformer/cuda/runtime.cuh"
#include "lsformer/engine/tensor.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/long_short.h"
#include "lsformer/ops/kernels/long_short.h"
#include "lsformer/ops/kernels/long_short_geometry.h"

namespace lsf::cuda {
namespace {

using ls_geometry::Band;
using namespace ls;

constexpr int kWarps = 8;
constexpr int kBlockThreads = kWarps * kWarp;
constexpr int64_t kTileQueries = 64;  // queries per forward/rows block (rounded to segments)
constexpr int64_t kKeyTile = 32;      // keys per ls_backward_keys block
constexpr int64_t kQueryChunk = 32;   // query rows staged at once by ls_backward_keys (= lanes)

// A [B, h, n, e] operand with any strides and a unit stride along e (ops/long_short.h: q, k,
// v, out and their gradients may be [B, n, h, e] memory seen through a permute).
template <typename P>
struct Rows {
  P* p = nullptr;
  int64_t sb = 0, sh = 0, sn = 0, h = 1;
  __host__ __device__ P* row(int64_t bh, int64_t t) const { return p + (bh / h) * sb + (bh % h) * sh + t * sn; }
};

template <typename T>
struct Args {
  Rows<const T> q, k, v, dout;
  const T *kbar, *vbar;  // [B·h, R, e] contiguous
  const uint8_t* mask;  // [B, n], 1 = real token
  Rows<T> out;          // forward output
  T* lse;               // [B·h, n] forward output
  Rows<T> dq, dk, dv;   // backward outputs (p null: not wanted)
  void *ws_lse, *ws_d;  // [B·h, n] compute type: recomputed log-sum-exp and D per row
  void *part_k, *part_v;  // [B·h, nblk, R, e] compute type: per-block dK̄/dV̄ partials
  Band band;
  int64_t h, e, tile, nblk;
  bool stage;         // window band in shared memory (else read from global)
  bool stage_bar;     // K̄/V̄ in shared memory (else read from global)
  bool bar_acc_smem;  // rows kernel: its dK̄/dV̄ partial sums in shared memory (else in its own
                      // slice of part_k/part_v, where they end up anyway)
  Dropout drop;
};

// Shared-memory layout of the forward and rows kernels (compute type A, row stride ldk = e + 1):
// the staged K̄ and V̄ (bar_rows = R, or 0 when they are read from global memory), the staged
// window band (band_rows, or 0), then the per-warp areas.
struct RowLayout {
  int64_t ldk, bar_rows, band_rows, per_warp;
  __host__ __device__ int64_t kb() const { return 0; }
  __host__ __device__ int64_t vb() const { return bar_rows * ldk; }
  __host__ __device__ int64_t kw() const { return 2 * bar_rows * ldk; }
  __host__ __device__ int64_t vw() const { return 2 * bar_rows * ldk + band_rows * ldk; }
  __host__ __device__ int64_t warps() const { return 2 * bar_rows * ldk + 2 * band_rows * ldk; }
};

// Per-warp areas: forward q[e] p[S]; rows q[e] dout[e] p[S] dp/ds[S] pd[S].
int64_t per_warp_elems(const Band& bd, int64_t e, bool backward) {
  return backward ? 2 * e + 3 * bd.slots() : e + bd.slots();
}

// Stages kbar/vbar [R, e] and the window band (keys band0 + r) of one (batch·head) into shared
// memory, rows of stride ldk in the compute type; keys outside [0, n) become zero rows.
template <typename T, typename A>
__device__ void stage_keys(A* sm, const Args<T>& a, const RowLayout& lay, int64_t bh, int64_t band0,
                           int64_t rows) {
  const int64_t e = a.e, R = a.band.R, n = a.band.n;
  for (int64_t idx = threadIdx.x; idx < lay.bar_rows * e; idx += blockDim.x) {
    const int64_t i = idx / e, f = idx % e;
    sm[lay.kb() + i * lay.ldk + f] = to_acc(a.kbar[(bh * R + i) * e + f]);
    sm[lay.vb() + i * lay.ldk + f] = to_acc(a.vbar[(bh * R + i) * e + f]);
  }
  for (int64_t idx = threadIdx.x; idx < rows * e; idx += blockDim.x) {
    const int64_t r = idx / e, f = idx % e, j = band0 + r;
    const bool in = j >= 0 && j < n;
    sm[lay.kw() + r * lay.ldk + f] = in ? to_acc(a.k.row(bh, j)[f]) : A(0);
    sm[lay.vw() + r * lay.ldk + f] = in ? to_acc(a.v.row(bh, j)[f]) : A(0);
  }
}

// Logit of slot i for query row qw (shared), or −∞ for a window slot outside the sequence or on
// a padded key. `which` 0: keys, 1: values (the backward's dout·v_i uses the same addressing).
template <typename T, typename A>
__device__ __forceinline__ A slot_dot(const A* sm, const Args<T>& a, const RowLayout& lay, const A* x, int64_t bh,
                                      int64_t i, int64_t j, int64_t band0, int which) {
  const int64_t R = a.band.R, e = a.e;
  if (i < R) {
    if (a.stage_bar) return dot_row(x, sm + (which == 0 ? lay.kb() : lay.vb()) + i * lay.ldk, e);
    return dot_row(x, (which == 0 ? a.kbar : a.vbar) + (bh * R + i) * e, e);
  }
  if (a.stage) return dot_row(x, sm + (which == 0 ? lay.kw() : lay.vw()) + (j - band0) * lay.ldk, e);
  return dot_row(x, (which == 0 ? a.k : a.v).row(bh, j), e);
}

// Element f of slot i's key (which 0) or value (which 1) row.
template <typename T, typename A>
__device__ __forceinline__ A slot_elem(const A* sm, const Args<T>& a, const RowLayout& lay, int64_t bh, int64_t i,
                                       int64_t j, int64_t band0, int64_t f, int which) {
  const int64_t R = a.band.R;
  if (i < R) {
    if (a.stage_bar) return sm[(which == 0 ? lay.kb() : lay.vb()) + i * lay.ldk + f];
    return to_acc((which == 0 ? a.kbar : a.vbar)[(bh * R + i) * a.e + f]);
  }
  if (a.stage) return sm[(which == 0 ? lay.kw() : lay.vw()) + (j - band0) * lay.ldk + f];
  return to_acc((which == 0 ? a.k : a.v).row(bh, j)[f]);
}

__device__ __forceinline__ int64_t imin(int64_t x, int64_t y) { return x < y ? x : y; }
__device__ __forceinline__ int64_t imax(int64_t x, int64_t y) { return x > y ? x : y; }

__device__ __forceinline__ bool window_ok(const Band& bd, const uint8_t* mb, int64_t j) {
  return j >= 0 && j < bd.n && mb[j] != 0;
}

// The S logits of query row t (its scaled query staged in qw) into p, −∞ for the window slots
// that fall outside the sequence or on padding; returns their maximum over the warp. Forward
// and backward both compute them this way, so the backward recomputes exactly the forward's
// logits.
template <typename T, typename A>
__device__ __forceinline__ A row_logits(A* p, const A* sm, const Args<T>& a, const RowLayout& lay, const A* qw,
                                        const uint8_t* mb, int64_t bh, int64_t t, int64_t band0, int lane) {
  const Band& bd = a.band;
  const int64_t R = bd.R, S = bd.slots(), ws = bd.window_start(t);
  A mx = neg_inf<A>();
  for (int64_t i = lane; i < S; i += kWarp) {  // MMA: the logit tile
    const int64_t j = ws + (i - R);
    const A l = (i < R || window_ok(bd, mb, j)) ? slot_dot(sm, a, lay, qw, bh, i, j, band0, 0) : neg_inf<A>();
    p[i] = l;
    mx = l > mx ? l : mx;
  }
  return warp_max(mx);
}

// ---- forward ---------------------------------------------------------------------------------

template <typename T, typename A>
__global__ void __launch_bounds__(kBlockThreads) ls_forward(Args<T> a, RowLayout lay) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  A* sm = reinterpret_cast<A*>(smem_raw);
  const Band bd = a.band;
  const int64_t e = a.e, R = bd.R, S = bd.slots(), n = bd.n;
  const int64_t bh = blockIdx.x / a.nblk, c = blockIdx.x % a.nblk, b = bh / a.h;
  const int64_t t0 = c * a.tile, t1 = imin(t0 + a.tile, n);
  const int64_t band0 = bd.window_start(t0);
  stage_keys<T, A>(sm, a, lay, bh, band0, a.stage ? bd.band_rows(t1 - t0) : 0);
  __syncthreads();
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  A* qw = sm + lay.warps() + warp * lay.per_warp;
  A* pw = qw + e;
  const uint8_t* mb = a.mask + b * n;
  for (int64_t t = t0 + warp; t < t1; t += kWarps) {
    const int64_t row = bh * n + t;
    T* orow = a.out.row(bh, t);
    A lse = A(INFINITY);  // padded query or no visible key: a zero row
    if (mb[t] != 0) {
      const T* qrow = a.q.row(bh, t);
      for (int64_t f = lane; f < e; f += kWarp) qw[f] = to_acc(qrow[f]);
      __syncwarp();
      const int64_t ws = bd.window_start(t);
      const A mx = row_logits(pw, sm, a, lay, qw, mb, bh, t, band0, lane);
      if (mx != neg_inf<A>()) {
        A sum = 0;
        for (int64_t i = lane; i < S; i += kWarp) {
          const A p = exp_acc(pw[i] - mx);  // exp(−∞) = 0
          pw[i] = p;
          sum += p;
        }
        sum = warp_sum(sum);
        const A inv = A(1) / sum;
        for (int64_t i = lane; i < S; i += kWarp) {
          A p = pw[i] * inv;
          if (a.drop.on) p *= a.drop.template factor<A>(bd.dropout_index(bh, t, i));
          pw[i] = p;
        }
        lse = mx + log_acc(sum);
        __syncwarp();
        for (int64_t f = lane; f < e; f += kWarp) {  // MMA: p × [V̄ ; V_band]
          A acc = 0;
          for (int64_t i = 0; i < S; ++i) {
            const A p = pw[i];  // one value for the whole warp: a uniform branch
            if (p != A(0)) acc += p * slot_elem(sm, a, lay, bh, i, ws + (i - R), band0, f, 1);
          }
          orow[f] = from_acc<T>(acc);
        }
      }
    }
    if (lse == A(INFINITY))
      for (int64_t f = lane; f < e; f += kWarp) orow[f] = from_acc<T>(A(0));
    if (lane == 0) a.lse[row] = from_acc<T>(lse);
    __syncwarp();  // qw/pw are rewritten by the next query
  }
}

// ---- backward 1: rows (dq, log-sum-exp, D, dK̄/dV̄ partials) -------------------------------

template <typename T, typename A>
__global__ void __launch_bounds__(kBlockThreads) ls_backward_rows(Args<T> a, RowLayout lay) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  A* sm = reinterpret_cast<A*>(smem_raw);
  __shared__ bool live[kWarps];
  const Band bd = a.band;
  const int64_t e = a.e, R = bd.R, S = bd.slots(), n = bd.n;
  const int64_t bh = blockIdx.x / a.nblk, c = blockIdx.x % a.nblk, b = bh / a.h;
  const int64_t t0 = c * a.tile, t1 = imin(t0 + a.tile, n);
  const int64_t band0 = bd.window_start(t0);
  const bool want_bar = a.part_k != nullptr && R > 0;
  stage_keys<T, A>(sm, a, lay, bh, band0, a.stage ? bd.band_rows(t1 - t0) : 0);
  // dK̄/dV̄ partial accumulators [R, e]: after the per-warp areas, or (when R·e is too large for
  // shared memory) this block's own slice of the partials in global memory. Either way each
  // (i, f) is read and written by one thread only, so the sums are the same.
  A* acc_k = nullptr;
  A* acc_v = nullptr;
  if (want_bar) {
    if (a.bar_acc_smem) {
      acc_k = sm + lay.warps() + kWarps * lay.per_warp;
      acc_v = acc_k + R * e;
    } else {
      acc_k = static_cast<A*>(a.part_k) + (bh * a.nblk + c) * R * e;
      acc_v = static_cast<A*>(a.part_v) + (bh * a.nblk + c) * R * e;
    }
    for (int64_t idx = threadIdx.x; idx < R * e; idx += blockDim.x) acc_k[idx] = acc_v[idx] = A(0);
  }
  __syncthreads();
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  A* qw = sm + lay.warps() + warp * lay.per_warp;
  A* dw = qw + e;
  A* pb = dw + e;     // p_i
  A* db = pb + S;     // dp_i, then ds_i
  A* fb = db + S;     // p_i·f_i
  const uint8_t* mb = a.mask + b * n;
  A* ws_lse = static_cast<A*>(a.ws_lse);
  A* ws_d = static_cast<A*>(a.ws_d);
  const int64_t rounds = (t1 - t0 + kWarps - 1) / kWarps;
  for (int64_t it = 0; it < rounds; ++it) {
    const int64_t t = t0 + it * kWarps + warp;
    bool row_live = false;
    if (t < t1) {
      const int64_t row = bh * n + t;
      A lse = A(INFINITY), D = 0;
      if (mb[t] != 0) {
        const T* qrow = a.q.row(bh, t);
        const T* drow = a.dout.row(bh, t);
        for (int64_t f = lane; f < e; f += kWarp) {
          qw[f] = to_acc(qrow[f]);
          dw[f] = to_acc(drow[f]);
        }
        __syncwarp();
        const int64_t ws = bd.window_start(t);
        const A mx = row_logits(pb, sm, a, lay, qw, mb, bh, t, band0, lane);
        if (mx != neg_inf<A>()) {
          A sum = 0;
          for (int64_t i = lane; i < S; i += kWarp) sum += exp_acc(pb[i] - mx);
          lse = mx + log_acc(warp_sum(sum));
          A dsum = 0;
          for (int64_t i = lane; i < S; i += kWarp) {  // MMA: dout × [V̄ ; V_band]ᵀ
            const int64_t j = ws + (i - R);
            const A p = exp_acc(pb[i] - lse);
            const A f = a.drop.on ? a.drop.template factor<A>(bd.dropout_index(bh, t, i)) : A(1);
            const A dp = p != A(0) ? f * slot_dot(sm, a, lay, dw, bh, i, j, band0, 1) : A(0);
            pb[i] = p;
            db[i] = dp;
            fb[i] = p * f;
            dsum += p * dp;
          }
          D = warp_sum(dsum);
          for (int64_t i = lane; i < S; i += kWarp) db[i] = pb[i] * (db[i] - D);
          row_live = true;
          __syncwarp();
          if (a.dq.p != nullptr)
            for (int64_t f = lane; f < e; f += kWarp) {  // MMA: ds × [K̄ ; K_band]
              A acc = 0;
              for (int64_t i = 0; i < S; ++i) {
                const A ds = db[i];
                if (ds != A(0)) acc += ds * slot_elem(sm, a, lay, bh, i, ws + (i - R), band0, f, 0);
              }
              a.dq.row(bh, t)[f] = from_acc<T>(acc);
            }
        }
      }
      if (!row_live && a.dq.p != nullptr)
        for (int64_t f = lane; f < e; f += kWarp) a.dq.row(bh, t)[f] = from_acc<T>(A(0));
      if (lane == 0) {
        ws_lse[row] = lse;
        ws_d[row] = D;
      }
    }
    if (lane == 0) live[warp] = row_live;
    __syncthreads();
    if (want_bar)  // thread-owned (i, f) pairs; warps added in order: deterministic
      for (int64_t idx = threadIdx.x; idx < R * e; idx += blockDim.x) {
        const int64_t i = idx / e, f = idx % e;
        A ak = acc_k[idx], av = acc_v[idx];
        for (int w = 0; w < kWarps; ++w) {
          if (!live[w]) continue;
          const A* base = sm + lay.warps() + w * lay.per_warp;
          ak += base[2 * e + S + i] * base[f];       // ds_i · q_f
          av += base[2 * e + 2 * S + i] * base[e + f];  // p_i·f_i · dout_f
        }
        acc_k[idx] = ak;
        acc_v[idx] = av;
      }
    __syncthreads();
  }
  if (want_bar && a.bar_acc_smem) {
    A* pk = static_cast<A*>(a.part_k) + (bh * a.nblk + c) * R * e;
    A* pv = static_cast<A*>(a.part_v) + (bh * a.nblk + c) * R * e;
    for (int64_t idx = threadIdx.x; idx < R * e; idx += blockDim.x) {
      pk[idx] = acc_k[idx];
      pv[idx] = acc_v[idx];
    }
  }
}

// ---- backward 2: window keys (dK, dV) --------------------------------------------------------

template <typename T, typename A>
__global__ void __launch_bounds__(kBlockThreads) ls_backward_keys(Args<T> a, int64_t key_tiles) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  A* sm = reinterpret_cast<A*>(smem_raw);
  const Band bd = a.band;
  const int64_t e = a.e, n = bd.n, R = bd.R, ldq = e + 1;
  const int64_t bh = blockIdx.x / key_tiles, j0 = (blockIdx.x % key_tiles) * kKeyTile, b = bh / a.h;
  const int64_t j1 = imin(j0 + kKeyTile, n);
  A* ks = sm;                          // [kKeyTile, e] keys of the tile
  A* vs = ks + kKeyTile * e;           // [kKeyTile, e] values
  A* dks = vs + kKeyTile * e;          // [kKeyTile, e] dK accumulators
  A* dvs = dks + kKeyTile * e;         // [kKeyTile, e] dV accumulators
  A* qs = dvs + kKeyTile * e;          // [kQueryChunk, ldq] staged query rows
  A* dos = qs + kQueryChunk * ldq;     // [kQueryChunk, ldq] staged dout rows
  A* ls = dos + kQueryChunk * ldq;     // [kQueryChunk] log-sum-exp
  A* Ds = ls + kQueryChunk;            // [kQueryChunk] D
  A* wbuf = Ds + kQueryChunk;          // per warp: ds[32], pd[32]
  const A* ws_lse = static_cast<const A*>(a.ws_lse);
  const A* ws_d = static_cast<const A*>(a.ws_d);
  const uint8_t* mb = a.mask + b * n;
  for (int64_t idx = threadIdx.x; idx < (j1 - j0) * e; idx += blockDim.x) {
    const int64_t r = idx / e, f = idx % e;
    ks[idx] = to_acc(a.k.row(bh, j0 + r)[f]);
    vs[idx] = to_acc(a.v.row(bh, j0 + r)[f]);
    dks[idx] = dvs[idx] = A(0);
  }
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  A* dsb = wbuf + warp * 2 * kWarp;
  A* pdb = dsb + kWarp;
  const int64_t q_begin = bd.first_query(j0), q_end = bd.end_query(j1 - 1);
  for (int64_t c0 = q_begin; c0 < q_end; c0 += kQueryChunk) {
    const int64_t cn = imin(kQueryChunk, q_end - c0);
    __syncthreads();  // the previous chunk is consumed (and the key tile staged)
    for (int64_t idx = threadIdx.x; idx < cn * e; idx += blockDim.x) {
      const int64_t r = idx / e, f = idx % e;
      qs[r * ldq + f] = to_acc(a.q.row(bh, c0 + r)[f]);
      dos[r * ldq + f] = to_acc(a.dout.row(bh, c0 + r)[f]);
    }
    for (int64_t r = threadIdx.x; r < cn; r += blockDim.x) {
      ls[r] = ws_lse[bh * n + c0 + r];
      Ds[r] = ws_d[bh * n + c0 + r];
    }
    __syncthreads();
    for (int64_t kk = warp; kk < j1 - j0; kk += kWarps) {
      const int64_t j = j0 + kk;
      if (mb[j] == 0) continue;  // padded key: its gradients stay 0
      const int64_t lo = imax(bd.first_query(j), c0), hi = imin(bd.end_query(j), c0 + cn);
      if (lo >= hi) continue;
      A ds = 0, pd = 0;
      const int64_t t = c0 + lane;
      if (t >= lo && t < hi && ls[lane] != A(INFINITY)) {  // MMA: Q_chunk × k_j, dout_chunk × v_j
        const A p = exp_acc(dot_row(qs + lane * ldq, ks + kk * e, e) - ls[lane]);
        const int64_t u = j - bd.window_start(t);
        const A f = a.drop.on ? a.drop.template factor<A>(bd.dropout_index(bh, t, R + u)) : A(1);
        const A dp = f * dot_row(dos + lane * ldq, vs + kk * e, e);
        ds = p * (dp - Ds[lane]);
        pd = p * f;
      }
      dsb[lane] = ds;
      pdb[lane] = pd;
      __syncwarp();
      for (int64_t f = lane; f < e; f += kWarp) {  // MMA: dsᵀ × Q_chunk, pdᵀ × dout_chunk
        A ak = dks[kk * e + f], av = dvs[kk * e + f];
        for (int64_t r = lo - c0; r < hi - c0; ++r) {
          ak += dsb[r] * qs[r * ldq + f];
          av += pdb[r] * dos[r * ldq + f];
        }
        dks[kk * e + f] = ak;
        dvs[kk * e + f] = av;
      }
      __syncwarp();
    }
  }
  __syncthreads();
  for (int64_t idx = threadIdx.x; idx < (j1 - j0) * e; idx += blockDim.x) {
    const int64_t r = idx / e, f = idx % e;
    if (a.dk.p != nullptr) a.dk.row(bh, j0 + r)[f] = from_acc<T>(dks[idx]);
    if (a.dv.p != nullptr) a.dv.row(bh, j0 + r)[f] = from_acc<T>(dvs[idx]);
  }
}

// dst rows = 0 (K and V without a window branch get no gradient; strided, so no memset).
template <typename T>
__global__ void ls_zero_rows(Rows<T> dst, int64_t BH, int64_t n, int64_t e) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < BH * n * e;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t f = idx % e, t = (idx / e) % n, bh = idx / (e * n);
    dst.row(bh, t)[f] = from_acc<T>(0.0f);
  }
}

// ---- backward 3: dK̄/dV̄ = Σ over blocks of the partials, in block order ---------------------

template <typename T, typename A>
__global__ void ls_reduce_bar(T* dst, const A* parts, int64_t BH, int64_t nblk, int64_t Re) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < BH * Re;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t bh = idx / Re, r = idx % Re;
    A acc = 0;
    for (int64_t c = 0; c < nblk; ++c) acc += parts[(bh * nblk + c) * Re + r];
    dst[idx] = from_acc<T>(acc);
  }
}

// ---- host side -------------------------------------------------------------------------------

// Dynamic shared memory a block may use: the opt-in maximum less a margin for the kernels'
// static __shared__ variables.
int64_t max_shared_bytes(int device) {
  int v = 0;
  LSF_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return int64_t(v) - 256;
}

// Lets `kernel` take `bytes` of dynamic shared memory on the current device (needed past 48 KB).
// The attribute stays set for the process, so it is set once per kernel and device, and again
// only for a larger size (issue #19 item 5: the call on every launch was a driver round trip).
template <typename Kernel>
void allow_shared(Kernel kernel, int64_t bytes) {
  if (bytes <= 48 * 1024) return;
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, int64_t> allowed;  // (kernel, device) → bytes set
  int device = 0;
  LSF_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  int64_t& set = allowed[{reinterpret_cast<const void*>(kernel), device}];
  if (bytes <= set) return;
  LSF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  set = bytes;
}

// The Rows view of a [B, h, n, e] tensor (undefined: null); e must have unit stride.
template <typename P>
Rows<P> rows_of(const char* op, const char* name, const Tensor& t) {
  Rows<P> r;
  if (!t.defined()) return r;
  LSF_CHECK(t.dim() == 4 && (t.size(3) <= 1 || t.stride(3) == 1))
      << op << " (CUDA): " << name << " must be [B, h, n, e] with a unit stride along e, got shape " << t.shape()
      << " and strides {" << t.stride(0) << ", " << t.stride(1) << ", " << t.stride(2) << ", " << t.stride(3) << "}";
  r.p = static_cast<P*>(t.raw_data());
  r.sb = t.stride(0);
  r.sh = t.stride(1);
  r.sn = t.stride(2);
  r.h = t.size(1);
  return r;
}

template <typename T>
const T* cptr(const Tensor& t) {
  return static_cast<const T*>(t.raw_data());
}
template <typename T>
T* mptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

// Common setup of both directions: geometry, tiling and the row kernels' shared-memory plan
// (window staged when it fits, else read from global memory).
template <typename T, typename A>
Args<T> make_args(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kbar,
                  const Tensor& vbar, const Tensor& mask, const LongShortGeometry& geo, const LongShortDropout& drop,
                  bool backward, RowLayout& lay, int64_t& smem) {
  Args<T> a{};
  a.q = rows_of<const T>(op, "q", q);
  a.k = rows_of<const T>(op, "k", k);
  a.v = rows_of<const T>(op, "v", v);
  a.kbar = cptr<T>(kbar);
  a.vbar = cptr<T>(vbar);
  a.mask = cptr<uint8_t>(mask);
  a.band = ls_geometry::make_band(geo.window, geo.self_slot, q.size(2), kbar.size(2));
  a.h = q.size(1);
  a.e = q.size(3);
  a.tile = a.band.tile_queries(kTileQueries);
  a.nblk = (a.band.n + a.tile - 1) / a.tile;
  a.drop.on = drop.threshold != 0 || drop.scale != 1.0;
  a.drop.threshold = drop.threshold;
  a.drop.scale = drop.scale;
  a.drop.seed = drop.state.seed;
  a.drop.offset = drop.state.offset;
  const int64_t R = a.band.R, e = a.e, limit = max_shared_bytes(q.device().index);
  lay.ldk = e + 1;
  lay.per_warp = per_warp_elems(a.band, e, backward);
  auto bytes = [&] {
    const int64_t bar = a.bar_acc_smem ? 2 * R * e : 0;
    return (lay.warps() + kWarps * lay.per_warp + bar) * int64_t(sizeof(A));
  };
  // Everything in shared memory when it fits; otherwise, in this order (the first is what ran
  // on the H200 for wide windows; issue #19 item 3 added the other two, for large R):
  // 1. the window band is read from global memory (L2);
  // 2. the rows kernel keeps its dK̄/dV̄ partial sums in its slice of part_k/part_v;
  // 3. K̄ and V̄ are read from global memory.
  // What remains, the per-warp rows of S = R + s slots, bounds S (about 2300 slots in the
  // backward's 227 KB on an H100/H200, 7000 in the forward's).
  a.stage = a.stage_bar = true;
  a.bar_acc_smem = backward;
  lay.bar_rows = R;
  lay.band_rows = a.band.band_rows(a.tile);
  if (bytes() > limit) {
    a.stage = false;
    lay.band_rows = 0;
  }
  if (bytes() > limit) a.bar_acc_smem = false;
  if (bytes() > limit) {
    a.stage_bar = false;
    lay.bar_rows = 0;
  }
  smem = bytes();
  LSF_CHECK(smem <= limit) << op << " (CUDA): R + s = " << a.band.slots() << " slots (R = " << R
                           << " projected, s = " << a.band.slots() - R << " window) of head size e = " << e
                           << " need " << smem << " bytes of shared memory per block for the per-warp rows alone, the device allows "
                           << limit << "; q shape " << q.shape();
  return a;
}

template <typename T, typename A>
void forward_impl(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& kbar, const Tensor& vbar, const Tensor& mask, const LongShortGeometry& geo,
                  const LongShortDropout& drop) {
  RowLayout lay{};
  int64_t smem = 0;
  Args<T> a = make_args<T, A>("long_short_attention", q, k, v, kbar, vbar, mask, geo, drop, false, lay, smem);
  a.out = rows_of<T>("long_short_attention", "out", out);
  a.lse = mptr<T>(lse);
  const int64_t blocks = q.size(0) * a.h * a.nblk;
  if (blocks == 0) return;
  allow_shared(ls_forward<T, A>, smem);
  ls_forward<T, A><<<unsigned(blocks), kBlockThreads, size_t(smem), current_stream()>>>(a, lay);
  LSF_CUDA_CHECK_LAUNCH("ls_forward");
}

template <typename T, typename A>
void backward_impl(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dkbar, const Tensor& dvbar,
                   const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kbar,
                   const Tensor& vbar, const Tensor& mask, const LongShortGeometry& geo, const LongShortDropout& drop,
                   DType acc_dtype) {
  RowLayout lay{};
  int64_t smem = 0;
  Args<T> a =
      make_args<T, A>("long_short_attention_backward", q, k, v, kbar, vbar, mask, geo, drop, true, lay, smem);
  const int64_t BH = q.size(0) * a.h, n = a.band.n, e = a.e, R = a.band.R;
  if (BH * n == 0) return;
  const TensorOptions ws_opts = TensorOptions(acc_dtype).device(q.device());
  Tensor ws_lse = empty({BH, n}, ws_opts), ws_d = empty({BH, n}, ws_opts);
  const bool want_bar = (dkbar.defined() || dvbar.defined()) && R > 0 && e > 0;
  Tensor part_k, part_v;
  if (want_bar) {
    part_k = empty({BH, a.nblk, R, e}, ws_opts);
    part_v = empty({BH, a.nblk, R, e}, ws_opts);
  }
  const char* op = "long_short_attention_backward";
  a.dout = rows_of<const T>(op, "dout", dout);
  a.dq = rows_of<T>(op, "dq", dq);
  a.ws_lse = ws_lse.raw_data();
  a.ws_d = ws_d.raw_data();
  a.part_k = want_bar ? part_k.raw_data() : nullptr;
  a.part_v = want_bar ? part_v.raw_data() : nullptr;
  cudaStream_t stream = current_stream();

  allow_shared(ls_backward_rows<T, A>, smem);
  ls_backward_rows<T, A><<<unsigned(BH * a.nblk), kBlockThreads, size_t(smem), stream>>>(a, lay);
  LSF_CUDA_CHECK_LAUNCH("ls_backward_rows");

  if (dk.defined() || dv.defined()) {
    a.dk = rows_of<T>(op, "dk", dk);
    a.dv = rows_of<T>(op, "dv", dv);
    if (a.band.span == 0) {  // no window branch: K and V get no gradient
      const Rows<T> targets[2] = {a.dk, a.dv};
      for (const Rows<T>& d : targets)
        if (d.p != nullptr && e > 0) {
          ls_zero_rows<T><<<blocks_for(BH * n * e), kThreads, 0, stream>>>(d, BH, n, e);
          LSF_CUDA_CHECK_LAUNCH("ls_zero_rows");
        }
    } else {
      const int64_t key_tiles = (n + kKeyTile - 1) / kKeyTile;
      const int64_t ksmem =
          (4 * kKeyTile * e + 2 * kQueryChunk * (e + 1) + 2 * kQueryChunk + kWarps * 2 * kWarp) * int64_t(sizeof(A));
      const int64_t limit = max_shared_bytes(q.device().index);
      LSF_CHECK(ksmem <= limit) << "long_short_attention_backward (CUDA): head size e = " << e << " needs " << ksmem
                                << " bytes of shared memory per key block, the device allows " << limit
                                << "; q shape " << q.shape();
      allow_shared(ls_backward_keys<T, A>, ksmem);
      ls_backward_keys<T, A><<<unsigned(BH * key_tiles), kBlockThreads, size_t(ksmem), stream>>>(a, key_tiles);
      LSF_CUDA_CHECK_LAUNCH("ls_backward_keys");
    }
  }
  const Tensor* bars[2] = {&dkbar, &dvbar};
  const Tensor* parts[2] = {&part_k, &part_v};
  for (int which = 0; which < 2; ++which) {
    const Tensor& dst = *bars[which];
    if (!dst.defined() || dst.numel() == 0) continue;
    if (!want_bar) {
      LSF_CUDA_CHECK(cudaMemsetAsync(dst.raw_data(), 0, size_t(dst.numel()) * sizeof(T), stream));
      continue;
    }
    ls_reduce_bar<T, A><<<blocks_for(BH * R * e), kThreads, 0, stream>>>(mptr<T>(dst), cptr<A>(*parts[which]), BH,
                                                                        a.nblk, R * e);
    LSF_CUDA_CHECK_LAUNCH("ls_reduce_bar");
  }
}

// The storage types this backend runs the op in, with their compute type.
template <typename Fn>
void dispatch_attention(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::F32: return fn.template operator()<float, float>(kF32);
    case DType::F64: return fn.template operator()<double, double>(kF64);
    case DType::BF16: return fn.template operator()<__nv_bfloat16, float>(kF32);
    case DType::F16: return fn.template operator()<__half, float>(kF32);
    default: break;
  }
  LSF_FAIL() << op << " (CUDA): expected a f32, f64, bf16 or f16 tensor, got " << dtype_name(t);
}

void long_short_forward_cuda(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& kbar, const Tensor& vbar, const Tensor& mask, LongShortGeometry geo,
                             LongShortDropout drop) {
  LSF_CHECK(geo.q_scale == 1.0) << "long_short_attention (CUDA): the kernels take q already scaled (q_scale 1, got "
                                << geo.q_scale << "); long_short_attention scales it with mul on a GPU";
  DeviceGuard guard(q.device().index);
  dispatch_attention(q.dtype(), "long_short_attention", [&]<typename T, typename A>(DType) {
    forward_impl<T, A>(out, lse, q, k, v, kbar, vbar, mask, geo, drop);
  });
}

void long_short_backward_cuda(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dkbar,
                              const Tensor& dvbar, const Tensor& dout, const Tensor& /*lse: recomputed in fp32*/,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kbar,
                              const Tensor& vbar, const Tensor& mask, LongShortGeometry geo, LongShortDropout drop) {
  LSF_CHECK(geo.q_scale == 1.0) << "long_short_attention (CUDA): the kernels take q already scaled (q_scale 1, got "
                                << geo.q_scale << "); long_short_attention scales it with mul on a GPU";
  DeviceGuard guard(q.device().index);
  dispatch_attention(q.dtype(), "long_short_attention_backward", [&]<typename T, typename A>(DType acc) {
    backward_impl<T, A>(dq, dk, dv, dkbar, dvbar, dout, q, k, v, kbar, vbar, mask, geo, drop, acc);
  });
}

}  // namespace

LSF_REGISTER_KERNEL(long_short_forward_kernel, DeviceType::CUDA, long_short_forward_cuda);
LSF_REGISTER_KERNEL(long_short_backward_kernel, DeviceType::CUDA, long_short_backward_cuda);

}  // namespace lsf::cuda
