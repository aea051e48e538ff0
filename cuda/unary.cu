// CUDA unary elementwise kernels, the contract of ops/unary.h: y = op(x) and the fused
// dx = dy · op'(x or y). y and dx are contiguous; x, dy and the saved tensor may be any strided
// views of the same shape. Every op the CPU has, with the CPU's formulas and special cases:
// PyTorch's pow shortcuts, exact-erf GELU written as x·½·erfc(−x/√2), the tanh GELU as
// x·σ(2u), the overflow-free sigmoid, relu/abs/clamp conventions at the kinks.
//
// dtypes: f32, f64, bf16, f16 (bf16/f16 compute in float and round once); neg, abs and clamp
// also i32, i64 and u8. f32 uses CUDA's libdevice functions (expf, erfcf, tanhf: ≤ 2–4 ulp),
// not the CPU's polynomials, so the two agree to a few ulp, not bitwise.
//
// Dense, 16-byte-aligned operands take a vectorised kernel (16 bytes per load and store);
// other contiguous ones a one-element-per-thread grid-stride loop; views an OffsetCalc.
#include <limits>

#include "lsformer/cuda/reduce_utils.cuh"
#include "lsformer/ops/unary.h"
#include "lsformer/ops/kernels/unary.h"

namespace lsf::cuda {
namespace {

using namespace ka;

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluKappa = 0.044715;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
constexpr double kSqrtHalf = 0.7071067811865476;

// pow's exponent classes, as ops/cpu/unary.cpp (and PyTorch) shortcut them.
enum class PowKind : uint8_t { One, Identity, Square, Cube, Sqrt, Rsqrt, Reciprocal, ReciprocalSquare, General };

PowKind pow_kind(double e) {
  if (e == 0.0) return PowKind::One;
  if (e == 1.0) return PowKind::Identity;
  if (e == 2.0) return PowKind::Square;
  if (e == 3.0) return PowKind::Cube;
  if (e == 0.5) return PowKind::Sqrt;
  if (e == -0.5) return PowKind::Rsqrt;
  if (e == -1.0) return PowKind::Reciprocal;
  if (e == -2.0) return PowKind::ReciprocalSquare;
  return PowKind::General;
}

// The op's scalars, prepared on the host: the exponent class, and clamp bounds in the compute
// type (±inf or the integer type's limits when absent).
template <typename A>
struct Params {
  PowKind kind = PowKind::General;      // pow: class of the exponent (forward) or of e − 1 (backward)
  A e = A(0);                           // pow: the exponent
  A em1 = A(0);                         // pow backward: e − 1
  A lo = A(0), hi = A(0);               // clamp bounds
};

template <typename A>
__device__ __forceinline__ A powk(A x, A e, PowKind k) {
  switch (k) {
    case PowKind::One: return A(1);
    case PowKind::Identity: return x;
    case PowKind::Square: return x * x;
    case PowKind::Cube: return x * x * x;
    case PowKind::Sqrt: return dm::sqrt(x);
    case PowKind::Rsqrt: return A(1) / dm::sqrt(x);
    case PowKind::Reciprocal: return A(1) / x;
    case PowKind::ReciprocalSquare: return A(1) / (x * x);
    default: return dm::pow(x, e);
  }
}

// σ(x) from e^{-|x|} ≤ 1: never overflows, keeps relative accuracy in both tails.
template <typename A>
__device__ __forceinline__ A sigmoid(A x) {
  const A e = dm::exp(-dm::fabs(x));
  const A s = A(1) / (A(1) + e);
  return x >= A(0) ? s : e * s;
}

template <typename A>
__device__ __forceinline__ A gelu_tanh_inner(A x) {
  return A(kSqrt2OverPi) * x * (A(1) + A(kGeluKappa) * x * x);
}

// y = op(x) in the compute type A (floating point).
template <typename A>
__device__ __forceinline__ A forward_float(UnaryOp op, A x, const Params<A>& p) {
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Pow: return powk(x, p.e, p.kind);
    case UnaryOp::Exp: return dm::exp(x);
    case UnaryOp::Log: return dm::log(x);
    case UnaryOp::Sqrt: return dm::sqrt(x);
    case UnaryOp::Rsqrt: return A(1) / dm::sqrt(x);
    case UnaryOp::Abs: return dm::fabs(x);
    case UnaryOp::Tanh: return dm::tanh(x);
    case UnaryOp::Sigmoid: return sigmoid(x);
    case UnaryOp::Relu: return x < A(0) ? A(0) : x;  // keeps NaN and −0
    case UnaryOp::Gelu: return x * (A(0.5) * dm::erfc(-x * A(kSqrtHalf)));
    case UnaryOp::GeluTanh: return x * sigmoid(A(2) * gelu_tanh_inner(x));
    case UnaryOp::Clamp: {
      const A r = x < p.lo ? p.lo : x;  // NaN fails both comparisons and stays NaN
      return r > p.hi ? p.hi : r;
    }
  }
  return x;
}

// neg, abs and clamp on integers (neg and abs wrap: −INT_MIN = INT_MIN, as the CPU).
template <typename T>
__device__ __forceinline__ T forward_integer(UnaryOp op, T x, const Params<T>& p) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case UnaryOp::Neg: return T(U(0) - U(x));
    case UnaryOp::Abs:
      if constexpr (std::is_unsigned_v<T>) return x;
      else return x < 0 ? T(U(0) - U(x)) : x;
    case UnaryOp::Clamp: {
      const T r = x < p.lo ? p.lo : x;
      return r > p.hi ? p.hi : r;
    }
    default: return x;
  }
}

