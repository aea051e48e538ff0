// CPU kernels of the unary elementwise ops: y = op(x) and the fused dx = dy · op'(x or y).
//
// Each op is an element functor (forward: T(T x); backward: T(T dy, T saved)) run by one
// contiguous loop: dense operands are split into chunks over OpenMP threads; strided ones are
// walked with loops.h's for_each_run and copied through small buffers into the same loop, so
// both layouts give bitwise the same values.
//
// f32 is the fast path. Its transcendentals come from unary_math.h (vectorisable polynomials,
// not libm calls), and its contiguous loops are compiled three times (AVX-512, AVX2, SSE2)
// with the best one picked at load time on x86-64 Linux. f64 uses libm (it serves gradient
// checks and references). neg, abs and clamp also run on i32, i64 and u8.
//
// Compiler settings for this file (GCC): no floating-point trap semantics, which are not
// observable through this library and otherwise stop the selects in unary_math.h (NaN and
// range handling) from being if-converted, so loops would not vectorise; and no jump
// threading, which otherwise turns those selects into branches and duplicates the code after
// them (three copies of the exp polynomial in GELU: 1.6× slower). It cannot remove errno
// from sqrt (GCC ignores -fno-math-errno in a pragma), which would keep a scalar call per
// element: sqrt and rsqrt go through sqrt_f32 below instead.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math", "no-thread-jumps")
#endif

#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "lsformer/engine/scratch.h"
#include "lsformer/ops/cpu/loops.h"
#include "lsformer/ops/cpu/simd.h"
#include "lsformer/ops/cpu/unary_math.h"
#include "lsformer/ops/unary.h"
#include "lsformer/ops/kernels/unary.h"


namespace lsf::cpu {
namespace {

// Contiguous work from kParallelGrain elements up is cut into chunks of this size spread over
// the threads: big enough to amortise the scheduling, small enough to balance a few hundred
// thousand elements over several cores.
constexpr int64_t kChunk = 16384;

// √(2/π) and the cubic coefficient of the tanh approximation of GELU; 1/√(2π) for φ(x).
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluKappa = 0.044715;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
constexpr double kSqrtHalf = 0.7071067811865476;

// ---------------------------------------------------------------------------------------------
// Element functors. Forward: y = f(x). Backward: dx = f(dy, s) with s = x or y as
// unary_backward_uses_output says.

template <typename T>
struct NegF {
  LSF_VMATH_INLINE T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return T(U(0) - U(x));  // wraps like PyTorch (−INT_MIN = INT_MIN) without signed overflow
    } else {
      return -x;
    }
  }
};

template <typename T>
struct AbsF {
  LSF_VMATH_INLINE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) return x;
    else if constexpr (std::is_integral_v<T>) return x < 0 ? NegF<T>{}(x) : x;
    else return std::abs(x);
  }
};

// Bounds already converted to T (±inf or the type's limits when absent). NaN stays NaN: both
// comparisons are false. min > max gives max, as in PyTorch.
template <typename T>
struct ClampF {
  T lo, hi;
  LSF_VMATH_INLINE T operator()(T x) const {
    T r = x < lo ? lo : x;
    return r > hi ? hi : r;
  }
};

template <typename T>
struct ExpF {
  LSF_VMATH_INLINE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return vmath::exp(x);
    else return std::exp(x);
  }
};

template <typename T>
struct LogF {
  LSF_VMATH_INLINE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return vmath::log(x);
    else return std::log(x);
  }
};

template <typename T>
struct SqrtF {
  LSF_VMATH_INLINE T operator()(T x) const { return std::sqrt(x); }
};

template <typename T>
struct RsqrtF {
  LSF_VMATH_INLINE T operator()(T x) const { return T(1) / std::sqrt(x); }
};

template <typename T>
struct TanhF {
  LSF_VMATH_INLINE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return vmath::tanh(x);
    else return std::tanh(x);
  }
};

template <typename T>
LSF_VMATH_INLINE T stable_sigmoid(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return vmath::sigmoid(x);
  } else {
    T e = std::exp(-std::abs(x));
    T s = T(1) / (T(1) + e);
    return x >= T(0) ? s : e * s;
  }
}

