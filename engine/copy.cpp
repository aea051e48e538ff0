// Copies and conversions: contiguous, clone, to(dtype), to(device), item, to_vector.
//
// These Tensor methods live in the engine because they need nothing but the engine's own
// kernels (copy_kernel, cross_device_copy_kernel: engine/core_kernels.h) and autograd::record;
// the engine itself relies on them (safetensors writes host-contiguous bytes).
#include "lsformer/engine/autograd.h"
#include "lsformer/engine/core_kernels.h"

namespace lsf {

Tensor contiguous_detached(const Tensor& t) {
  if (!t.defined()) return t;
  return t.is_contiguous() ? t.detach() : t.detach().contiguous();
}

Tensor Tensor::clone() const {
  LSF_CHECK(defined()) << "clone: the tensor is undefined";
  Tensor out = empty(shape(), options());
  copy_kernel(device(), out, *this);
  autograd::record("clone", {*this}, {out},
                   [](const TensorList& g, const autograd::NeedsGrad&) -> TensorList { return {g[0]}; });
  return out;
}

Tensor Tensor::contiguous() const {
  LSF_CHECK(defined()) << "contiguous: the tensor is undefined";
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::to(DType dtype) const {
  LSF_CHECK(defined()) << "to: the tensor is undefined";
  if (dtype == this->dtype()) return *this;
  Tensor out = empty(shape(), options().dtype(dtype));
  copy_kernel(device(), out, *this);
  // Widening a 16-bit tensor: every value of out is exact in that format (a hint for kernels
  // with 16-bit paths, engine/storage.h).
  if (dtype == DType::F32 && (this->dtype() == DType::BF16 || this->dtype() == DType::F16))
    out.storage()->mark_values_exact_in(this->dtype());
  if (is_floating(dtype)) {
    DType from = this->dtype();
    autograd::record("to_dtype", {*this}, {out},
                     [from](const TensorList& g, const autograd::NeedsGrad&) -> TensorList {
                       return {g[0].to(from)};
                     });
  }
  return out;
}

Tensor Tensor::to(Device target) const {
  LSF_CHECK(defined()) << "to: the tensor is undefined";
  if (target == device()) return *this;
  Tensor src = contiguous();
  Tensor out = empty(shape(), options().device(target));
  // The non-CPU side's backend knows how to move bytes between the two.
  Device backend = target.is_cpu() ? device() : target;
  cross_device_copy_kernel(backend, out, src);
  Device from = device();
  autograd::record("to_device", {*this}, {out},
                   [from](const TensorList& g, const autograd::NeedsGrad&) -> TensorList {
                     return {g[0].to(from)};
                   });
  return out;
}

Tensor Tensor::to(const TensorOptions& o) const {
  Tensor out = to(o.device()).to(o.dtype());
  if (o.requires_grad()) {
    if (out.is_same(*this)) out = out.detach();
    out.requires_grad_(true);
  }
  return out;
}

template <typename T>
T Tensor::item() const {
  LSF_CHECK(defined()) << "item: the tensor is undefined";
  LSF_CHECK(numel() == 1) << "item: only a one-element tensor has a single value, got shape " << shape();
  Tensor host = to(kCPU);
  return dispatch_all(host.dtype(), [&]<typename S>() { return convert_scalar<T>(*static_cast<const S*>(host.raw_data())); });
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  LSF_CHECK(defined()) << "to_vector: the tensor is undefined";
  Tensor host = empty(shape(), TensorOptions(dtype_v<T>));
  {
    NoGradGuard no_grad;
    Tensor src = to(kCPU);
    copy_kernel(kCPU, host, src);
  }
  const T* p = host.data_ptr<T>();
  return std::vector<T>(p, p + numel());
}

#define LSF_INSTANTIATE(T)                    \
  template T Tensor::item<T>() const;         \
  template std::vector<T> Tensor::to_vector<T>() const;
LSF_INSTANTIATE(float)
LSF_INSTANTIATE(double)
LSF_INSTANTIATE(BFloat16)
LSF_INSTANTIATE(Half)
LSF_INSTANTIATE(int32_t)
LSF_INSTANTIATE(int64_t)
LSF_INSTANTIATE(uint8_t)
LSF_INSTANTIATE(bool)
#undef LSF_INSTANTIATE

}  // namespace lsf
