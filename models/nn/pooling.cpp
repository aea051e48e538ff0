// Pooling layers: option checks and the calls into ops/pool.h.
#include "lsformer/models/nn/pooling.h"

#include <sstream>

namespace lsf::nn {

namespace {

void check_options(const char* layer, const Pool2dOptions& o) {
  LSF_CHECK(o.kernel_size.h >= 1 && o.kernel_size.w >= 1 && o.stride.h >= 0 && o.stride.w >= 0 &&
            o.padding.h >= 0 && o.padding.w >= 0 && 2 * o.padding.h <= o.kernel_size.h &&
            2 * o.padding.w <= o.kernel_size.w)
      << layer << ": needs kernel_size ≥ 1, stride ≥ 0 (0: the kernel size) and 0 ≤ padding ≤ kernel_size/2, got kernel_size="
      << o.kernel_size << ", stride=" << o.stride << ", padding=" << o.padding;
}

std::string describe(const Pool2dOptions& o, bool average) {
  std::ostringstream os;
  os << "kernel_size=" << o.kernel_size << ", stride=" << (o.stride == Int2(0) ? o.kernel_size : o.stride)
     << ", padding=" << o.padding << ", ceil_mode=" << (o.ceil_mode ? "true" : "false");
  if (average) os << ", count_include_pad=" << (o.count_include_pad ? "true" : "false");
  return os.str();
}

}  // namespace

MaxPool2d::MaxPool2d(const Pool2dOptions& options) : Layer("MaxPool2d"), options_(options) {
  check_options("MaxPool2d", options);
}
Tensor MaxPool2d::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  return max_pool2d(x, options_);
}
std::string MaxPool2d::extra_repr() const { return describe(options_, false); }

AvgPool2d::AvgPool2d(const Pool2dOptions& options) : Layer("AvgPool2d"), options_(options) {
  check_options("AvgPool2d", options);
}
Tensor AvgPool2d::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  return avg_pool2d(x, options_);
}
std::string AvgPool2d::extra_repr() const { return describe(options_, true); }

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Int2 output_size) : Layer("AdaptiveAvgPool2d"), output_size_(output_size) {
  LSF_CHECK(output_size.h >= 1 && output_size.w >= 1)
      << "AdaptiveAvgPool2d: output_size must be positive, got " << output_size;
}
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  return adaptive_avg_pool2d(x, output_size_);
}
std::string AdaptiveAvgPool2d::extra_repr() const {
  std::ostringstream os;
  os << "output_size=" << output_size_;
  return os.str();
}

}  // namespace lsf::nn