template <typename T>
struct SigmoidF {
  LSF_VMATH_INLINE T operator()(T x) const { return stable_sigmoid(x); }
};

// relu(x) = x < 0 ? 0 : x keeps NaN and −0 as PyTorch's clamp_min(x, 0) does.
template <typename T>
struct ReluF {
  LSF_VMATH_INLINE T operator()(T x) const { return x < T(0) ? T(0) : x; }
};

// gelu(x) = x·Φ(x), Φ from erfc so that the lower tail keeps its relative accuracy.
template <typename T>
struct GeluF {
  LSF_VMATH_INLINE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) {
      // x·Φ(x) = m for x < 0 and x − m for x ≥ 0, m = (x·½R)·e^{-x²/2}: the factor that may be
      // subnormal comes last (see NormalCdf). m is 0 from x = 16 on; taking it at min(x, 16)
      // keeps gelu(inf) = inf instead of inf·0.
      vmath::NormalCdf c = vmath::normal_cdf(x);
      float xc = x < 16.0f ? x : 16.0f;
      float m = (xc * c.half_r) * c.gauss;
      return x < 0.0f ? m : x - m;
    } else return x * (T(0.5) * std::erfc(-x * T(kSqrtHalf)));
  }
};

// The tanh form 0.5·x·(1 + tanh(u)), u = √(2/π)(x + κx³), written as x·σ(2u): the same value
// without the cancellation of 1 + tanh(u) for negative x.
template <typename T>
LSF_VMATH_INLINE T gelu_tanh_inner(T x) {
  return T(kSqrt2OverPi) * x * (T(1) + T(kGeluKappa) * x * x);
}

template <typename T>
struct GeluTanhF {
  LSF_VMATH_INLINE T operator()(T x) const { return x * stable_sigmoid(T(2) * gelu_tanh_inner(x)); }
};

// pow(x, e) with PyTorch's special cases (the same shortcuts, so the same values).
enum class PowKind { One, Identity, Square, Cube, Sqrt, Rsqrt, Reciprocal, ReciprocalSquare, General };

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

template <typename T, PowKind K>
struct PowF {
  T e;
  LSF_VMATH_INLINE T operator()(T x) const {
    if constexpr (K == PowKind::One) return T(1);
    else if constexpr (K == PowKind::Identity) return x;
    else if constexpr (K == PowKind::Square) return x * x;
    else if constexpr (K == PowKind::Cube) return x * x * x;
    else if constexpr (K == PowKind::Sqrt) return std::sqrt(x);
    else if constexpr (K == PowKind::Rsqrt) return T(1) / std::sqrt(x);
    else if constexpr (K == PowKind::Reciprocal) return T(1) / x;
    else if constexpr (K == PowKind::ReciprocalSquare) return T(1) / (x * x);
    else return std::pow(x, e);
  }
};

// Calls fn(PowF<T, kind>{e}) for the kind of exponent e.
template <typename T, typename Fn>
void with_pow(double e, Fn&& fn) {
  switch (pow_kind(e)) {
    case PowKind::One: fn(PowF<T, PowKind::One>{T(e)}); break;
    case PowKind::Identity: fn(PowF<T, PowKind::Identity>{T(e)}); break;
    case PowKind::Square: fn(PowF<T, PowKind::Square>{T(e)}); break;
    case PowKind::Cube: fn(PowF<T, PowKind::Cube>{T(e)}); break;
    case PowKind::Sqrt: fn(PowF<T, PowKind::Sqrt>{T(e)}); break;
    case PowKind::Rsqrt: fn(PowF<T, PowKind::Rsqrt>{T(e)}); break;
    case PowKind::Reciprocal: fn(PowF<T, PowKind::Reciprocal>{T(e)}); break;
    case PowKind::ReciprocalSquare: fn(PowF<T, PowKind::ReciprocalSquare>{T(e)}); break;
    case PowKind::General: fn(PowF<T, PowKind::General>{T(e)}); break;
  }
}

// ---- backward functors: dx = f(dy, s) ----

