// nn::StdConv2d: the standardised kernel, then lsf::conv2d.
#include "lsformer/models/nn/std_conv2d.h"

#include <sstream>

#include "lsformer/ops/weight_standardization.h"

namespace lsf::nn {

StdConv2d::StdConv2d(int64_t in_channels, int64_t out_channels, Int2 kernel_size, const Conv2dOptions& options,
                     bool bias, double eps)
    : Conv2d(in_channels, out_channels, kernel_size, options, bias), eps_(eps) {
  LSF_CHECK(eps >= 0.0) << "StdConv2d: eps must be non-negative, got " << eps;
  LSF_CHECK(in_channels / options.groups * kernel_size.h * kernel_size.w >= 2)
      << "StdConv2d: a filter needs at least 2 taps to standardise (in_channels/groups · kH · kW = "
      << in_channels / options.groups * kernel_size.h * kernel_size.w << ")";
}

Tensor StdConv2d::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  return conv2d(x, weight_standardize(weight, eps_), bias, options());
}

std::string StdConv2d::extra_repr() const {
  std::ostringstream os;
  os << Conv2d::extra_repr() << ", eps=" << eps_;
  return os.str();
}

}  // namespace lsf::nn
