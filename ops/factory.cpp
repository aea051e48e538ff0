#include "lsformer/ops/factory.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "lsformer/engine/autograd.h"
#include "lsformer/engine/core_kernels.h"
#include "lsformer/ops/kernels/random.h"

namespace lsf {

LSF_DEFINE_KERNEL(uniform_kernel, void(const Tensor& out, GeneratorState state, double low, double high));
LSF_DEFINE_KERNEL(normal_kernel, void(const Tensor& out, GeneratorState state, double mean, double std));

namespace {
Tensor finish(Tensor t, const TensorOptions& options) {
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}
TensorOptions without_grad(const TensorOptions& o) { return o.requires_grad(false); }
}  // namespace

Tensor full(const Shape& shape, double value, const TensorOptions& options) {
  Tensor t = empty(shape, without_grad(options));
  fill_kernel(t.device(), t, value);
  return finish(t, options);
}
Tensor zeros(const Shape& shape, const TensorOptions& options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, const TensorOptions& options) { return full(shape, 1.0, options); }
Tensor scalar_tensor(double value, const TensorOptions& options) { return full({}, value, options); }

Tensor arange(int64_t end, const TensorOptions& options) { return arange(0.0, double(end), 1.0, options); }

Tensor arange(double start, double end, double step, const TensorOptions& options) {
  LSF_CHECK(step != 0) << "arange: step must be nonzero";
  LSF_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step))
      << "arange: bounds must be finite, got start " << start << ", end " << end << ", step " << step;
  LSF_CHECK((end - start) / step >= 0) << "arange: step " << step << " moves away from end " << end
                                        << " (start " << start << ")";
  const double count = std::ceil((end - start) / step);
  // Checked in double first: converting a count beyond int64 to an integer is undefined.
  LSF_CHECK(count <= double(kMaxTensorBytes / sizeof(double)))
      << "arange: start " << start << ", end " << end << ", step " << step << " would give " << count
      << " elements, more than one tensor can hold";
  int64_t n = int64_t(count);
  checked_nbytes({n}, options.dtype(), "arange");
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = start + double(i) * step;
  return tensor_from_host(values.data(), kF64, n, {n}, options);
}

Tensor tensor_from_host(const void* data, DType src_dtype, int64_t count, const Shape& shape,
                        const TensorOptions& options) {
  LSF_CHECK(shape_numel(shape) == count) << "tensor: " << count << " values do not fill shape "
                                         << shape << " (" << shape_numel(shape) << " elements)";
  // Wrap the caller's memory in a CPU tensor without copying, then convert into our own.
  const size_t nbytes = checked_nbytes(shape, src_dtype, "tensor");
  auto host = std::make_shared<StorageImpl>(nbytes, kCPU);
  // An empty tensor's source may be null (an empty std::vector's data()), which memcpy may not
  // be given even for zero bytes (UBSan: nonnull argument).
  if (nbytes > 0) std::memcpy(host->data(), data, nbytes);
  Tensor src(std::make_shared<TensorImpl>(host, 0, shape, contiguous_strides(shape), src_dtype));
  Tensor out = src.to(options.dtype()).to(options.device());
  if (out.is_same(src)) out = src;
  return finish(out, options);
}

const Tensor& uniform_(const Tensor& t, double low, double high, Generator* generator) {
  LSF_CHECK(t.defined() && is_floating(t.dtype())) << "uniform_: expected a floating-point tensor";
  LSF_CHECK(low <= high) << "uniform_: low " << low << " is greater than high " << high;
  Generator& g = generator ? *generator : default_generator();
  NoGradGuard no_grad;
  Tensor target = t.is_contiguous() ? t : empty(t.shape(), t.options());
  uniform_kernel(t.device(), target, g.reserve(uniform_blocks(target)), low, high);
  if (!target.is_same(t)) t.copy_(target);
  t.storage()->bump_version();
  return t;
}

const Tensor& normal_(const Tensor& t, double mean, double std, Generator* generator) {
  LSF_CHECK(t.defined() && is_floating(t.dtype())) << "normal_: expected a floating-point tensor";
  LSF_CHECK(std >= 0) << "normal_: std must be non-negative, got " << std;
  Generator& g = generator ? *generator : default_generator();
  NoGradGuard no_grad;
  Tensor target = t.is_contiguous() ? t : empty(t.shape(), t.options());
  normal_kernel(t.device(), target, g.reserve(normal_blocks(target)), mean, std);
  if (!target.is_same(t)) t.copy_(target);
  t.storage()->bump_version();
  return t;
}

Tensor rand(const Shape& shape, const TensorOptions& options, Generator* generator) {
  Tensor t = empty(shape, without_grad(options));
  uniform_(t, 0.0, 1.0, generator);
  return finish(t, options);
}

Tensor randn(const Shape& shape, const TensorOptions& options, Generator* generator) {
  Tensor t = empty(shape, without_grad(options));
  normal_(t, 0.0, 1.0, generator);
  return finish(t, options);
}

Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.options()); }

Tensor empty_in_layout(const Shape& shape, const Strides& strides, const TensorOptions& options) {
  if (!is_non_overlapping_and_dense(shape, strides)) return empty(shape, options);  // plain row-major
  const int64_t n = int64_t(shape.size());
  std::vector<int64_t> order(n);  // dims, outermost (largest stride) first
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return strides[i] > strides[j]; });
  // A row-major block of the dims in that order, viewed back in the caller's dim order (an
  // engine view: no autograd, and nothing from ops/view.cpp, so the parsers' fuzz build, which
  // compiles this file without the ops, links).
  Shape stored(n);
  for (int64_t i = 0; i < n; ++i) stored[i] = shape[order[i]];
  const Strides packed = contiguous_strides(stored);
  Strides out(n);
  for (int64_t i = 0; i < n; ++i) out[order[i]] = packed[i];
  return make_view(empty(stored, options), shape, out, 0);
}

Tensor empty_in_layout_of(const Tensor& t) { return empty_in_layout(t.shape(), t.strides(), t.options()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.options()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.options()); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.options()); }
Tensor rand_like(const Tensor& t, Generator* g) { return rand(t.shape(), t.options(), g); }
Tensor randn_like(const Tensor& t, Generator* g) { return randn(t.shape(), t.options(), g); }

}  // namespace lsf