// d/dx xᵉ = e·x^(e−1), computed with pow's own shortcuts for e − 1 (as PyTorch does).
template <typename T, typename P>
struct PowBackF {
  T e;
  P pow_e_minus_1;
  LSF_VMATH_INLINE T operator()(T dy, T x) const { return dy * (e * pow_e_minus_1(x)); }
};

template <typename T>
struct ZeroBackF {
  LSF_VMATH_INLINE T operator()(T, T) const { return T(0); }
};

template <typename T>
struct ExpBackF {  // s = y
  LSF_VMATH_INLINE T operator()(T dy, T y) const { return dy * y; }
};

template <typename T>
struct LogBackF {  // s = x
  LSF_VMATH_INLINE T operator()(T dy, T x) const { return dy / x; }
};

template <typename T>
struct SqrtBackF {  // s = y: d√x = 1/(2√x)
  LSF_VMATH_INLINE T operator()(T dy, T y) const { return dy / (T(2) * y); }
};

template <typename T>
struct RsqrtBackF {  // s = y: d x^(−1/2) = −½ x^(−3/2) = −½ y³
  LSF_VMATH_INLINE T operator()(T dy, T y) const { return (T(-0.5) * dy) * (y * y * y); }
};

template <typename T>
struct AbsBackF {  // s = x: sign(x), 0 at 0 and at NaN
  LSF_VMATH_INLINE T operator()(T dy, T x) const { return dy * (T(x > T(0)) - T(x < T(0))); }
};

template <typename T>
struct TanhBackF {  // s = y
  LSF_VMATH_INLINE T operator()(T dy, T y) const { return dy * (T(1) - y * y); }
};

template <typename T>
struct SigmoidBackF {  // s = y
  LSF_VMATH_INLINE T operator()(T dy, T y) const { return dy * (T(1) - y) * y; }
};

template <typename T>
struct ReluBackF {  // s = x: zero where relu(x) ≤ 0 (NaN passes, as in PyTorch)
  LSF_VMATH_INLINE T operator()(T dy, T x) const { return x <= T(0) ? T(0) : dy; }
};

template <typename T>
struct ClampBackF {  // s = x: passes where lo ≤ x ≤ hi, bounds included
  T lo, hi;
  LSF_VMATH_INLINE T operator()(T dy, T x) const { return (x >= lo && x <= hi) ? dy : T(0); }
};

// d/dx x·Φ(x) = Φ(x) + x·φ(x).
template <typename T>
struct GeluBackF {  // s = x
  LSF_VMATH_INLINE T operator()(T dy, T x) const {
    if constexpr (std::is_same_v<T, float>) {
      // Φ + xφ = g·(½R + x/√(2π)) for x < 0 and 1 + g·(x/√(2π) − ½R) for x ≥ 0, g = e^{-x²/2}:
      // the factor that may be subnormal comes last (see NormalCdf).
      vmath::NormalCdf c = vmath::normal_cdf(x);
      float sg = (x * float(kInvSqrt2Pi) + (x < 0.0f ? c.half_r : -c.half_r)) * c.gauss;
      return dy * (x < 0.0f ? sg : 1.0f + sg);
    } else {
      T cdf = T(0.5) * std::erfc(-x * T(kSqrtHalf));
      T pdf = std::exp(T(-0.5) * x * x) * T(kInvSqrt2Pi);
      return dy * (cdf + x * pdf);
    }
  }
};

// d/dx x·σ(2u) = σ(2u) + 2x·σ(2u)(1 − σ(2u))·u', u' = √(2/π)(1 + 3κx²).
template <typename T>
struct GeluTanhBackF {  // s = x
  LSF_VMATH_INLINE T operator()(T dy, T x) const {
    T v = T(2) * gelu_tanh_inner(x);
    T s, ds;
    if constexpr (std::is_same_v<T, float>) {
      vmath::SigmoidPair p = vmath::sigmoid_and_derivative(v);
      s = p.s;
      ds = p.ds;
    } else {
      T e = std::exp(-std::abs(v));
      T q = T(1) / (T(1) + e);
      s = v >= T(0) ? q : e * q;
      ds = e * q * q;
    }
    T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluKappa) * x * x);
    return dy * (s + T(2) * x * ds * du);
  }
};

// ---------------------------------------------------------------------------------------------
// Drivers.

