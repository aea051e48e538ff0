// CUDA binary elementwise kernels (add, sub, mul, div and the comparisons), the contract of
// ops/binary.h: out = op(a, b) with a and b already broadcast (expanded, stride 0) to out's
// shape; any strides. dtypes: arithmetic on f32, f64, bf16, f16, i32, i64, u8 (bf16/f16 compute
// in float, round once); comparisons on those and bool, writing bool.
//
// Three paths, picked on the host: every operand contiguous (16-byte vector loads and stores
// when the pointers allow); contiguous except a broadcast scalar (x * 2); and the general one,
// where an OffsetCalc maps each output index to the three operands' offsets.
#include "lsformer/cuda/reduce_utils.cuh"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/kernels/binary.h"

namespace lsf::cuda {
namespace {

using namespace ka;

// Arithmetic in the accumulation type (float for bf16/f16), rounded once to T. Integer
// results wrap like the CPU's T(x + y).
template <typename T>
__device__ __forceinline__ T apply(BinaryOp op, T x, T y) {
  using A = acc_t<T>;
  const A a = cast<A>(x), b = cast<A>(y);
  switch (op) {
    case BinaryOp::Add: return cast<T>(A(a + b));
    case BinaryOp::Sub: return cast<T>(A(a - b));
    case BinaryOp::Mul: return cast<T>(A(a * b));
    case BinaryOp::Div: return cast<T>(A(a / b));
    default: return T();
  }
}

template <typename T>
__device__ __forceinline__ bool compare(BinaryOp op, T x, T y) {
  using A = std::conditional_t<std::is_same_v<T, bool>, int, acc_t<T>>;
  const A a = cast<A>(x), b = cast<A>(y);
  switch (op) {
    case BinaryOp::Eq: return a == b;
    case BinaryOp::Ne: return a != b;
    case BinaryOp::Lt: return a < b;
    case BinaryOp::Le: return a <= b;
    case BinaryOp::Gt: return a > b;
    default: return a >= b;
  }
}

template <typename T, typename O>
__device__ __forceinline__ O element(BinaryOp op, T x, T y) {
  if constexpr (std::is_same_v<O, bool>) return compare(op, x, y);
  else return apply(op, x, y);
}

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// out, a, b [n] contiguous; a_scalar/b_scalar: that operand is one element read for all.
// Vectorised: each thread handles V consecutive elements per step (16-byte loads of T).
template <typename T, typename O, int V>
__device__ __forceinline__ void binary_contiguous(BinaryOp op, O* __restrict__ out, const T* __restrict__ a,
                                                  const T* __restrict__ b, bool a_scalar, bool b_scalar, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t packs = n / V;
  const T sa = a_scalar ? a[0] : T(), sb = b_scalar ? b[0] : T();
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < packs; p += stride) {
    Pack<T, V> va{}, vb{};
    if (!a_scalar) va = reinterpret_cast<const Pack<T, V>*>(a)[p];
    if (!b_scalar) vb = reinterpret_cast<const Pack<T, V>*>(b)[p];
    O r[V];
#pragma unroll
    for (int j = 0; j < V; ++j) r[j] = element<T, O>(op, a_scalar ? sa : va.v[j], b_scalar ? sb : vb.v[j]);
    if constexpr (sizeof(O) * V % 4 == 0 && sizeof(O) * V <= 16) {
      Pack<O, V> ro;
#pragma unroll
      for (int j = 0; j < V; ++j) ro.v[j] = r[j];
      reinterpret_cast<Pack<O, V>*>(out)[p] = ro;
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) out[p * V + j] = r[j];
    }
  }
  // The tail that does not fill a pack.
  for (int64_t i = packs * V + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = element<T, O>(op, a_scalar ? sa : a[i], b_scalar ? sb : b[i]);
}

template <typename T, typename O, int V>
__global__ void binary_contiguous_kernel(BinaryOp op, O* __restrict__ out, const T* __restrict__ a,
                                         const T* __restrict__ b, bool a_scalar, bool b_scalar, int64_t n) {
  binary_contiguous<T, O, V>(op, out, a, b, a_scalar, b_scalar, n);
}

// The 16-lane forms of 1-byte types hold more than the 64 registers per thread a 1024-thread
// block allows (79 on sm_90), so their kernel declares the kThreads it is launched with
// (scripts/gpu/check_launch_resources.sh checks every kernel against its block). The other
// forms stay unbounded: a bound changes ptxas's schedule of kernels already measured on a GPU.
template <typename T, typename O, int V>
__global__ void __launch_bounds__(kThreads)
    binary_contiguous_bytes_kernel(BinaryOp op, O* __restrict__ out, const T* __restrict__ a, const T* __restrict__ b,
                                   bool a_scalar, bool b_scalar, int64_t n) {
  binary_contiguous<T, O, V>(op, out, a, b, a_scalar, b_scalar, n);
}

// Any strides: calc maps the output index to (out, a, b) element offsets.
template <typename T, typename O>
__global__ void binary_strided_kernel(BinaryOp op, O* out, const T* a, const T* b, OffsetCalc<3> calc, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const Offsets<3> o = calc.get(i);
    out[o.v[0]] = element<T, O>(op, a[o.v[1]], b[o.v[2]]);
  }
}

