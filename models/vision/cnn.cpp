// vision::CnnClassifier: conv-BN-ReLU blocks with max pooling, global average pool, Linear.
#include "lsformer/models/vision/cnn.h"

#include <sstream>

#include "lsformer/models/nn/activation.h"
#include "lsformer/models/nn/batch_norm.h"
#include "lsformer/models/nn/conv2d.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/models/nn/pooling.h"
#include "lsformer/ops/pool.h"

namespace lsf::vision {

CnnClassifier::CnnClassifier(const CnnOptions& o) : ImageClassifier("CnnClassifier"), options_(o) {
  LSF_CHECK(!o.channels.empty() && o.convs_per_block >= 1)
      << "CNN: needs at least one block (channels) and convs_per_block ≥ 1";
  LSF_CHECK(o.image_size >= 1 && o.in_channels >= 1 && o.num_classes >= 1)
      << "CNN: image_size, in_channels and num_classes must be positive, got " << o.image_size << ", "
      << o.in_channels << ", " << o.num_classes;
  LSF_CHECK(o.dropout >= 0.0 && o.dropout <= 1.0) << "CNN: dropout must lie in [0, 1], got " << o.dropout;
  features = register_module("features", std::make_shared<nn::Sequential>());
  int64_t in = o.in_channels, side = o.image_size;
  for (int64_t c : o.channels) {
    LSF_CHECK(c >= 1) << "CNN: channel counts must be positive, got " << c;
    for (int64_t k = 0; k < o.convs_per_block; ++k) {
      auto conv = features->push_back(std::make_shared<nn::Conv2d>(in, c, 3, Conv2dOptions{.padding = 1}, false));
      nn::init::kaiming_normal_(conv->weight, 0.0, nn::init::FanMode::FanOut, nn::init::Nonlinearity::ReLU);
      features->push_back(std::make_shared<nn::BatchNorm2d>(c));
      features->push_back(std::make_shared<nn::ReLU>());
      in = c;
    }
    if (side >= 2) {
      features->push_back(std::make_shared<nn::MaxPool2d>(Pool2dOptions{.kernel_size = 2}));
      side /= 2;
    }
  }
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(o.dropout));
  classifier = register_module("classifier", std::make_shared<nn::Linear>(in, o.num_classes));
}

ImageSpec CnnClassifier::spec() const { return {options_.num_classes, options_.image_size, options_.in_channels}; }

std::string CnnClassifier::extra_repr() const {
  std::ostringstream os;
  os << "channels=[";
  for (size_t i = 0; i < options_.channels.size(); ++i) os << (i ? ", " : "") << options_.channels[i];
  os << "], convs_per_block=" << options_.convs_per_block << ", image_size=" << options_.image_size
     << ", in_channels=" << options_.in_channels << ", num_classes=" << options_.num_classes;
  return os.str();
}

Tensor CnnClassifier::forward(const Tensor& images) {
  ::lsf::nn::ModuleScope call_site(*this);
  check_images("CNN", images, spec());
  return classifier->forward(dropout->forward(global_avg_pool2d(features->forward(images))));
}

}  // namespace lsf::vision