// The contiguous inner loops, one instantiation per functor; f32 ones get per-ISA clones.
template <typename T, typename F>
void loop1(T* __restrict y, const T* __restrict x, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}
template <typename T, typename F>
void loop2(T* __restrict dx, const T* __restrict dy, const T* __restrict s, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) dx[i] = f(dy[i], s[i]);
}
template <typename F>
LSF_SIMD_CLONES void loop1_f32(float* __restrict y, const float* __restrict x, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}
template <typename F>
LSF_SIMD_CLONES void loop2_f32(float* __restrict dx, const float* __restrict dy, const float* __restrict s,
                               int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) dx[i] = f(dy[i], s[i]);
}

// fn(begin, end) over [0, n) in chunks, on several threads when n is large.
template <typename Fn>
void parallel_chunks(int64_t n, Fn&& fn) {
  if (n < kParallelGrain) {
    fn(int64_t(0), n);
    return;
  }
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) fn(c * kChunk, std::min(n, (c + 1) * kChunk));
}

// y = √x for n floats. The compiler keeps a scalar sqrt call per element in this file (errno,
// see the top), so this uses SSE's sqrtps, IEEE-exact and present on every x86-64 CPU.
void sqrt_f32(float* __restrict y, const float* __restrict x, int64_t n) {
  int64_t i = 0;
#if defined(__x86_64__)
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) y[i] = std::sqrt(x[i]);
}

LSF_SIMD_CLONES void reciprocal_inplace_f32(float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / y[i];
}

// Which f32 functors are √x (1) or 1/√x (2): they run as sqrt_f32 (then 1/y), same values.
template <typename F>
constexpr int kSqrtKind = 0;
template <>
constexpr int kSqrtKind<SqrtF<float>> = 1;
template <>
constexpr int kSqrtKind<PowF<float, PowKind::Sqrt>> = 1;
template <>
constexpr int kSqrtKind<RsqrtF<float>> = 2;
template <>
constexpr int kSqrtKind<PowF<float, PowKind::Rsqrt>> = 2;

template <typename T, typename F>
void run1(T* __restrict y, const T* __restrict x, int64_t n, F f) {
  if constexpr (kSqrtKind<F> != 0) {
    sqrt_f32(y, x, n);
    if constexpr (kSqrtKind<F> == 2) reciprocal_inplace_f32(y, n);
  } else if constexpr (std::is_same_v<T, float>) {
    loop1_f32(y, x, n, f);
  } else {
    loop1(y, x, n, f);
  }
}
template <typename T, typename F>
void run2(T* __restrict dx, const T* __restrict dy, const T* __restrict s, int64_t n, F f) {
  if constexpr (std::is_same_v<T, float>) loop2_f32(dx, dy, s, n, f);
  else loop2(dx, dy, s, n, f);
}

// Strided operands: runs of up to kGather elements are copied into buffers on the stack and
// handed to the contiguous loop, so a view is computed by the same (vectorised) code as a
// dense tensor and gives bitwise the same values.
constexpr int64_t kGather = 512;

// A run of n elements at p with byte stride s: p itself when contiguous, else a copy in buf.
template <typename T>
const T* gather(const char* p, int64_t s, int64_t n, T* buf) {
  if (s == int64_t(sizeof(T))) return reinterpret_cast<const T*>(p);
  for (int64_t i = 0; i < n; ++i) buf[i] = *reinterpret_cast<const T*>(p + i * s);
  return buf;
}

template <typename T>
void scatter(char* p, int64_t s, int64_t n, const T* values) {
  for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p + i * s) = values[i];
}

// y = f(x): y contiguous, x any layout of the same shape.
template <typename T, typename F>
void apply(const Tensor& y, const Tensor& x, F f) {
  if (x.is_contiguous()) {
    T* yp = y.data_ptr<T>();
    const T* xp = x.data_ptr<T>();
    parallel_chunks(y.numel(), [&](int64_t begin, int64_t end) { run1(yp + begin, xp + begin, end - begin, f); });
    return;
  }
  for_each_run<2>({&y, &x}, [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
    T xbuf[kGather], ybuf[kGather];
    for (int64_t i = 0; i < n; i += kGather) {
      const int64_t m = std::min(kGather, n - i);
      const T* xs = gather(p[1] + i * s[1], s[1], m, xbuf);
      if (s[0] == int64_t(sizeof(T))) {
        run1(reinterpret_cast<T*>(p[0]) + i, xs, m, f);
      } else {
        run1(ybuf, xs, m, f);
        scatter(p[0] + i * s[0], s[0], m, ybuf);
      }
    }
  });
}

