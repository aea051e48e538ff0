// View ops: new geometry over the same storage, and their backward passes.
//
// Backward of a view maps the gradient back to the input's geometry: reshape back, permute by
// the inverse permutation, scatter a slice into zeros, or sum over broadcast dimensions.
#include <numeric>
#include <optional>

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/kernels/reduce.h"

namespace lsf {
namespace {

using autograd::SavedTensor;

// Resolves one -1 and checks the element count.
Shape infer_shape(const Shape& requested, int64_t numel, const char* op, const Shape& from) {
  Shape shape = requested;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      LSF_CHECK(infer_at < 0) << op << ": only one dimension can be -1, got " << requested;
      infer_at = int64_t(i);
    } else {
      LSF_CHECK(shape[i] >= 0) << op << ": invalid size " << shape[i] << " in " << requested;
      LSF_CHECK(!__builtin_mul_overflow(known, shape[i], &known))
          << op << ": shape " << requested << " has more elements than a 64-bit count can hold";
    }
  }
  if (infer_at >= 0) {
    LSF_CHECK(known != 0 && numel % known == 0)
        << op << ": shape " << requested << " is invalid for a tensor of shape " << from << " ("
        << numel << " elements)";
    shape[infer_at] = numel / known;
  }
  LSF_CHECK(shape_numel(shape) == numel) << op << ": shape " << requested
                                         << " is invalid for a tensor of shape " << from << " ("
                                         << numel << " elements)";
  return shape;
}

