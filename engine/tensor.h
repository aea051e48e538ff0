// Tensor: a shared handle to {storage, offset, shape, strides, dtype, device, autograd meta}.
//
// Copying a Tensor copies the handle, never the data (like torch.Tensor in Python). Views share
// storage; offset and strides are counted in elements. A default-constructed Tensor is
// "undefined" (no storage), the way an absent gradient is represented.
//
// Layering: the copies and conversions (contiguous, clone, to, item, to_vector, copy_) are
// defined in the engine (engine/copy.cpp, engine/tensor.cpp) and use only the engine's own
// kernels. The views (view, reshape, permute, expand, ...) and the libtorch-style math methods
// (x.sum(), x.matmul(w), ...) are declared here, on the class users hold, but defined in ops/
// (ops/view.cpp, ops/tensor_methods.cpp), because their backward passes need ops' maths. No
// engine/*.cpp calls them, so the engine's objects link without ops/ (tests/layering.cmake).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lsformer/engine/device.h"
#include "lsformer/engine/dtype.h"
#include "lsformer/engine/storage.h"

namespace lsf {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

namespace autograd {
class Node;
}

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d) {}
  TensorOptions(Device d) : device_(d) {}
  TensorOptions dtype(DType d) const { auto o = *this; o.dtype_ = d; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r) const { auto o = *this; o.requires_grad_ = r; return o; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool requires_grad() const { return requires_grad_; }

 private:
  DType dtype_ = kF32;
  Device device_ = kCPU;
  bool requires_grad_ = false;
};

class TensorImpl;
class Tensor;
struct ValuesIndices;  // ops/reduce.h: what Tensor::max(dim) / min(dim) return

// What autograd keeps per tensor. Allocated only for tensors that take part in autograd.
struct AutogradMeta {
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;                // accumulated gradient of a leaf
  std::shared_ptr<autograd::Node> grad_fn;         // the node that produced this tensor
  int output_nr = 0;                               // which output of grad_fn it is
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaf: its AccumulateGrad node, if alive
  bool retains_grad = false;                       // non-leaf: retain_grad() was called
};

class TensorImpl {
 public:
  TensorImpl(Storage storage, int64_t offset, Shape shape, Strides strides, DType dtype);

  Storage storage;
  int64_t offset = 0;  // elements
  Shape shape;
  Strides strides;     // elements
  DType dtype;
  std::unique_ptr<AutogradMeta> autograd;