// dx = f(dy, s): dx contiguous, dy and s any layout of the same shape.
template <typename T, typename F>
void apply_backward(const Tensor& dx, const Tensor& dy, const Tensor& s, F f) {
  if (dy.is_contiguous() && s.is_contiguous()) {
    T* dxp = dx.data_ptr<T>();
    const T* dyp = dy.data_ptr<T>();
    const T* sp = s.data_ptr<T>();
    parallel_chunks(dx.numel(),
                    [&](int64_t begin, int64_t end) { run2(dxp + begin, dyp + begin, sp + begin, end - begin, f); });
    return;
  }
  for_each_run<3>({&dx, &dy, &s}, [&](std::array<char*, 3> p, std::array<int64_t, 3> st, int64_t n) {
    T dybuf[kGather], sbuf[kGather], dxbuf[kGather];
    for (int64_t i = 0; i < n; i += kGather) {
      const int64_t m = std::min(kGather, n - i);
      const T* dys = gather(p[1] + i * st[1], st[1], m, dybuf);
      const T* ss = gather(p[2] + i * st[2], st[2], m, sbuf);
      if (st[0] == int64_t(sizeof(T))) {
        run2(reinterpret_cast<T*>(p[0]) + i, dys, ss, m, f);
      } else {
        run2(dxbuf, dys, ss, m, f);
        scatter(p[0] + i * st[0], st[0], m, dxbuf);
      }
    }
  });
}

template <typename T>
void forward_float(UnaryOp op, const Tensor& y, const Tensor& x, double a, double b) {
  switch (op) {
    case UnaryOp::Neg: apply<T>(y, x, NegF<T>{}); break;
    case UnaryOp::Pow: with_pow<T>(a, [&](auto p) { apply<T>(y, x, p); }); break;
    case UnaryOp::Exp: apply<T>(y, x, ExpF<T>{}); break;
    case UnaryOp::Log: apply<T>(y, x, LogF<T>{}); break;
    case UnaryOp::Sqrt: apply<T>(y, x, SqrtF<T>{}); break;
    case UnaryOp::Rsqrt: apply<T>(y, x, RsqrtF<T>{}); break;
    case UnaryOp::Abs: apply<T>(y, x, AbsF<T>{}); break;
    case UnaryOp::Tanh: apply<T>(y, x, TanhF<T>{}); break;
    case UnaryOp::Sigmoid: apply<T>(y, x, SigmoidF<T>{}); break;
    case UnaryOp::Relu: apply<T>(y, x, ReluF<T>{}); break;
    case UnaryOp::Gelu: apply<T>(y, x, GeluF<T>{}); break;
    case UnaryOp::GeluTanh: apply<T>(y, x, GeluTanhF<T>{}); break;
    case UnaryOp::Clamp: apply<T>(y, x, ClampF<T>{clamp_bound_as<T>(a), clamp_bound_as<T>(b)}); break;
  }
}

template <typename T>
void forward_integer(UnaryOp op, const Tensor& y, const Tensor& x, double a, double b) {
  switch (op) {
    case UnaryOp::Neg: apply<T>(y, x, NegF<T>{}); break;
    case UnaryOp::Abs: apply<T>(y, x, AbsF<T>{}); break;
    case UnaryOp::Clamp: apply<T>(y, x, ClampF<T>{clamp_bound_as<T>(a), clamp_bound_as<T>(b)}); break;
    default:
      LSF_FAIL() << unary_op_name(op) << ": expected a floating-point tensor, got " << x.dtype();
  }
}

