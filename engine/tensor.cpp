// Tensor metadata, views without autograd (make_view), leaf bookkeeping (requires_grad, grad,
// set_data), the in-place writes copy_ / fill_, and the shared argument checks of ops.
#include "lsformer/engine/tensor.h"

#include <algorithm>

#include "lsformer/engine/autograd.h"
#include "lsformer/engine/core_kernels.h"

namespace lsf {

TensorImpl::TensorImpl(Storage s, int64_t off, Shape sh, Strides st, DType dt)
    : storage(std::move(s)), offset(off), shape(std::move(sh)), strides(std::move(st)), dtype(dt) {}

int64_t TensorImpl::numel() const { return shape_numel(shape); }

AutogradMeta& TensorImpl::autograd_meta() {
  if (!autograd) autograd = std::make_unique<AutogradMeta>();
  return *autograd;
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    LSF_CHECK(s >= 0) << "negative dimension in shape " << shape;
    LSF_CHECK(!__builtin_mul_overflow(n, s, &n))
        << "shape " << shape << " has more elements than a 64-bit count can hold";
  }
  // A zero dimension makes the count 0 whatever follows, but every product on the way was
  // checked, so later code may multiply the sizes of any prefix without overflow.
  return n;
}

size_t checked_nbytes(const Shape& shape, DType dtype, const std::string& what) {
  int64_t n = 1;
  for (int64_t s : shape) {
    LSF_CHECK(s >= 0) << what << ": negative dimension in shape " << shape;
    LSF_CHECK(!__builtin_mul_overflow(n, s, &n))
        << what << ": shape " << shape << " has more elements than a 64-bit count can hold";
  }
  uint64_t bytes = 0;
  LSF_CHECK(!__builtin_mul_overflow(uint64_t(n), uint64_t(dtype_size(dtype)), &bytes) && bytes <= kMaxTensorBytes)
      << what << ": shape " << shape << " of " << dtype << " needs " << n << " elements of " << dtype_size(dtype)
      << " bytes, more than the " << kMaxTensorBytes << "-byte limit of one tensor";
  return size_t(bytes);
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // a 0-d tensor accepts dim 0 and -1, as in PyTorch
  LSF_CHECK(dim >= -n && dim < n) << op << ": dimension " << dim << " is out of range for a "
                                  << ndim << "-d tensor (expected in [" << -n << ", " << n - 1
                                  << "])";
  return dim < 0 ? dim + n : dim;
}

#define LSF_REQUIRE_DEFINED(what) \
  LSF_CHECK(impl_ != nullptr) << what << ": the tensor is undefined (default-constructed or an absent gradient)"

const Shape& Tensor::shape() const { LSF_REQUIRE_DEFINED("shape"); return impl_->shape; }
const Strides& Tensor::strides() const { LSF_REQUIRE_DEFINED("strides"); return impl_->strides; }
int64_t Tensor::offset() const { LSF_REQUIRE_DEFINED("offset"); return impl_->offset; }
int64_t Tensor::dim() const { LSF_REQUIRE_DEFINED("dim"); return int64_t(impl_->shape.size()); }
int64_t Tensor::numel() const { LSF_REQUIRE_DEFINED("numel"); return impl_->numel(); }
DType Tensor::dtype() const { LSF_REQUIRE_DEFINED("dtype"); return impl_->dtype; }
Device Tensor::device() const { LSF_REQUIRE_DEFINED("device"); return impl_->storage->device(); }
const Storage& Tensor::storage() const { LSF_REQUIRE_DEFINED("storage"); return impl_->storage; }
TensorOptions Tensor::options() const { return TensorOptions(dtype()).device(device()); }

