// Tensor factories: constants, ranges, data from host memory, and random tensors.
#pragma once

#include <vector>

#include "lsformer/engine/random.h"
#include "lsformer/engine/tensor.h"

namespace lsf {

Tensor zeros(const Shape& shape, const TensorOptions& options = {});
Tensor ones(const Shape& shape, const TensorOptions& options = {});
Tensor full(const Shape& shape, double value, const TensorOptions& options = {});
// A 0-d tensor holding `value`.
Tensor scalar_tensor(double value, const TensorOptions& options = {});
// 0, 1, ..., end-1 as i64 (like torch.arange(5)).
Tensor arange(int64_t end, const TensorOptions& options = TensorOptions(kI64));
// start, start+step, ... < end (f32 unless options say otherwise). step may be negative.
Tensor arange(double start, double end, double step = 1.0, const TensorOptions& options = {});

// Uniform on [0, 1) and standard normal, from `generator` (the default one if null).
// The values are a function of the generator's (seed, offset): see engine/random.h.
Tensor rand(const Shape& shape, const TensorOptions& options = {}, Generator* generator = nullptr);
Tensor randn(const Shape& shape, const TensorOptions& options = {}, Generator* generator = nullptr);

// In-place random fills (initialisers). Not recorded by autograd.
const Tensor& uniform_(const Tensor& t, double low, double high, Generator* generator = nullptr);
const Tensor& normal_(const Tensor& t, double mean, double std, Generator* generator = nullptr);

Tensor empty_like(const Tensor& t);
// An uninitialised tensor of `shape` laid out in memory as a tensor with `strides` is, when that
// is a dense permutation of the dims (a transposed or head-split view), else row-major. A result
// or gradient written in its input's layout passes back through the input's view without a
// copy (PyTorch's empty_like with preserve_format makes the same choice).
Tensor empty_in_layout(const Shape& shape, const Strides& strides, const TensorOptions& options = {});
// empty_in_layout(t.shape(), t.strides(), t.options()).
Tensor empty_in_layout_of(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor rand_like(const Tensor& t, Generator* generator = nullptr);
Tensor randn_like(const Tensor& t, Generator* generator = nullptr);

// A tensor holding a copy of `count` elements of type `src_dtype` at `data`, converted to
// options.dtype(). Used by the typed tensor() below.
Tensor tensor_from_host(const void* data, DType src_dtype, int64_t count, const Shape& shape,
                        const TensorOptions& options);

// lsf::tensor(std::vector<float>{1, 2, 3}, {3}). The dtype follows T unless options say
// otherwise. The number of values must match the shape.
template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, const TensorOptions& options) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    return tensor_from_host(bytes.data(), kBool, int64_t(bytes.size()), shape, options);
  } else {
    return tensor_from_host(values.data(), dtype_v<T>, int64_t(values.size()), shape, options);
  }
}
template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape) {
  return tensor(values, shape, TensorOptions(dtype_v<T>));
}
// A 1-D tensor.
template <typename T>
Tensor tensor(const std::vector<T>& values) {
  return tensor(values, Shape{int64_t(values.size())});
}

}  // namespace lsf