void unary_forward(UnaryOp op, const Tensor& y, const Tensor& x, double a, double b) {
  LSF_CHECK(y.shape() == x.shape() && y.dtype() == x.dtype() && y.is_contiguous())
      << "internal: " << unary_op_name(op) << " kernel got y " << y.shape() << " " << y.dtype() << " for x "
      << x.shape() << " " << x.dtype();
  const char* name = unary_op_name(op);
  if (is_floating(x.dtype())) {
    dispatch_float(x.dtype(), name, [&]<typename T>() { forward_float<T>(op, y, x, a, b); });
  } else {
    dispatch_numeric(x.dtype(), name, [&]<typename T>() { forward_integer<T>(op, y, x, a, b); });
  }
}

template <typename T>
void backward_float(UnaryOp op, const Tensor& dx, const Tensor& dy, const Tensor& s, double a, double b) {
  switch (op) {
    case UnaryOp::Neg: apply<T>(dx, dy, NegF<T>{}); break;
    case UnaryOp::Pow:
      if (a == 0.0) {
        apply_backward<T>(dx, dy, s, ZeroBackF<T>{});
      } else {
        with_pow<T>(a - 1.0, [&](auto p) { apply_backward<T>(dx, dy, s, PowBackF<T, decltype(p)>{T(a), p}); });
      }
      break;
    case UnaryOp::Exp: apply_backward<T>(dx, dy, s, ExpBackF<T>{}); break;
    case UnaryOp::Log: apply_backward<T>(dx, dy, s, LogBackF<T>{}); break;
    case UnaryOp::Sqrt: apply_backward<T>(dx, dy, s, SqrtBackF<T>{}); break;
    case UnaryOp::Rsqrt: apply_backward<T>(dx, dy, s, RsqrtBackF<T>{}); break;
    case UnaryOp::Abs: apply_backward<T>(dx, dy, s, AbsBackF<T>{}); break;
    case UnaryOp::Tanh: apply_backward<T>(dx, dy, s, TanhBackF<T>{}); break;
    case UnaryOp::Sigmoid: apply_backward<T>(dx, dy, s, SigmoidBackF<T>{}); break;
    case UnaryOp::Relu: apply_backward<T>(dx, dy, s, ReluBackF<T>{}); break;
    case UnaryOp::Gelu: apply_backward<T>(dx, dy, s, GeluBackF<T>{}); break;
    case UnaryOp::GeluTanh: apply_backward<T>(dx, dy, s, GeluTanhBackF<T>{}); break;
    case UnaryOp::Clamp: apply_backward<T>(dx, dy, s, ClampBackF<T>{clamp_bound_as<T>(a), clamp_bound_as<T>(b)}); break;
  }
}

void unary_backward(UnaryOp op, const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y, double a,
                    double b) {
  const char* name = unary_op_name(op);
  // neg's derivative is a constant; every other op reads the saved x or y.
  const Tensor& s = op == UnaryOp::Neg ? dy : unary_backward_uses_output(op) ? y : x;
  LSF_CHECK(s.defined()) << "internal: " << name << " backward is missing its saved "
                         << (unary_backward_uses_output(op) ? "output" : "input");
  LSF_CHECK(dx.shape() == dy.shape() && s.shape() == dy.shape() && dx.dtype() == dy.dtype() &&
            s.dtype() == dy.dtype() && dx.is_contiguous())
      << "internal: " << name << " backward got dx " << dx.shape() << " " << dx.dtype() << ", dy " << dy.shape()
      << " " << dy.dtype() << ", saved " << s.shape() << " " << s.dtype();
  dispatch_float(dy.dtype(), name, [&]<typename T>() { backward_float<T>(op, dx, dy, s, a, b); });
}

// ---- bias_gelu: y = gelu(x + bias) over rows of n, and its backward ----
// Rows are taken kBiasGeluRowBlock at a time (the unit of parallel work, and of the bias
// gradient's partial sums). A block's elements, flat, are formed as x + bias kGather at a time
// in a stack buffer and handed to the same contiguous loop as gelu itself. A block starts at a
// flat offset that is a multiple of 32·n, so every piece starts on a multiple of the vector
// width, as gelu's own chunks do: each element goes through the same vector (or, at the very
// end of the tensor, scalar tail) code as in gelu, and the values are gelu's bit for bit.
static_assert(kBiasGeluRowBlock % 16 == 0 && kGather % 16 == 0, "pieces must start on a vector boundary");

