// Internal (not installed): the kernel table entries of the binary elementwise ops (ops/binary.h), which each
// backend registers (ops/cpu/binary.cpp, cuda/binary.cu).
#pragma once

#include "lsformer/engine/dispatch.h"
#include "lsformer/ops/binary.h"

namespace lsf {

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Eq, Ne, Lt, Le, Gt, Ge };

// out = op(a, b) elementwise; a and b are already broadcast to out's shape.
LSF_DECLARE_KERNEL(binary_kernel, void(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b));

}  // namespace lsf
