// The libtorch-style Tensor methods declared in engine/tensor.h (x.sum(), x.matmul(w),
// x.softmax(-1), ...): each forwards to the free function of the same name, so there is exactly
// one implementation of every op and the method form is only spelling.
#include "lsformer/engine/tensor.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/index.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/shape.h"
#include "lsformer/ops/softmax.h"
#include "lsformer/ops/unary.h"

namespace lsf {

Tensor Tensor::sum() const { return lsf::sum(*this); }
Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const { return lsf::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return lsf::mean(*this); }
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const { return lsf::mean(*this, dims, keepdim); }
Tensor Tensor::amax(const std::vector<int64_t>& dims, bool keepdim) const { return lsf::amax(*this, dims, keepdim); }
Tensor Tensor::amin(const std::vector<int64_t>& dims, bool keepdim) const { return lsf::amin(*this, dims, keepdim); }
Tensor Tensor::max() const { return lsf::max(*this); }
Tensor Tensor::min() const { return lsf::min(*this); }
ValuesIndices Tensor::max(int64_t dim, bool keepdim) const { return lsf::max(*this, dim, keepdim); }
ValuesIndices Tensor::min(int64_t dim, bool keepdim) const { return lsf::min(*this, dim, keepdim); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return lsf::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(int64_t dim, bool keepdim) const { return lsf::argmin(*this, dim, keepdim); }
Tensor Tensor::var(const std::vector<int64_t>& dims, int64_t correction, bool keepdim) const {
  return lsf::var(*this, dims, correction, keepdim);
}
Tensor Tensor::matmul(const Tensor& other) const { return lsf::matmul(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return lsf::bmm(*this, other); }
Tensor Tensor::softmax(int64_t dim) const { return lsf::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return lsf::log_softmax(*this, dim); }
Tensor Tensor::neg() const { return lsf::neg(*this); }
Tensor Tensor::exp() const { return lsf::exp(*this); }
Tensor Tensor::log() const { return lsf::log(*this); }
Tensor Tensor::sqrt() const { return lsf::sqrt(*this); }
Tensor Tensor::rsqrt() const { return lsf::rsqrt(*this); }
Tensor Tensor::abs() const { return lsf::abs(*this); }
Tensor Tensor::tanh() const { return lsf::tanh(*this); }
Tensor Tensor::sigmoid() const { return lsf::sigmoid(*this); }
Tensor Tensor::relu() const { return lsf::relu(*this); }
Tensor Tensor::gelu() const { return lsf::gelu(*this); }
Tensor Tensor::pow(double exponent) const { return lsf::pow(*this, exponent); }
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const { return lsf::clamp(*this, min, max); }
Tensor Tensor::add(const Tensor& other) const { return lsf::add(*this, other); }
Tensor Tensor::add(double other) const { return lsf::add(*this, other); }
Tensor Tensor::sub(const Tensor& other) const { return lsf::sub(*this, other); }
Tensor Tensor::sub(double other) const { return lsf::sub(*this, other); }
Tensor Tensor::mul(const Tensor& other) const { return lsf::mul(*this, other); }
Tensor Tensor::mul(double other) const { return lsf::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return lsf::div(*this, other); }
Tensor Tensor::div(double other) const { return lsf::div(*this, other); }
Tensor Tensor::eq(const Tensor& other) const { return lsf::eq(*this, other); }
Tensor Tensor::eq(double other) const { return lsf::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return lsf::ne(*this, other); }
Tensor Tensor::ne(double other) const { return lsf::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return lsf::lt(*this, other); }
Tensor Tensor::lt(double other) const { return lsf::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return lsf::le(*this, other); }
Tensor Tensor::le(double other) const { return lsf::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return lsf::gt(*this, other); }
Tensor Tensor::gt(double other) const { return lsf::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return lsf::ge(*this, other); }
Tensor Tensor::ge(double other) const { return lsf::ge(*this, other); }
Tensor Tensor::masked_fill(const Tensor& mask, double value) const { return lsf::masked_fill(*this, mask, value); }
Tensor Tensor::where(const Tensor& condition, const Tensor& other) const { return lsf::where(condition, *this, other); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return lsf::gather(*this, dim, index); }
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return lsf::index_select(*this, dim, index); }
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const { return lsf::split(*this, split_size, dim); }
std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int64_t dim) const { return lsf::split(*this, sizes, dim); }

}  // namespace lsf