// Calls fn(i, j, len) for the runs that split m consecutive elements, the first at column j of
// rows of n, at the row ends: elements [i, i + len) are columns [j, j + len) of one row.
template <typename Fn>
inline void row_runs(int64_t j, int64_t m, int64_t n, Fn&& fn) {
  for (int64_t i = 0; i < m;) {
    const int64_t len = std::min(m - i, n - j);
    fn(i, j, len);
    i += len;
    j = j + len == n ? 0 : j + len;
  }
}

// u = x + b and p += d over len elements: at full vector width for f32 (the library itself is
// built for baseline x86-64; see simd.h), plain loops for f64.
LSF_SIMD_CLONES void add_run_f32(float* __restrict u, const float* __restrict x, const float* __restrict b,
                                 int64_t len) {
  for (int64_t k = 0; k < len; ++k) u[k] = x[k] + b[k];
}
LSF_SIMD_CLONES void accumulate_run_f32(float* __restrict p, const float* __restrict d, int64_t len) {
  for (int64_t k = 0; k < len; ++k) p[k] += d[k];
}
template <typename T>
void add_run(T* __restrict u, const T* __restrict x, const T* __restrict b, int64_t len) {
  if constexpr (std::is_same_v<T, float>) add_run_f32(u, x, b, len);
  else for (int64_t k = 0; k < len; ++k) u[k] = x[k] + b[k];
}
template <typename T>
void accumulate_run(T* __restrict p, const T* __restrict d, int64_t len) {
  if constexpr (std::is_same_v<T, float>) accumulate_run_f32(p, d, len);
  else for (int64_t k = 0; k < len; ++k) p[k] += d[k];
}

// Calls piece(offset, u, m, j) for consecutive pieces [offset, offset + m) of the flat rows
// [r0, r1) with u = x + bias over them; j is the piece's first column.
template <typename T, typename Piece>
inline void biased_pieces(const T* __restrict x, const T* __restrict bias, int64_t r0, int64_t r1, int64_t n,
                          Piece&& piece) {
  T u[kGather];
  int64_t j = 0;
  for (int64_t e = r0 * n, end = r1 * n; e < end; e += kGather) {
    const int64_t m = std::min(kGather, end - e);
    row_runs(j, m, n, [&](int64_t i, int64_t jj, int64_t len) { add_run(u + i, x + e + i, bias + jj, len); });
    piece(e, static_cast<const T*>(u), m, j);
    j = (j + m) % n;
  }
}

template <typename T, typename F>
void bias_act_forward(T* __restrict y, const T* __restrict x, const T* __restrict bias, int64_t rows, int64_t n,
                      F f) {
  const int64_t blocks = (rows + kBiasGeluRowBlock - 1) / kBiasGeluRowBlock;
#pragma omp parallel for schedule(static) if (rows * n >= kParallelGrain)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t r0 = blk * kBiasGeluRowBlock, r1 = std::min(rows, r0 + kBiasGeluRowBlock);
    biased_pieces(x, bias, r0, r1, n, [&](int64_t e, const T* u, int64_t m, int64_t) { run1(y + e, u, m, f); });
  }
}

// dx = f(dy, x + bias); each block of rows sums its dx into its own partial row (rows in
// order), and dbias sums the partial rows in block order: the bits depend on the block size
// only, not on the thread count.
template <typename T, typename F>
void bias_act_backward(T* __restrict dx, T* __restrict dbias, const T* __restrict dy, const T* __restrict x,
                       const T* __restrict bias, int64_t rows, int64_t n, F f) {
  const int64_t blocks = (rows + kBiasGeluRowBlock - 1) / kBiasGeluRowBlock;
  // From the CPU allocator (engine/scratch.h): counted while the call runs, given back after.
  const CpuScratch<T> partial_storage(size_t(blocks * n));  // each block clears its row
  T* const partial = partial_storage.data();
#pragma omp parallel for schedule(static) if (rows * n >= kParallelGrain)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    T* const part = partial + blk * n;
    std::fill(part, part + n, T(0));
    const int64_t r0 = blk * kBiasGeluRowBlock, r1 = std::min(rows, r0 + kBiasGeluRowBlock);
    biased_pieces(x, bias, r0, r1, n, [&](int64_t e, const T* u, int64_t m, int64_t j) {
      run2(dx + e, dy + e, u, m, f);
      row_runs(j, m, n, [&](int64_t i, int64_t jj, int64_t len) { accumulate_run(part + jj, dx + e + i, len); });
    });
  }
  // Column strips of the partial rows, each summed row after row (vectorised along the strip).
  constexpr int64_t kStrip = 256;