// dx = dy · op'(s), s = x or y as unary_backward_uses_output says.
template <typename A>
__device__ __forceinline__ A backward_float(UnaryOp op, A dy, A s, const Params<A>& p) {
  switch (op) {
    case UnaryOp::Neg: return -dy;
    case UnaryOp::Pow: return p.e == A(0) ? A(0) : dy * (p.e * powk(s, p.em1, p.kind));
    case UnaryOp::Exp: return dy * s;
    case UnaryOp::Log: return dy / s;
    case UnaryOp::Sqrt: return dy / (A(2) * s);
    case UnaryOp::Rsqrt: return (A(-0.5) * dy) * (s * s * s);
    case UnaryOp::Abs: return dy * (A(s > A(0)) - A(s < A(0)));
    case UnaryOp::Tanh: return dy * (A(1) - s * s);
    case UnaryOp::Sigmoid: return dy * (A(1) - s) * s;
    case UnaryOp::Relu: return s <= A(0) ? A(0) : dy;
    case UnaryOp::Gelu: {
      const A cdf = A(0.5) * dm::erfc(-s * A(kSqrtHalf));
      const A pdf = dm::exp(A(-0.5) * s * s) * A(kInvSqrt2Pi);
      return dy * (cdf + s * pdf);
    }
    case UnaryOp::GeluTanh: {
      const A v = A(2) * gelu_tanh_inner(s);
      const A e = dm::exp(-dm::fabs(v));
      const A q = A(1) / (A(1) + e);
      const A sg = v >= A(0) ? q : e * q;
      const A ds = e * q * q;  // σ(v)(1 − σ(v)) without cancellation
      const A du = A(kSqrt2OverPi) * (A(1) + A(3 * kGeluKappa) * s * s);
      return dy * (sg + A(2) * s * ds * du);
    }
    case UnaryOp::Clamp: return (s >= p.lo && s <= p.hi) ? dy : A(0);
  }
  return dy;
}

template <typename T>
__device__ __forceinline__ T forward_element(UnaryOp op, T x, const Params<acc_t<T>>& p) {
  if constexpr (std::is_integral_v<T>) return forward_integer(op, x, p);
  else return cast<T>(forward_float(op, cast<acc_t<T>>(x), p));
}

// ---- kernels: y contiguous; x contiguous (Dense) or mapped through calc ----

