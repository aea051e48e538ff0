// nn::BatchNorm2d: parameters, buffers and the call into lsf::batch_norm.
#include "lsformer/models/nn/batch_norm.h"

#include <sstream>

#include "lsformer/engine/autograd.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/ops/batch_norm.h"
#include "lsformer/ops/factory.h"

namespace lsf::nn {

BatchNorm2d::BatchNorm2d(int64_t num_features, const BatchNormOptions& options)
    : Layer("BatchNorm2d"), num_features_(num_features), options_(options) {
  LSF_CHECK(num_features > 0) << "BatchNorm2d: num_features must be positive, got " << num_features;
  LSF_CHECK(options.eps >= 0.0) << "BatchNorm2d: eps must be non-negative, got " << options.eps;
  LSF_CHECK(options.momentum >= 0.0 && options.momentum <= 1.0)
      << "BatchNorm2d: momentum must lie in [0, 1], got " << options.momentum;
  if (options.affine) {
    weight = register_parameter("weight", empty({num_features}));
    bias = register_parameter("bias", empty({num_features}));
  }
  if (options.track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({num_features}));
    running_var = register_buffer("running_var", ones({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, TensorOptions(kI64)));
  }
  reset_parameters();
}

void BatchNorm2d::reset_running_stats() {
  if (!options_.track_running_stats) return;
  NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1.0);
  num_batches_tracked.zero_();
}

void BatchNorm2d::reset_parameters() {
  reset_running_stats();
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  LSF_CHECK(x.defined() && x.dim() == 4 && x.size(1) == num_features_)
      << "BatchNorm2d: expected an input [N, " << num_features_ << ", H, W], got shape "
      << (x.defined() ? x.shape() : Shape{});
  const bool training = is_training();
  if (training && num_batches_tracked.defined()) {
    NoGradGuard no_grad;
    num_batches_tracked.fill_(double(num_batches_tracked.item<int64_t>() + 1));
  }
  return batch_norm(x, running_mean, running_var, weight, bias,
                    {.training = training, .momentum = options_.momentum, .eps = options_.eps});
}

std::string BatchNorm2d::extra_repr() const {
  std::ostringstream os;
  os << num_features_ << ", eps=" << options_.eps << ", momentum=" << options_.momentum
     << ", affine=" << (options_.affine ? "true" : "false")
     << ", track_running_stats=" << (options_.track_running_stats ? "true" : "false");
  return os.str();
}

}  // namespace lsf::nn
