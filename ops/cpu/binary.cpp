// CPU binary elementwise kernels. Operands arrive broadcast to the output's shape.
#include "lsformer/ops/binary.h"
#include "lsformer/ops/kernels/binary.h"
#include "lsformer/ops/cpu/loops.h"

namespace lsf::cpu {
namespace {

template <typename T>
void arithmetic(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::Add: map<T, T, T>(out, [](T x, T y) { return T(x + y); }, a, b); break;
    case BinaryOp::Sub: map<T, T, T>(out, [](T x, T y) { return T(x - y); }, a, b); break;
    case BinaryOp::Mul: map<T, T, T>(out, [](T x, T y) { return T(x * y); }, a, b); break;
    case BinaryOp::Div: map<T, T, T>(out, [](T x, T y) { return T(x / y); }, a, b); break;
    default: break;
  }
}

template <typename T>
void compare(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::Eq: map<bool, T, T>(out, [](T x, T y) { return x == y; }, a, b); break;
    case BinaryOp::Ne: map<bool, T, T>(out, [](T x, T y) { return x != y; }, a, b); break;
    case BinaryOp::Lt: map<bool, T, T>(out, [](T x, T y) { return x < y; }, a, b); break;
    case BinaryOp::Le: map<bool, T, T>(out, [](T x, T y) { return x <= y; }, a, b); break;
    case BinaryOp::Gt: map<bool, T, T>(out, [](T x, T y) { return x > y; }, a, b); break;
    case BinaryOp::Ge: map<bool, T, T>(out, [](T x, T y) { return x >= y; }, a, b); break;
    default: break;
  }
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (op >= BinaryOp::Eq) {
    if (a.dtype() == kBool) {
      compare<bool>(op, out, a, b);
      return;
    }
    dispatch_numeric(a.dtype(), "comparison", [&]<typename T>() { compare<T>(op, out, a, b); });
  } else {
    dispatch_numeric(a.dtype(), "arithmetic", [&]<typename T>() { arithmetic<T>(op, out, a, b); });
  }
}

}  // namespace

LSF_REGISTER_KERNEL(binary_kernel, DeviceType::CPU, binary);

}  // namespace lsf::cpu
