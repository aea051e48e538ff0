// make_image_classifier / measure_cost.
#include "lsformer/models/vision/factory.h"

#include <sstream>

#include "lsformer/engine/autograd.h"
#include "lsformer/models/vision/cnn.h"
#include "lsformer/models/vision/cvt_ls.h"
#include "lsformer/models/vision/vil.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/flops.h"

namespace lsf::vision {

namespace {

bool is_vil_preset(const std::string& name) {
  for (const auto& n : vil_preset_names())
    if (n == name) return true;
  return false;
}

bool is_cvt_preset(const std::string& name) {
  for (const auto& n : cvt_ls_preset_names())
    if (n == name) return true;
  return false;
}

std::string known_names() {
  std::ostringstream os;
  for (const auto& n : image_classifier_names()) os << " " << n;
  os << " vil:<arch string>";
  return os.str();
}

}  // namespace

std::vector<std::string> image_classifier_names() {
  std::vector<std::string> names = vil_preset_names();
  for (const auto& n : cvt_ls_preset_names()) names.push_back(n);
  names.push_back("cnn");
  return names;
}

ImageSpec default_spec(const std::string& name) {
  if (is_vil_preset(name)) {
    const ViLOptions o = vil_preset(name);
    return {o.num_classes, o.image_size, o.in_channels};
  }
  if (is_cvt_preset(name)) {
    const CvTLSOptions o = cvt_ls_preset(name);
    return {o.num_classes, o.image_size, o.in_channels};
  }
  if (name == "cnn") {
    const CnnOptions o;
    return {o.num_classes, o.image_size, o.in_channels};
  }
  LSF_CHECK(name.rfind("vil:", 0) == 0) << "image classifier: unknown model '" << name << "' (known:" << known_names() << ")";
  return {};
}

std::shared_ptr<ImageClassifier> make_image_classifier(const std::string& name, const ImageSpec& spec) {
  if (is_vil_preset(name) || name.rfind("vil:", 0) == 0) {
    ViLOptions o = is_vil_preset(name) ? vil_preset(name) : ViLOptions{.arch = name.substr(4)};
    o.num_classes = spec.num_classes;
    o.image_size = spec.image_size;
    o.in_channels = spec.in_channels;
    return std::make_shared<ViLClassifier>(o);
  }
  if (is_cvt_preset(name)) {
    CvTLSOptions o = cvt_ls_preset(name);
    o.num_classes = spec.num_classes;
    o.image_size = spec.image_size;
    o.in_channels = spec.in_channels;
    return std::make_shared<CvTLSClassifier>(o);
  }
  if (name == "cnn") {
    return std::make_shared<CnnClassifier>(
        CnnOptions{.image_size = spec.image_size, .in_channels = spec.in_channels, .num_classes = spec.num_classes});
  }
  LSF_FAIL() << "image classifier: unknown model '" << name << "' (known:" << known_names() << ")";
}

ModelCost measure_cost(ImageClassifier& model) {
  const ImageSpec s = model.spec();
  const bool was_training = model.is_training();
  model.eval();
  DType dtype = kF32;
  Device device = kCPU;
  for (const Tensor& p : model.parameters()) {
    dtype = p.dtype();
    device = p.device();
    break;
  }
  ModelCost cost;
  cost.parameters = model.parameter_count();
  try {
    NoGradGuard no_grad;
    FlopCounter counter;
    model.forward(zeros({1, s.in_channels, s.image_size, s.image_size}, TensorOptions(dtype).device(device)));
    cost.multiply_adds = counter.multiply_adds();
  } catch (...) {
    model.train(was_training);
    throw;
  }
  model.train(was_training);
  return cost;
}

}  // namespace lsf::vision