#pragma omp parallel for schedule(static) if (blocks * n >= kParallelGrain)
  for (int64_t j0 = 0; j0 < n; j0 += kStrip) {
    const int64_t len = std::min(kStrip, n - j0);
    std::copy(partial + j0, partial + j0 + len, dbias + j0);
    for (int64_t blk = 1; blk < blocks; ++blk) accumulate_run(dbias + j0, partial + blk * n + j0, len);
  }
}

void check_bias_gelu_op(UnaryOp op) {
  LSF_CHECK(op == UnaryOp::Gelu || op == UnaryOp::GeluTanh)
      << "internal: bias_gelu kernel called with op " << unary_op_name(op);
}

void bias_gelu_forward(UnaryOp op, const Tensor& y, const Tensor& x, const Tensor& bias) {
  check_bias_gelu_op(op);
  const int64_t n = x.size(-1);
  LSF_CHECK(x.is_contiguous() && y.is_contiguous() && bias.is_contiguous() && y.shape() == x.shape() &&
            bias.numel() == n && y.dtype() == x.dtype() && bias.dtype() == x.dtype())
      << "internal: bias_gelu kernel got y " << y.shape() << ", x " << x.shape() << ", bias " << bias.shape();
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  dispatch_float(x.dtype(), "bias_gelu", [&]<typename T>() {
    if (op == UnaryOp::Gelu) bias_act_forward(y.data_ptr<T>(), x.data_ptr<T>(), bias.data_ptr<T>(), rows, n, GeluF<T>{});
    else bias_act_forward(y.data_ptr<T>(), x.data_ptr<T>(), bias.data_ptr<T>(), rows, n, GeluTanhF<T>{});
  });
}

void bias_gelu_backward(UnaryOp op, const Tensor& dx, const Tensor& dbias, const Tensor& dy, const Tensor& x,
                        const Tensor& bias) {
  check_bias_gelu_op(op);
  const int64_t n = x.size(-1);
  LSF_CHECK(dx.is_contiguous() && dy.is_contiguous() && x.is_contiguous() && bias.is_contiguous() &&
            dbias.is_contiguous() && dx.shape() == x.shape() && dy.shape() == x.shape() && bias.numel() == n &&
            dbias.numel() == n)
      << "internal: bias_gelu backward kernel got dx " << dx.shape() << ", dy " << dy.shape() << ", x "
      << x.shape() << ", bias " << bias.shape() << ", dbias " << dbias.shape();
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  dispatch_float(x.dtype(), "bias_gelu", [&]<typename T>() {
    T* const dxp = dx.data_ptr<T>();
    T* const dbp = dbias.data_ptr<T>();
    if (op == UnaryOp::Gelu)
      bias_act_backward(dxp, dbp, dy.data_ptr<T>(), x.data_ptr<T>(), bias.data_ptr<T>(), rows, n, GeluBackF<T>{});
    else
      bias_act_backward(dxp, dbp, dy.data_ptr<T>(), x.data_ptr<T>(), bias.data_ptr<T>(), rows, n, GeluTanhBackF<T>{});
  });
}

}  // namespace

LSF_REGISTER_KERNEL(unary_forward_kernel, DeviceType::CPU, unary_forward);
LSF_REGISTER_KERNEL(unary_backward_kernel, DeviceType::CPU, unary_backward);
LSF_REGISTER_KERNEL(bias_gelu_forward_kernel, DeviceType::CPU, bias_gelu_forward);
LSF_REGISTER_KERNEL(bias_gelu_backward_kernel, DeviceType::CPU, bias_gelu_backward);

}  // namespace lsf::cpu
