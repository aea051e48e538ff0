// nn::BatchNorm2d: batch normalisation over the channels of x [N, C, H, W], as
// torch.nn.BatchNorm2d (see ops/batch_norm.h for the arithmetic).
//
// Parameters (PyTorch names, state_dict order): weight [C] = 1 and bias [C] = 0 (when affine),
// then the persistent buffers running_mean [C] = 0, running_var [C] = 1 and
// num_batches_tracked (0-d i64) = 0 (when track_running_stats). In training mode the batch
// statistics normalise and the running statistics are updated in place (momentum, unbiased
// variance) and num_batches_tracked counts the calls; in eval mode the running statistics
// normalise (without track_running_stats the batch statistics are used in both modes).
// PyTorch's momentum = None (a cumulative average) is not offered.
#pragma once

#include <string>

#include "lsformer/models/nn/layer.h"

namespace lsf::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  double momentum = 0.1;           // in [0, 1]
  bool affine = true;              // learnable weight and bias
  bool track_running_stats = true;  // running_mean / running_var / num_batches_tracked buffers
};

class BatchNorm2d : public Layer {
 public:
  explicit BatchNorm2d(int64_t num_features, const BatchNormOptions& options = {});
  Tensor forward(const Tensor& x) override;  // x [N, C, H, W] → [N, C, H, W]
  std::string extra_repr() const override;
  void reset_running_stats();  // mean 0, var 1, count 0
  void reset_parameters();     // the above, weight 1, bias 0

  int64_t num_features() const { return num_features_; }
  const BatchNormOptions& options() const { return options_; }

  Tensor weight;               // [C] or undefined
  Tensor bias;                 // [C] or undefined
  Tensor running_mean;         // [C] buffer or undefined
  Tensor running_var;          // [C] buffer or undefined
  Tensor num_batches_tracked;  // 0-d i64 buffer or undefined

 private:
  int64_t num_features_;
  BatchNormOptions options_;
};

}  // namespace lsf::nn