  int64_t numel() const;
  AutogradMeta& autograd_meta();  // creates it on first use
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& sizes() const { return shape(); }
  int64_t size(int64_t dim) const;  // negative dims count from the end
  const Strides& strides() const;
  int64_t stride(int64_t dim) const;
  int64_t offset() const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  TensorOptions options() const;  // dtype and device (not requires_grad)
  bool is_contiguous() const;
  // Whether the elements fill a block of numel() slots without gaps or overlaps in some order
  // of the dims: a contiguous tensor, or a permutation of one (a transposed or head-split view).
  bool is_non_overlapping_and_dense() const;
  size_t element_size() const { return dtype_size(dtype()); }
  size_t nbytes() const { return size_t(numel()) * element_size(); }
  const Storage& storage() const;
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // Typed pointer to the first element (checks the dtype). Host memory only for CPU tensors.
  template <typename T>
  T* data_ptr() const {
    LSF_CHECK(dtype() == dtype_v<T>) << "data_ptr: tensor has dtype " << dtype() << ", asked for "
                                     << dtype_v<T>;
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;  // first element, any dtype

  // ---- autograd ----
  bool requires_grad() const;
  // Marks a leaf as requiring grad. Only floating-point leaves may require grad.
  Tensor& requires_grad_(bool on = true);
  // The gradient a backward pass accumulated: undefined until one reaches this tensor. Only
  // leaves keep theirs, and non-leaves on which retain_grad() was called; asking a non-leaf that
  // does not retain its gradient is an error (libtorch warns and returns an undefined tensor,
  // which reads later as a missing gradient instead of a misuse).
  Tensor grad() const;
  // Keeps this non-leaf's gradient in grad() from the next backward on, summed across backward
  // calls as a leaf's is (a no-op on a leaf). The tensor must require grad.
  void retain_grad() const;
  bool retains_grad() const;  // a non-leaf on which retain_grad() was called
  void set_grad(const Tensor& grad) const;
  bool is_leaf() const;       // not produced by a recorded op
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  int output_nr() const;
  // Backpropagates from this tensor. `gradient` may be omitted only for a one-element tensor.
  // Unless retain_graph, the graph's saved tensors are freed as it runs.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // Same data, cut from the graph: never requires grad.
  Tensor detach() const;

  // ---- views (share storage; differentiable) — defined in ops/view.cpp ----
  Tensor view(const Shape& shape) const;       // needs compatible strides; one -1 allowed
  Tensor reshape(const Shape& shape) const;    // a view when possible, else a copy
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;                            // transpose of a ≤2-D tensor
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;  // Python-style bounds
  Tensor select(int64_t dim, int64_t index) const;  // removes `dim`
  Tensor expand(const Shape& shape) const;     // -1 keeps a size; new dims go in front
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  Tensor squeeze() const;                      // every size-1 dim
  Tensor squeeze(int64_t dim) const;           // that dim if it has size 1
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;

  // ---- copies and conversions (differentiable) — engine/copy.cpp ----
  Tensor contiguous() const;  // itself when already contiguous
  Tensor clone() const;       // always a new contiguous buffer
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor to(const TensorOptions& options) const;
  template <typename T> T item() const;                 // the value of a one-element tensor
  template <typename T> std::vector<T> to_vector() const;  // all values, row-major

  // ---- maths as libtorch's methods: thin forwards to the free functions of ops/ (defined in
  // ops/tensor_methods.cpp), so that ported PyTorch code reads the same: x.sum(), x.mean({1}),
  // x.matmul(w), x.softmax(-1), x.masked_fill(m, v). Include the op's header (or
  // <lsformer/lsformer.h>) for the types some of them return. ----
  Tensor sum() const;
  Tensor sum(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor amax(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor amin(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  ValuesIndices max(int64_t dim, bool keepdim = false) const;  // ops/reduce.h
  ValuesIndices min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  Tensor var(const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor abs() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor gelu() const;  // exact (erf) form
  Tensor pow(double exponent) const;
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;
  Tensor add(const Tensor& other) const;
  Tensor add(double other) const;
  Tensor sub(const Tensor& other) const;
  Tensor sub(double other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(double other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(double other) const;
  Tensor eq(const Tensor& other) const;
  Tensor eq(double other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(double other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(double other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(double other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(double other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(double other) const;
  Tensor masked_fill(const Tensor& mask, double value) const;
  Tensor where(const Tensor& condition, const Tensor& other) const;  // condition ? *this : other
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& sizes, int64_t dim = 0) const;

  // ---- in-place writes (not recorded by autograd; for optimizers and initialisers) ----
  // const like every method here: they change the data, not the handle.
  // Refused on a tensor that requires grad while grad mode is on (as in PyTorch).
  const Tensor& copy_(const Tensor& src) const;  // broadcasts src; converts dtype
  const Tensor& fill_(double value) const;
  const Tensor& zero_() const { return fill_(0.0); }
  // Makes this tensor (every handle to it) refer to `src`'s data, geometry, dtype and device,
  // like PyTorch's `t.data = src`. Leaves only; requires_grad is kept, a gradient of a different
  // shape, dtype or device is dropped. Module::to(device) uses it so that layers' handles stay valid.
  void set_data(const Tensor& src) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

using TensorList = std::vector<Tensor>;

// ---- construction (engine/tensor.cpp and ops/factory.cpp) ----
// Uninitialised contiguous tensor.
Tensor empty(const Shape& shape, const TensorOptions& options = {});
// t's data, contiguous and cut from the graph (no autograd record, a copy only when t is not
// contiguous); undefined stays undefined. What an op hands to its kernels.
Tensor contiguous_detached(const Tensor& t);
// A view of `base`'s storage with the given geometry; not recorded by autograd.
Tensor make_view(const Tensor& base, Shape shape, Strides strides, int64_t offset);
Strides contiguous_strides(const Shape& shape);
// Whether elements of this geometry fill a block of numel slots without gaps or overlaps in some
// order of the dims (Tensor::is_non_overlapping_and_dense; empty_in_layout's test).
bool is_non_overlapping_and_dense(const Shape& shape, const Strides& strides);
// The engine's one checked shape product: the element count of `shape`, throwing an lsf::Error
// that names the shape when a dimension is negative or the product overflows int64.
int64_t shape_numel(const Shape& shape);
// The largest tensor the engine allocates, in bytes (2^62: every byte offset and every byte
// count then fits in int64 with room for alignment rounding).
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 62;
// Bytes of a contiguous tensor of `shape` and `dtype`, checked: throws naming `what` and the
// shape when the product overflows or exceeds kMaxTensorBytes. Every allocation and every size
// read from a file goes through it, so no wrapped product can under-allocate a tensor.
size_t checked_nbytes(const Shape& shape, DType dtype, const std::string& what);
// Wraps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// Prints like PyTorch: tensor([[1.0000, 2.0000], ...], shape={2, 2}, dtype=f32).
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Shared argument checks for ops: all tensors defined, on one device, of one dtype.
void check_defined(const char* op, std::initializer_list<const Tensor*> tensors);
void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);
void check_same_dtype(const char* op, std::initializer_list<const Tensor*> tensors);

}  // namespace lsf