// Every stride 0: the tensor is one value broadcast.
bool is_broadcast_scalar(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.shape()[d] != 1 && t.strides()[d] != 0) return false;
  return true;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T, typename O>
void launch(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  cudaStream_t stream = current_stream();
  O* po = ptr<O>(out);
  const T* pa = ptr<const T>(a);
  const T* pb = ptr<const T>(b);
  const bool a_scalar = is_broadcast_scalar(a) && n > 1, b_scalar = is_broadcast_scalar(b) && n > 1;
  const bool dense = out.is_contiguous() && (a.is_contiguous() || a_scalar) && (b.is_contiguous() || b_scalar);
  if (dense) {
    constexpr int V = 16 / sizeof(T) < 1 ? 1 : 16 / sizeof(T);
    const bool vec = aligned16(po) && (a_scalar || aligned16(pa)) && (b_scalar || aligned16(pb));
    if (vec) {
      if constexpr (V == 16) {
        binary_contiguous_bytes_kernel<T, O, V><<<blocks_for((n + V - 1) / V), kThreads, 0, stream>>>(
            op, po, pa, pb, a_scalar, b_scalar, n);
      } else {
        binary_contiguous_kernel<T, O, V><<<blocks_for((n + V - 1) / V), kThreads, 0, stream>>>(op, po, pa, pb,
                                                                                                 a_scalar, b_scalar, n);
      }
    } else {
      binary_contiguous_kernel<T, O, 1><<<blocks_for(n), kThreads, 0, stream>>>(op, po, pa, pb, a_scalar, b_scalar, n);
    }
    LSF_CUDA_CHECK_LAUNCH("binary_contiguous_kernel");
    return;
  }
  const OffsetCalc<3> calc = offset_calc<3>({&out, &a, &b}, "binary_kernel");
  binary_strided_kernel<T, O><<<blocks_for(n), kThreads, 0, stream>>>(op, po, pa, pb, calc, n);
  LSF_CUDA_CHECK_LAUNCH("binary_strided_kernel");
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  check_cuda_tensors("binary_kernel", {&out, &a, &b});
  LSF_CHECK(a.shape() == out.shape() && b.shape() == out.shape() && a.dtype() == b.dtype())
      << "internal: binary_kernel (CUDA) got out " << out.shape() << ", a " << a.shape() << " " << a.dtype() << ", b "
      << b.shape() << " " << b.dtype();
  const bool comparison = op >= BinaryOp::Eq;
  LSF_CHECK(out.dtype() == (comparison ? kBool : a.dtype()))
      << "internal: binary_kernel (CUDA) writes " << (comparison ? kBool : a.dtype()) << ", got out of dtype "
      << out.dtype();
  if (comparison) {
    if (a.dtype() == kBool) {
      launch<bool, bool>(op, out, a, b);
      return;
    }
    dispatch_cuda_numeric(a.dtype(), "binary_kernel (comparison)", [&]<typename T>() { launch<T, bool>(op, out, a, b); });
  } else {
    dispatch_cuda_numeric(a.dtype(), "binary_kernel (arithmetic)", [&]<typename T>() { launch<T, T>(op, out, a, b); });
  }
}

}  // namespace

LSF_REGISTER_KERNEL(binary_kernel, DeviceType::CUDA, binary);

}  // namespace lsf::cuda
