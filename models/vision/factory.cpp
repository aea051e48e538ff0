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

ClassifierFamily classifier_family(const std::string& name) {
  if (is_vil_preset(name)) return ClassifierFamily::ViL;
  if (name.rfind("vil:", 0) == 0) {
    parse_vil_arch(name.substr(4));  // a malformed stage list is an error here, where configs are checked
    return ClassifierFamily::ViL;
  }
  if (is_cvt_preset(name)) return ClassifierFamily::CvTLS;
  if (name == "cnn") return ClassifierFamily::Cnn;
  LSF_FAIL() << "image classifier: unknown model '" << name << "' (known:" << known_names() << ")";
}

double parameter_lower_bound(const std::string& name, const ImageSpec& spec) {
  double bound = 0;
  switch (classifier_family(name)) {
    case ClassifierFamily::ViL:
      for (const ViLStageConfig& s : parse_vil_arch(name.rfind("vil:", 0) == 0 ? name.substr(4) : vil_preset(name).arch))
        bound += 12.0 * double(s.dim) * double(s.dim) * double(s.blocks);
      break;
    case ClassifierFamily::CvTLS:
      for (const CvTLSStageConfig& s : cvt_ls_preset(name).stages)
        bound += 12.0 * double(s.dim) * double(s.dim) * double(s.depth);
      break;
    case ClassifierFamily::Cnn: {
      double in = double(spec.in_channels);
      for (int64_t c : CnnOptions{}.channels) bound += 9.0 * in * double(c), in = double(c);
      break;
    }
  }
  return bound;
}

std::shared_ptr<ImageClassifier> make_image_classifier(const std::string& name, const ImageSpec& spec,
                                                       const ClassifierOptions& options) {
  const ClassifierFamily family = classifier_family(name);
  auto refuse = [&](bool set, const char* option, const char* families) {
    LSF_CHECK(!set) << "image classifier '" << name << "': option " << option << " does not apply (" << families << " only)";
  };
  if (family != ClassifierFamily::CvTLS) {
    refuse(options.kv_stride.has_value(), "kv_stride", "CvT*-LS");
    refuse(options.dp_kernel.has_value(), "dp_kernel", "CvT*-LS");
    refuse(options.batch_norm_projection.has_value(), "batch_norm_projection", "CvT*-LS");
  }
  if (family == ClassifierFamily::Cnn) {
    refuse(options.drop_path.has_value(), "drop_path", "ViL and CvT*-LS");
    refuse(options.qkv_bias.has_value(), "qkv_bias", "ViL and CvT*-LS");
    refuse(options.dual_ln.has_value(), "dual_ln", "ViL and CvT*-LS");
  }
  switch (family) {
    case ClassifierFamily::ViL: {
      ViLOptions o = is_vil_preset(name) ? vil_preset(name) : ViLOptions{.arch = name.substr(4)};
      o.num_classes = spec.num_classes;
      o.image_size = spec.image_size;
      o.in_channels = spec.in_channels;
      o.drop_path_rate = options.drop_path.value_or(o.drop_path_rate);
      o.drop_rate = options.drop_rate.value_or(o.drop_rate);
      o.qkv_bias = options.qkv_bias.value_or(o.qkv_bias);
      o.dual_ln = options.dual_ln.value_or(o.dual_ln);
      return std::make_shared<ViLClassifier>(o);
    }
    case ClassifierFamily::CvTLS: {
      CvTLSOptions o = cvt_ls_preset(name);
      o.num_classes = spec.num_classes;
      o.image_size = spec.image_size;
      o.in_channels = spec.in_channels;
      if (options.drop_path) o.stages.back().drop_path = *options.drop_path;
      o.drop_rate = options.drop_rate.value_or(o.drop_rate);
      o.qkv_bias = options.qkv_bias.value_or(o.qkv_bias);
      o.dual_ln = options.dual_ln.value_or(o.dual_ln);
      o.kv_stride = options.kv_stride.value_or(o.kv_stride);
      o.dp_kernel = options.dp_kernel.value_or(o.dp_kernel);
      o.batch_norm_projection = options.batch_norm_projection.value_or(o.batch_norm_projection);
      return std::make_shared<CvTLSClassifier>(o);
    }
    case ClassifierFamily::Cnn: {
      CnnOptions o{.image_size = spec.image_size, .in_channels = spec.in_channels, .num_classes = spec.num_classes};
      o.dropout = options.drop_rate.value_or(o.dropout);
      return std::make_shared<CnnClassifier>(o);
    }
  }
  LSF_FAIL() << "internal: no ClassifierFamily " << int(family);
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
