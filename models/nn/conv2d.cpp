// nn::Conv2d: parameters, default initialisation and the call into lsf::conv2d.
#include "lsformer/models/nn/conv2d.h"

#include <cmath>
#include <sstream>

#include "lsformer/models/nn/init.h"

namespace lsf::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Int2 kernel_size, const Conv2dOptions& options, bool with_bias)
    : Layer("Conv2d"), in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size),
      options_(options) {
  LSF_CHECK(in_channels > 0 && out_channels > 0 && kernel_size.h > 0 && kernel_size.w > 0)
      << "Conv2d: channels and kernel size must be positive, got in_channels=" << in_channels
      << ", out_channels=" << out_channels << ", kernel_size=" << kernel_size;
  LSF_CHECK(options.groups >= 1 && in_channels % options.groups == 0 && out_channels % options.groups == 0)
      << "Conv2d: groups=" << options.groups << " must divide in_channels=" << in_channels
      << " and out_channels=" << out_channels;
  LSF_CHECK(options.stride.h >= 1 && options.stride.w >= 1 && options.dilation.h >= 1 && options.dilation.w >= 1 &&
            options.padding.h >= 0 && options.padding.w >= 0)
      << "Conv2d: needs stride ≥ 1, dilation ≥ 1 and padding ≥ 0, got stride=" << options.stride
      << ", dilation=" << options.dilation << ", padding=" << options.padding;
  weight = register_parameter("weight",
                              empty({out_channels, in_channels / options.groups, kernel_size.h, kernel_size.w}));
  if (with_bias) bias = register_parameter("bias", empty({out_channels}));
  reset_parameters();
}

void Conv2d::reset_parameters(Generator* generator) {
  init::kaiming_uniform_(weight, /*a=*/std::sqrt(5.0), init::FanMode::FanIn, init::Nonlinearity::LeakyReLU,
                         generator);
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).fan_in;
    const double bound = 1.0 / std::sqrt(double(fan_in));
    init::uniform_(bias, -bound, bound, generator);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  return conv2d(x, weight, bias, options_);
}

std::string Conv2d::extra_repr() const {
  // PyTorch's format: the defaults (padding 0, dilation 1, groups 1, bias) are not shown.
  std::ostringstream os;
  os << in_channels_ << ", " << out_channels_ << ", kernel_size=" << kernel_size_ << ", stride=" << options_.stride;
  if (!(options_.padding == Int2(0))) os << ", padding=" << options_.padding;
  if (!(options_.dilation == Int2(1))) os << ", dilation=" << options_.dilation;
  if (options_.groups != 1) os << ", groups=" << options_.groups;
  if (!bias.defined()) os << ", bias=false";
  return os.str();
}

}  // namespace lsf::nn