// Strides that let `shape` view memory laid out as (old_shape, old_strides), if any exist
// (the same rule as PyTorch's view: dims can be split or merged only within contiguous chunks).
std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides,
                                    const Shape& shape) {
  Strides strides(shape.size());
  if (old_shape.empty() || shape_numel(old_shape) == 0) return contiguous_strides(shape);
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = int64_t(old_shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    bool chunk_ends = tensor_d == 0 || (old_shape[tensor_d - 1] != 1 &&
                                        old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
      strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (tensor_d > 0) {
      chunk_base_stride = old_strides[tensor_d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

// Records a view whose backward only needs the input's shape.
Tensor record_view(const char* name, const Tensor& input, Tensor out,
                   std::function<Tensor(const Tensor& grad, const Shape& input_shape)> backward) {
  Shape input_shape = input.shape();
  autograd::record(name, {input}, {out},
                   [input_shape, backward](const TensorList& g, const autograd::NeedsGrad&) -> TensorList {
                     return {backward(g[0], input_shape)};
                   });
  return out;
}

}  // namespace

Tensor Tensor::view(const Shape& requested) const {
  Shape shape = infer_shape(requested, numel(), "view", this->shape());
  auto strides = view_strides(this->shape(), this->strides(), shape);
  LSF_CHECK(strides.has_value()) << "view: shape " << requested << " is not compatible with the "
                                 << "strides of a tensor of shape " << this->shape()
                                 << " (it spans non-contiguous memory); use reshape()";
  Tensor out = make_view(*this, shape, *strides, offset());
  return record_view("view", *this, out, [](const Tensor& g, const Shape& s) { return g.reshape(s); });
}

Tensor Tensor::reshape(const Shape& requested) const {
  Shape shape = infer_shape(requested, numel(), "reshape", this->shape());
  if (view_strides(this->shape(), this->strides(), shape)) return view(shape);
  return contiguous().view(shape);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  const int64_t n = dim();
  LSF_CHECK(int64_t(dims.size()) == n) << "permute: got " << dims.size() << " dims " << dims
                                       << " for a tensor of shape " << shape();
  std::vector<int64_t> perm(n), inverse(n);
  std::vector<bool> used(n, false);
  Shape shape(n);
  Strides strides(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    LSF_CHECK(!used[d]) << "permute: dimension " << d << " repeats in " << dims;
    used[d] = true;
    perm[i] = d;
    inverse[d] = i;
    shape[i] = this->shape()[d];
    strides[i] = this->strides()[d];
  }
  Tensor out = make_view(*this, shape, strides, offset());
  return record_view("permute", *this, out,
                     [inverse](const Tensor& g, const Shape&) { return g.permute(inverse); });
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t n = dim();
  if (n == 0) {  // a 0-d tensor accepts dims 0 and -1 only, as in PyTorch
    wrap_dim(dim0, 0, "transpose");
    wrap_dim(dim1, 0, "transpose");
    return view({});
  }
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[wrap_dim(dim0, n, "transpose")], perm[wrap_dim(dim1, n, "transpose")]);
  return permute(perm);
}

Tensor Tensor::t() const {
  LSF_CHECK(dim() <= 2) << "t: expects a tensor with at most 2 dimensions, got shape " << shape();
  return dim() < 2 ? view(shape()) : transpose(0, 1);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  LSF_CHECK(dim() > 0) << "slice: cannot slice a 0-d tensor";
  d = wrap_dim(d, dim(), "slice");
  LSF_CHECK(step > 0) << "slice: step must be positive, got " << step;
  const int64_t size = shape()[d];
  // Python slicing: negative bounds count from the end, out-of-range bounds clamp.
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape shape = this->shape();
  Strides strides = this->strides();
  shape[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  Tensor out = make_view(*this, shape, strides, offset() + start * this->strides()[d]);
  return record_view("slice", *this, out, [d, start, end, step](const Tensor& g, const Shape& s) {
    Tensor dx = zeros(s, g.options());
    dx.slice(d, start, end, step).copy_(g);
    return dx;
  });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  LSF_CHECK(dim() > 0) << "narrow: cannot narrow a 0-d tensor";
  d = wrap_dim(d, dim(), "narrow");
  const int64_t size = shape()[d];
  if (start < 0) start += size;
  LSF_CHECK(start >= 0 && length >= 0 && start + length <= size)
      << "narrow: start " << start << " and length " << length << " exceed dimension " << d
      << " of size " << size << " (shape " << shape() << ")";
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  LSF_CHECK(dim() > 0) << "select: cannot select from a 0-d tensor";
  d = wrap_dim(d, dim(), "select");
  const int64_t size = shape()[d];
  LSF_CHECK(index >= -size && index < size) << "select: index " << index << " is out of range for "
                                            << "dimension " << d << " of size " << size;
  if (index < 0) index += size;
  return narrow(d, index, 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& requested) const {
  const int64_t n = int64_t(requested.size()), old_n = dim();
  LSF_CHECK(n >= old_n) << "expand: target " << requested << " has fewer dimensions than shape "
                        << shape();
  Shape shape(n);
  Strides strides(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t j = i - (n - old_n);  // matching dim of the input, if any
    int64_t want = requested[i];
    if (j >= 0) {
      int64_t have = this->shape()[j];
      if (want == -1) want = have;
      LSF_CHECK(want >= 0) << "expand: invalid size " << requested[i] << " at dimension " << i
                           << " of " << requested << " (expanding shape " << this->shape() << ")";
      LSF_CHECK(have == want || have == 1) << "expand: cannot expand shape " << this->shape()
                                           << " to " << requested << " (dimension " << i
                                           << ": size " << have << " is not 1)";
      shape[i] = want;
      strides[i] = have == want ? this->strides()[j] : 0;
    } else {
      LSF_CHECK(want >= 0) << "expand: -1 is not allowed for the new leading dimension " << i
                           << " in " << requested;
      shape[i] = want;
      strides[i] = 0;
    }
  }
  if (shape == this->shape()) return view(shape);
  Tensor out = make_view(*this, shape, strides, offset());
  return record_view("expand", *this, out, [](const Tensor& g, const Shape& s) { return sum_to(g, s); });
}

Tensor Tensor::squeeze() const {
  Shape shape;
  for (int64_t s : this->shape())
    if (s != 1) shape.push_back(s);
  return reshape(shape);
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) {
    wrap_dim(d, 0, "squeeze");
    return view({});
  }
  d = wrap_dim(d, dim(), "squeeze");
  if (shape()[d] != 1) return view(shape());
  Shape shape = this->shape();
  Strides strides = this->strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  Tensor out = make_view(*this, shape, strides, offset());
  return record_view("squeeze", *this, out, [](const Tensor& g, const Shape& s) { return g.reshape(s); });
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape shape = this->shape();
  Strides strides = this->strides();
  int64_t stride = d < dim() ? strides[d] * shape[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  Tensor out = make_view(*this, shape, strides, offset());
  return record_view("unsqueeze", *this, out, [](const Tensor& g, const Shape& s) { return g.reshape(s); });
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) {
    wrap_dim(start_dim, 0, "flatten");
    wrap_dim(end_dim, 0, "flatten");
    return reshape({1});
  }
  start_dim = wrap_dim(start_dim, dim(), "flatten");
  end_dim = wrap_dim(end_dim, dim(), "flatten");
  LSF_CHECK(start_dim <= end_dim) << "flatten: start_dim " << start_dim << " is after end_dim " << end_dim;
  Shape shape(this->shape().begin(), this->shape().begin() + start_dim);
  int64_t merged = 1;
  for (int64_t i = start_dim; i <= end_dim; ++i) merged *= this->shape()[i];
  shape.push_back(merged);
  shape.insert(shape.end(), this->shape().begin() + end_dim + 1, this->shape().end());
  return reshape(shape);
}

}  // namespace lsf