template <typename T, bool Dense>
__global__ void unary_forward_cuda_kernel(UnaryOp op, T* __restrict__ y, const T* __restrict__ x, Params<acc_t<T>> p,
                                     OffsetCalc<1> calc, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t xo = Dense ? i : calc.get(i).v[0];
    y[i] = forward_element(op, x[xo], p);
  }
}

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// The dense, 16-byte-aligned case: V elements per thread and step, one vector load and store
// (bf16/f16 otherwise move 2 bytes per thread, well below the copy bandwidth).
template <typename T, int V>
__global__ void unary_forward_vec_kernel(UnaryOp op, T* __restrict__ y, const T* __restrict__ x,
                                         Params<acc_t<T>> p, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t packs = n / V;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < packs; k += stride) {
    Pack<T, V> in = reinterpret_cast<const Pack<T, V>*>(x)[k], out;
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = forward_element(op, in.v[j], p);
    reinterpret_cast<Pack<T, V>*>(y)[k] = out;
  }
  for (int64_t i = packs * V + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = forward_element(op, x[i], p);
}

template <typename T, int V>
__global__ void unary_backward_vec_kernel(UnaryOp op, T* __restrict__ dx, const T* __restrict__ dy,
                                          const T* __restrict__ s, Params<acc_t<T>> p, int64_t n) {
  using A = acc_t<T>;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t packs = n / V;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < packs; k += stride) {
    const Pack<T, V> g = reinterpret_cast<const Pack<T, V>*>(dy)[k], v = reinterpret_cast<const Pack<T, V>*>(s)[k];
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = cast<T>(backward_float(op, cast<A>(g.v[j]), cast<A>(v.v[j]), p));
    reinterpret_cast<Pack<T, V>*>(dx)[k] = out;
  }
  for (int64_t i = packs * V + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dx[i] = cast<T>(backward_float(op, cast<A>(dy[i]), cast<A>(s[i]), p));
}

bool aligned16(const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; }

template <typename T, bool Dense>
__global__ void unary_backward_kernel_impl(UnaryOp op, T* __restrict__ dx, const T* __restrict__ dy,
                                           const T* __restrict__ s, Params<acc_t<T>> p, OffsetCalc<2> calc, int64_t n) {
  using A = acc_t<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t dyo = i, so = i;
    if constexpr (!Dense) {
      const Offsets<2> o = calc.get(i);
      dyo = o.v[0];
      so = o.v[1];
    }
    dx[i] = cast<T>(backward_float(op, cast<A>(dy[dyo]), cast<A>(s[so]), p));
  }
}

template <typename T>
Params<acc_t<T>> params(UnaryOp op, double a, double b, bool backward) {
  using A = acc_t<T>;
  Params<A> p;
  if (op == UnaryOp::Pow) {
    p.e = A(a);
    p.em1 = A(a - 1.0);
    p.kind = pow_kind(backward ? a - 1.0 : a);
  } else if (op == UnaryOp::Clamp) {
    p.lo = clamp_bound_as<A>(a);
    p.hi = clamp_bound_as<A>(b);
  }
  return p;
}

template <typename T>
void launch_forward(UnaryOp op, const Tensor& y, const Tensor& x, double a, double b) {
  const int64_t n = y.numel();
  if (n == 0) return;
  DeviceGuard guard(y.device().index);
  const Params<acc_t<T>> p = params<T>(op, a, b, /*backward=*/false);
  constexpr int V = 16 / sizeof(T);
  if (x.is_contiguous() && aligned16(y.raw_data()) && aligned16(x.raw_data())) {
    unary_forward_vec_kernel<T, V><<<blocks_for((n + V - 1) / V), kThreads, 0, current_stream()>>>(
        op, ptr<T>(y), ptr<const T>(x), p, n);
  } else if (x.is_contiguous()) {
    unary_forward_cuda_kernel<T, true><<<blocks_for(n), kThreads, 0, current_stream()>>>(op, ptr<T>(y), ptr<const T>(x), p,
                                                                                   OffsetCalc<1>{}, n);
  } else {
    const OffsetCalc<1> calc = offset_calc<1>({&x}, "unary_forward_kernel");
    unary_forward_cuda_kernel<T, false><<<blocks_for(n), kThreads, 0, current_stream()>>>(op, ptr<T>(y), ptr<const T>(x),
                                                                                    p, calc, n);
  }
  LSF_CUDA_CHECK_LAUNCH("unary_forward_cuda_kernel");
}

