// Element types. f32 is the default; f64 serves gradient checks; bf16 and f16 are storage
// formats on the CPU (convert with .to(kF32) to compute) and compute formats on CUDA.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <type_traits>

#include "lsformer/engine/error.h"

namespace lsf {

enum class DType : uint8_t { F32, F64, BF16, F16, I32, I64, U8, Bool };
constexpr int kNumDTypes = 8;

constexpr DType kF32 = DType::F32;
constexpr DType kF64 = DType::F64;
constexpr DType kBF16 = DType::BF16;
constexpr DType kF16 = DType::F16;
constexpr DType kI32 = DType::I32;
constexpr DType kI64 = DType::I64;
constexpr DType kU8 = DType::U8;
constexpr DType kBool = DType::Bool;

// bfloat16: the top 16 bits of an IEEE float. Conversion rounds to nearest, ties to even;
// NaN stays NaN.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(from_float(f)) {}
  operator float() const { return std::bit_cast<float>(uint32_t(bits) << 16); }
  static uint16_t from_float(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
  }
};

// IEEE half precision (binary16), round to nearest even, with subnormals, inf and NaN.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(from_float(f)) {}
  operator float() const { return to_float(bits); }
  static uint16_t from_float(float f);
  static float to_float(uint16_t h);
};

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::BF16: case DType::F16: return 2;
    case DType::U8: case DType::Bool: return 1;
  }
  return 0;
}
constexpr bool is_floating(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::BF16 || t == DType::F16;
}
constexpr bool is_integral(DType t) { return !is_floating(t); }  // bool counts as integral
const char* dtype_name(DType t);  // "f32", "i64", ... (as in error messages and printing)
std::ostream& operator<<(std::ostream& os, DType t);

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BF16; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::F16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::I32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::I64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::U8; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <typename T> constexpr DType dtype_v = dtype_of<T>::value;

// Calls fn.template operator()<T>() with the C++ type of `t`:
//   dispatch_all(t, [&]<typename T>() { ... });
template <typename Fn>
decltype(auto) dispatch_all(DType t, Fn&& fn) {
  switch (t) {
    case DType::F32: return fn.template operator()<float>();
    case DType::F64: return fn.template operator()<double>();
    case DType::BF16: return fn.template operator()<BFloat16>();
    case DType::F16: return fn.template operator()<Half>();
    case DType::I32: return fn.template operator()<int32_t>();
    case DType::I64: return fn.template operator()<int64_t>();
    case DType::U8: return fn.template operator()<uint8_t>();
    case DType::Bool: return fn.template operator()<bool>();
  }
  LSF_FAIL() << "unknown dtype " << int(t);
}

// The CPU compute types: f32 and f64. `op` names the caller in the error for other dtypes.
template <typename Fn>
decltype(auto) dispatch_float(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::F32: return fn.template operator()<float>();
    case DType::F64: return fn.template operator()<double>();
    default: break;
  }
  LSF_FAIL() << op << ": expected a f32 or f64 tensor on the CPU, got " << dtype_name(t)
             << (t == DType::BF16 || t == DType::F16 ? " (a storage format here: call .to(kF32) first)" : "");
}

// Float compute types plus the integer types that arithmetic makes sense for.
template <typename Fn>
decltype(auto) dispatch_numeric(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::F32: return fn.template operator()<float>();
    case DType::F64: return fn.template operator()<double>();
    case DType::I32: return fn.template operator()<int32_t>();
    case DType::I64: return fn.template operator()<int64_t>();
    case DType::U8: return fn.template operator()<uint8_t>();
    default: break;
  }
  LSF_FAIL() << op << ": dtype " << dtype_name(t) << " is not supported on the CPU"
             << (t == DType::BF16 || t == DType::F16 ? " (a storage format here: call .to(kF32) first)" : "");
}

// Index tensors (gather, embedding, cross_entropy targets): i32 or i64.
template <typename Fn>
decltype(auto) dispatch_index(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::I32: return fn.template operator()<int32_t>();
    case DType::I64: return fn.template operator()<int64_t>();
    default: break;
  }
  LSF_FAIL() << op << ": expected an index tensor of dtype i64 or i32, got " << dtype_name(t);
}

// Converting between element types the way static_cast does, through float for bf16/f16.
template <typename To, typename From>
inline To convert_scalar(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, BFloat16> || std::is_same_v<From, Half>) {
    return convert_scalar<To>(float(v));
  } else if constexpr (std::is_same_v<To, BFloat16> || std::is_same_v<To, Half>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace lsf