int64_t Tensor::size(int64_t d) const {
  LSF_CHECK(dim() > 0) << "size: a 0-d tensor has no dimensions";
  return impl_->shape[wrap_dim(d, dim(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  LSF_CHECK(dim() > 0) << "stride: a 0-d tensor has no dimensions";
  return impl_->strides[wrap_dim(d, dim(), "stride")];
}

bool Tensor::is_contiguous() const {
  if (impl_->numel() == 0) return true;  // no element to lay out (as PyTorch)
  int64_t expected = 1;
  for (size_t i = impl_->shape.size(); i-- > 0;) {
    if (impl_->shape[i] == 1) continue;  // size-1 dims may have any stride
    if (impl_->strides[i] != expected) return false;
    expected *= impl_->shape[i];
  }
  return true;
}

bool is_non_overlapping_and_dense(const Shape& shape, const Strides& strides) {
  if (std::find(shape.begin(), shape.end(), int64_t(0)) != shape.end()) return true;  // no element to lay out
  std::vector<size_t> order(shape.size());  // dims, innermost (smallest stride) first
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t expected = 1;
  for (size_t d : order) {
    if (shape[d] == 1) continue;  // size-1 dims may have any stride
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

bool Tensor::is_non_overlapping_and_dense() const {
  return lsf::is_non_overlapping_and_dense(impl_->shape, impl_->strides);
}

void* Tensor::raw_data() const {
  LSF_REQUIRE_DEFINED("data_ptr");
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * int64_t(dtype_size(impl_->dtype));
}

bool Tensor::requires_grad() const { return impl_ && impl_->autograd && impl_->autograd->requires_grad; }

Tensor& Tensor::requires_grad_(bool on) {
  LSF_REQUIRE_DEFINED("requires_grad_");
  LSF_CHECK(!on || is_floating(dtype()))
      << "requires_grad_: only floating-point tensors can require gradients, got " << dtype();
  LSF_CHECK(is_leaf() || on)
      << "requires_grad_: cannot turn off gradients of a non-leaf tensor; use detach()";
  impl_->autograd_meta().requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  LSF_CHECK(is_leaf() || retains_grad())
      << "grad: this tensor is not a leaf (it is output " << output_nr() << " of '" << grad_fn()->name()
      << "'), and a non-leaf's gradient is not kept; call retain_grad() on it before backward, or read "
         "the gradient of the leaf it was computed from";
  if (!impl_ || !impl_->autograd || !impl_->autograd->grad) return Tensor();
  return Tensor(impl_->autograd->grad);
}

void Tensor::retain_grad() const {
  LSF_REQUIRE_DEFINED("retain_grad");
  LSF_CHECK(requires_grad()) << "retain_grad: the tensor does not require grad, so no backward pass reaches it";
  if (is_leaf() || retains_grad()) return;  // leaves always keep their gradient
  impl_->autograd->retains_grad = true;
  grad_fn()->retain_output(output_nr(), impl_);
}

bool Tensor::retains_grad() const { return impl_ && impl_->autograd && impl_->autograd->retains_grad; }

void Tensor::set_grad(const Tensor& g) const {
  LSF_REQUIRE_DEFINED("set_grad");
  if (g.defined()) {
    LSF_CHECK(g.shape() == shape() && g.dtype() == dtype() && g.device() == device())
        << "set_grad: gradient of shape " << g.shape() << " (" << g.dtype() << ", " << g.device()
        << ") does not match the tensor's " << shape() << " (" << dtype() << ", " << device() << ")";
  }
  impl_->autograd_meta().grad = g.defined() ? g.impl_ptr() : nullptr;
}

bool Tensor::is_leaf() const { return !impl_ || !impl_->autograd || !impl_->autograd->grad_fn; }

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  return (impl_ && impl_->autograd) ? impl_->autograd->grad_fn : none;
}

int Tensor::output_nr() const { return (impl_ && impl_->autograd) ? impl_->autograd->output_nr : 0; }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  LSF_REQUIRE_DEFINED("backward");
  LSF_CHECK(requires_grad()) << "backward: the tensor does not require grad (no input of the "
                                "computation that produced it requires grad)";
  Tensor g = gradient;
  if (!g.defined()) {
    LSF_CHECK(numel() == 1) << "backward: a gradient can be created implicitly only for a "
                               "one-element output, this one has shape "
                            << shape() << "; pass backward(gradient)";
    g = empty(shape(), options());
    fill_kernel(device(), g, 1.0);
  }
  LSF_CHECK(g.shape() == shape() && g.dtype() == dtype() && g.device() == device())
      << "backward: gradient of shape " << g.shape() << " (" << g.dtype() << ", " << g.device()
      << ") does not match the output's " << shape() << " (" << dtype() << ", " << device() << ")";
  autograd::run_backward({*this}, {g}, retain_graph);
}

Tensor Tensor::detach() const {
  LSF_REQUIRE_DEFINED("detach");
  return Tensor(std::make_shared<TensorImpl>(impl_->storage, impl_->offset, impl_->shape,
                                             impl_->strides, impl_->dtype));
}

namespace {
// src seen with `shape` (NumPy broadcasting: size-1 and missing leading dims get stride 0), not
// recorded by autograd. The differentiable form is Tensor::expand (ops/view.cpp).
Tensor broadcast_view(const Tensor& src, const Shape& shape, const char* op) {
  const int64_t extra = int64_t(shape.size()) - src.dim();
  LSF_CHECK(extra >= 0) << op << ": source shape " << src.shape() << " cannot be broadcast to " << shape;
  Strides strides(shape.size(), 0);
  for (int64_t d = 0; d < src.dim(); ++d) {
    const int64_t size = src.shape()[d], want = shape[d + extra];
    LSF_CHECK(size == want || size == 1) << op << ": source shape " << src.shape() << " cannot be broadcast to " << shape;
    strides[d + extra] = size == want ? src.strides()[d] : 0;
  }
  return make_view(src, shape, strides, src.offset());
}

void check_inplace_allowed(const Tensor& t, const char* op) {
  LSF_CHECK(t.defined()) << op << ": the tensor is undefined";
  LSF_CHECK(!(grad_mode_enabled() && t.requires_grad()))
      << op << ": in-place write to a tensor that requires grad; do it under lsf::NoGradGuard "
               "(e.g. an optimizer step) or on a detach()ed tensor";
}
}  // namespace

const Tensor& Tensor::copy_(const Tensor& src) const {
  check_inplace_allowed(*this, "copy_");
  LSF_CHECK(src.defined()) << "copy_: the source tensor is undefined";
  LSF_CHECK(src.device() == device()) << "copy_: source on " << src.device()
                                      << ", destination on " << device()
                                      << "; use to(device) to move between devices";
  copy_kernel(device(), *this, src.shape() == shape() ? src : broadcast_view(src, shape(), "copy_"));
  impl_->storage->bump_version();
  return *this;
}

const Tensor& Tensor::fill_(double value) const {
  check_inplace_allowed(*this, "fill_");
  fill_kernel(device(), *this, value);
  impl_->storage->bump_version();
  return *this;
}

void Tensor::set_data(const Tensor& src) const {
  LSF_REQUIRE_DEFINED("set_data");
  LSF_CHECK(src.defined()) << "set_data: the source tensor is undefined";
  LSF_CHECK(is_leaf()) << "set_data: only leaf tensors can be given new data";
  LSF_CHECK(!requires_grad() || is_floating(src.dtype()))
      << "set_data: a tensor that requires grad needs floating-point data, got " << src.dtype();
  TensorImpl* s = src.impl();
  impl_->storage = s->storage;
  impl_->offset = s->offset;
  impl_->shape = s->shape;
  impl_->strides = s->strides;
  impl_->dtype = s->dtype;
  if (impl_->autograd) {
    auto& g = impl_->autograd->grad;
    if (g && (g->shape != s->shape || g->dtype != s->dtype || g->storage->device() != s->storage->device()))
      g = nullptr;
    impl_->autograd->grad_accumulator.reset();  // its metadata describes the old geometry
  }
}

Tensor empty(const Shape& shape, const TensorOptions& options) {
  const size_t nbytes = checked_nbytes(shape, options.dtype(), "empty");
  auto storage = std::make_shared<StorageImpl>(nbytes, options.device());
  Tensor t(std::make_shared<TensorImpl>(std::move(storage), 0, shape, contiguous_strides(shape),
                                        options.dtype()));
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}

Tensor make_view(const Tensor& base, Shape shape, Strides strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(base.storage(), offset, std::move(shape),
                                             std::move(strides), base.dtype()));
}

void check_defined(const char* op, std::initializer_list<const Tensor*> tensors) {
  int i = 0;
  for (const Tensor* t : tensors) {
    LSF_CHECK(t->defined()) << op << ": argument " << i << " is an undefined tensor";
    ++i;
  }
}

void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  check_defined(op, tensors);
  const Tensor* first = *tensors.begin();
  for (const Tensor* t : tensors)
    LSF_CHECK(t->device() == first->device())
        << op << ": tensors are on different devices (" << first->device() << " and "
        << t->device() << "); move them with to(device) first";
}

void check_same_dtype(const char* op, std::initializer_list<const Tensor*> tensors) {
  check_defined(op, tensors);
  const Tensor* first = *tensors.begin();
  for (const Tensor* t : tensors)
    LSF_CHECK(t->dtype() == first->dtype())
        << op << ": dtype mismatch (" << first->dtype() << " and " << t->dtype()
        << "); convert with to(dtype) first";
}

}  // namespace lsf