void unary_forward(UnaryOp op, const Tensor& y, const Tensor& x, double a, double b) {
  const char* name = unary_op_name(op);
  check_cuda_tensors("unary_forward_kernel", {&y, &x});
  LSF_CHECK(y.shape() == x.shape() && y.dtype() == x.dtype() && y.is_contiguous())
      << "internal: " << name << " CUDA kernel got y " << y.shape() << " " << y.dtype() << " for x " << x.shape()
      << " " << x.dtype();
  if (is_floating(x.dtype())) {
    dispatch_cuda_float(x.dtype(), name, [&]<typename T>() { launch_forward<T>(op, y, x, a, b); });
    return;
  }
  LSF_CHECK(op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Clamp)
      << name << " (CUDA): expected a floating-point tensor, got " << x.dtype();
  switch (x.dtype()) {
    case DType::I32: launch_forward<int32_t>(op, y, x, a, b); break;
    case DType::I64: launch_forward<int64_t>(op, y, x, a, b); break;
    case DType::U8: launch_forward<uint8_t>(op, y, x, a, b); break;
    default: LSF_FAIL() << name << " (CUDA): dtype " << x.dtype() << " is not supported";
  }
}

template <typename T>
void launch_backward(UnaryOp op, const Tensor& dx, const Tensor& dy, const Tensor& s, double a, double b) {
  const int64_t n = dx.numel();
  if (n == 0) return;
  DeviceGuard guard(dx.device().index);
  const Params<acc_t<T>> p = params<T>(op, a, b, /*backward=*/true);
  constexpr int V = 16 / sizeof(T);
  if (dy.is_contiguous() && s.is_contiguous() && aligned16(dx.raw_data()) && aligned16(dy.raw_data()) &&
      aligned16(s.raw_data())) {
    unary_backward_vec_kernel<T, V><<<blocks_for((n + V - 1) / V), kThreads, 0, current_stream()>>>(
        op, ptr<T>(dx), ptr<const T>(dy), ptr<const T>(s), p, n);
  } else if (dy.is_contiguous() && s.is_contiguous()) {
    unary_backward_kernel_impl<T, true><<<blocks_for(n), kThreads, 0, current_stream()>>>(
        op, ptr<T>(dx), ptr<const T>(dy), ptr<const T>(s), p, OffsetCalc<2>{}, n);
  } else {
    const OffsetCalc<2> calc = offset_calc<2>({&dy, &s}, "unary_backward_kernel");
    unary_backward_kernel_impl<T, false><<<blocks_for(n), kThreads, 0, current_stream()>>>(
        op, ptr<T>(dx), ptr<const T>(dy), ptr<const T>(s), p, calc, n);
  }
  LSF_CUDA_CHECK_LAUNCH("unary_backward_kernel");
}

void unary_backward(UnaryOp op, const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y, double a,
                    double b) {
  const char* name = unary_op_name(op);
  const Tensor& s = op == UnaryOp::Neg ? dy : unary_backward_uses_output(op) ? y : x;
  LSF_CHECK(s.defined()) << "internal: " << name << " backward (CUDA) is missing its saved "
                         << (unary_backward_uses_output(op) ? "output" : "input");
  check_cuda_tensors("unary_backward_kernel", {&dx, &dy, &s});
  LSF_CHECK(dx.shape() == dy.shape() && s.shape() == dy.shape() && dx.dtype() == dy.dtype() &&
            s.dtype() == dy.dtype() && dx.is_contiguous())
      << "internal: " << name << " backward (CUDA) got dx " << dx.shape() << " " << dx.dtype() << ", dy "
      << dy.shape() << " " << dy.dtype() << ", saved " << s.shape() << " " << s.dtype();
  dispatch_cuda_float(dy.dtype(), name, [&]<typename T>() { launch_backward<T>(op, dx, dy, s, a, b); });
}

}  // namespace

LSF_REGISTER_KERNEL(unary_forward_kernel, DeviceType::CUDA, unary_forward);
LSF_REGISTER_KERNEL(unary_backward_kernel, DeviceType::CUDA, unary_backward);

}  // namespace lsf::cuda
