// The image-classification task: config sections, splits, pipeline options, the model, and the
// Task the trainer runs (see vision_task.h).
#include "lsformer/models/train/vision_task.h"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <map>
#include <sstream>

#include "lsformer/data/cifar.h"
#include "lsformer/data/idx.h"
#include "lsformer/data/image_folder.h"
#include "lsformer/data/image_loader.h"
#include "lsformer/data/rand_augment.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/engine/error.h"
#include "lsformer/engine/profiler.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/models/train/config_checks.h"
#include "lsformer/ops/kernels/batch_norm.h"
#include "lsformer/ops/kernels/conv.h"
#include "lsformer/ops/kernels/pool.h"
#include "lsformer/ops/loss.h"
#include "lsformer/ops/soft_cross_entropy.h"
#include "lsformer/ops/softmax.h"

namespace lsf::train {
namespace {

namespace fs = std::filesystem;

const std::string kTask = "image";

std::string join(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

std::string percent(double fraction) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << 100.0 * fraction << "%";
  return os.str();
}

std::string source_name(ImageSource s) { return enum_name(s, kImageSourceNames); }

bool is_mnist_family(ImageSource s) { return s == ImageSource::FashionMnist || s == ImageSource::Mnist; }

// The directory of an MNIST-family source: data.path, or the installed Fashion-MNIST.
std::string mnist_dir(const VisionDataConfig& d) {
  if (!d.path.empty()) return d.path;
  LSF_CHECK(d.source == ImageSource::FashionMnist) << "'data.path' must name the " << source_name(d.source) << " files";
  try {
    return data::find_fashion_mnist();
  } catch (const Error& e) {
    LSF_FAIL() << "'data.path' is empty, so the installed Fashion-MNIST is used, but: " << e.what();
  }
}

// An IDX file by its standard name, plain or .gz (what data::read_mnist accepts).
bool idx_exists(const std::string& dir, const std::string& name) {
  return fs::exists(join(dir, name)) || fs::exists(join(dir, name + ".gz"));
}

std::vector<std::string> cifar10_train_files(const std::string& dir) {
  std::vector<std::string> files;
  for (int i = 1; i <= 5; ++i) files.push_back(join(dir, "data_batch_" + std::to_string(i) + ".bin"));
  return files;
}

void check_split_name(const std::string& split) {
  LSF_CHECK(split == "train" || split == "dev" || split == "test")
      << "unknown split '" << split << "' (expected train, dev or test)";
}

// The whole training set of the source (a folder's train/).
std::shared_ptr<const data::ImageDataset> read_training_set(const VisionDataConfig& d) {
  switch (d.source) {
    case ImageSource::FashionMnist: return data::read_fashion_mnist(mnist_dir(d), "train");
    case ImageSource::Mnist: return data::read_mnist(mnist_dir(d), "train");
    case ImageSource::Cifar10: return data::read_cifar10(cifar10_train_files(d.path));
    case ImageSource::Cifar100: return data::read_cifar100({join(d.path, "train.bin")});
    case ImageSource::Folder:
      return std::make_shared<data::ImageFolderDataset>(join(d.path, "train"),
                                                        data::ImageFolderOptions{.channels = d.channels ? d.channels : 3});
  }
  LSF_FAIL() << "internal: data.source holds no ImageSource (" << int(d.source) << ")";
}

std::shared_ptr<const data::ImageDataset> read_folder(const VisionDataConfig& d, const std::string& sub) {
  return std::make_shared<data::ImageFolderDataset>(join(d.path, sub),
                                                    data::ImageFolderOptions{.channels = d.channels ? d.channels : 3});
}

// The training set cut at (1 − dev_fraction): "train" is the head, "dev" the tail.
std::shared_ptr<const data::ImageDataset> cut(std::shared_ptr<const data::ImageDataset> all, const VisionDataConfig& d,
                                              const std::string& split) {
  const int64_t n = all->size();
  const int64_t dev = std::max<int64_t>(1, int64_t(double(n) * d.dev_fraction));
  LSF_CHECK(dev < n) << "'data.dev_fraction' (" << d.dev_fraction << ") leaves no training images of " << n;
  const std::string base = source_name(d.source) + " " + split;
  return split == "train" ? std::make_shared<data::ImageSubset>(all, 0, n - dev, base)
                          : std::make_shared<data::ImageSubset>(all, n - dev, n, base);
}

// The splits asked for, reading the training set once for both train and dev.
std::map<std::string, std::shared_ptr<const data::ImageDataset>> load_splits(const RunConfig& config,
                                                                            const std::vector<std::string>& splits) {
  const VisionDataConfig& d = vision_sections(config).data;
  validate_data_paths(config);
  std::map<std::string, std::shared_ptr<const data::ImageDataset>> out;
  std::shared_ptr<const data::ImageDataset> training;
  auto training_set = [&] {
    if (!training) training = read_training_set(d);
    return training;
  };
  const bool folder = d.source == ImageSource::Folder;
  for (const std::string& s : splits) {
    check_split_name(s);
    if (s == "train") {
      out[s] = folder && fs::is_directory(join(d.path, "val")) ? training_set() : cut(training_set(), d, s);
    } else if (s == "dev") {
      out[s] = folder && fs::is_directory(join(d.path, "val")) ? read_folder(d, "val") : cut(training_set(), d, s);
    } else if (folder) {
      out[s] = read_folder(d, fs::is_directory(join(d.path, "test")) ? "test" : "val");
    } else if (is_mnist_family(d.source)) {
      out[s] = d.source == ImageSource::Mnist ? data::read_mnist(mnist_dir(d), "test") : data::read_fashion_mnist(mnist_dir(d), "test");
    } else if (d.source == ImageSource::Cifar10) {
      out[s] = data::read_cifar10({join(d.path, "test_batch.bin")});
    } else {
      out[s] = data::read_cifar100({join(d.path, "test.bin")});
    }
  }
  return out;
}

// ---- validation ----

void probability(const std::string& source, const char* key, double value) {
  LSF_CHECK(value >= 0.0 && value <= 1.0) << source << ": '" << key << "' must be in [0, 1], got " << value;
}

void validate_vision(const std::string& source, const RunConfig& c) {
  const VisionSections& s = vision_sections(c);
  const VisionDataConfig& d = s.data;
  const VisionModelConfig& m = s.model;
  LSF_CHECK(!d.path.empty() || d.source == ImageSource::FashionMnist)
      << source << ": 'data.path' must name the " << source_name(d.source) << " data (only fashion_mnist has an installed default)";
  LSF_CHECK(d.dev_fraction > 0.0 && d.dev_fraction < 1.0)
      << source << ": 'data.dev_fraction' must be in (0, 1), got " << d.dev_fraction;
  at_least(source, "data.image_size", double(d.image_size), 0);
  LSF_CHECK(d.image_size > 0 || d.source != ImageSource::Folder)
      << source << ": 'data.image_size' must be set (> 0) for an image folder (its images have no one size)";
  LSF_CHECK(d.channels == 0 || d.channels == 1 || d.channels == 3)
      << source << ": 'data.channels' must be 0 (the source's), 1 or 3, got " << d.channels;
  LSF_CHECK(d.interpolation != data::Interpolation::Nearest)
      << source << ": 'data.interpolation' must be bilinear or bicubic (resizing has no nearest mode)";
  LSF_CHECK(d.mean.size() == d.std.size())
      << source << ": 'data.mean' and 'data.std' must have the same length, got " << d.mean.size() << " and " << d.std.size();
  const int64_t channels = d.channels ? d.channels : source_facts(d.source).channels;
  LSF_CHECK(d.mean.empty() || int64_t(d.mean.size()) == channels)
      << source << ": 'data.mean' and 'data.std' need one value per channel (" << channels << "), got " << d.mean.size();
  for (double v : d.std) LSF_CHECK(v > 0) << source << ": every 'data.std' value must be > 0, got " << v;
  LSF_CHECK(d.crop_scale[0] > 0 && d.crop_scale[0] <= d.crop_scale[1] && d.crop_scale[1] <= 1)
      << source << ": 'data.crop_scale' must be [min, max] with 0 < min ≤ max ≤ 1, got [" << d.crop_scale[0] << ", "
      << d.crop_scale[1] << "]";
  LSF_CHECK(d.crop_ratio[0] > 0 && d.crop_ratio[0] <= d.crop_ratio[1])
      << source << ": 'data.crop_ratio' must be [min, max] with 0 < min ≤ max, got [" << d.crop_ratio[0] << ", "
      << d.crop_ratio[1] << "]";
  probability(source, "data.hflip", d.hflip);
  if (!d.rand_augment.empty()) {
    try {
      data::parse_rand_augment(d.rand_augment);
    } catch (const Error& e) {
      LSF_FAIL() << source << ": 'data.rand_augment': " << e.what();
    }
  }
  at_least(source, "data.color_jitter", d.color_jitter, 0);
  probability(source, "data.erasing", d.erasing);
  at_least(source, "data.mixup", d.mixup, 0);
  at_least(source, "data.cutmix", d.cutmix, 0);
  probability(source, "data.mix_prob", d.mix_prob);
  probability(source, "data.switch_prob", d.switch_prob);
  probability(source, "data.label_smoothing", d.label_smoothing);
  LSF_CHECK(d.crop_pct > 0 && d.crop_pct <= 1) << source << ": 'data.crop_pct' must be in (0, 1], got " << d.crop_pct;
  at_least(source, "data.eval_batch_size", double(d.eval_batch_size), 0);
  LSF_CHECK(d.workers >= 0 && d.workers <= 256) << source << ": 'data.workers' must be in [0, 256], got " << d.workers;
  at_least(source, "data.prefetch", double(d.prefetch), 1);
  if (d.mixup > 0 || d.cutmix > 0) {
    LSF_CHECK(c.train.batch_size % 2 == 0) << source << ": Mixup/CutMix ('data.mixup', 'data.cutmix') pair each sample with "
                                           << "another, so 'train.batch_size' must be even, got " << c.train.batch_size;
  }

  vision::ClassifierFamily family = vision::ClassifierFamily::ViL;
  try {
    family = vision::classifier_family(m.name);
  } catch (const Error& e) {
    LSF_FAIL() << source << ": 'model.name': " << e.what();
  }
  at_least(source, "model.num_classes", double(m.num_classes), 0);
  LSF_CHECK(m.in_channels == 0 || m.in_channels == 1 || m.in_channels == 3)
      << source << ": 'model.in_channels' must be 0 (the data's), 1 or 3 (what the image pipeline makes), got " << m.in_channels;
  in_unit(source, "model.drop_path", m.drop_path);
  in_unit(source, "model.drop_rate", m.drop_rate);
  at_least(source, "model.kv_stride", double(m.kv_stride), 1);
  at_least(source, "model.dp_kernel", double(m.dp_kernel), 1);
  const VisionModelConfig defaults;
  auto only_for = [&](bool is_default, const char* key, const char* families) {
    LSF_CHECK(is_default) << source << ": '" << key << "' applies to " << families << " models only, not '" << m.name << "'";
  };
  if (family != vision::ClassifierFamily::CvTLS) {
    only_for(m.kv_stride == defaults.kv_stride, "model.kv_stride", "CvT*-LS (cvt_ls_*)");
    only_for(m.dp_kernel == defaults.dp_kernel, "model.dp_kernel", "CvT*-LS (cvt_ls_*)");
    only_for(m.batch_norm_projection == defaults.batch_norm_projection, "model.batch_norm_projection", "CvT*-LS (cvt_ls_*)");
  }
  if (family == vision::ClassifierFamily::Cnn) {
    only_for(m.drop_path == defaults.drop_path, "model.drop_path", "ViL and CvT*-LS");
    only_for(m.qkv_bias == defaults.qkv_bias, "model.qkv_bias", "ViL and CvT*-LS");
    only_for(m.dual_ln == defaults.dual_ln, "model.dual_ln", "ViL and CvT*-LS");
  }
}

void check_vision_data_paths(const RunConfig& config) {
  const VisionDataConfig& d = vision_sections(config).data;
  auto need = [&](bool ok, const std::string& what, const std::string& path) {
    LSF_CHECK(ok) << "'data.path': the " << source_name(d.source) << " " << what << " '" << path << "' does not exist";
  };
  switch (d.source) {
    case ImageSource::FashionMnist:
    case ImageSource::Mnist: {
      const std::string dir = mnist_dir(d);
      for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
        need(idx_exists(dir, name), "file", join(dir, name) + "[.gz]");
      break;
    }
    case ImageSource::Cifar10:
      for (const std::string& f : cifar10_train_files(d.path)) need(fs::exists(f), "training batch", f);
      need(fs::exists(join(d.path, "test_batch.bin")), "test batch", join(d.path, "test_batch.bin"));
      break;
    case ImageSource::Cifar100:
      need(fs::exists(join(d.path, "train.bin")), "training file", join(d.path, "train.bin"));
      need(fs::exists(join(d.path, "test.bin")), "test file", join(d.path, "test.bin"));
      break;
    case ImageSource::Folder:
      need(fs::is_directory(join(d.path, "train")), "training folder", join(d.path, "train"));
      LSF_CHECK(fs::is_directory(join(d.path, "val")) || fs::is_directory(join(d.path, "test")))
          << "'data.path': the image folder '" << d.path << "' needs a val/ or test/ folder beside train/ (the test split)";
      break;
  }
}

// ---- the Task ----

class VisionTask final : public Task {
 public:
  explicit VisionTask(const RunConfig& config) : config_(config), s_(vision_sections(config)) {}

  void load_data(const std::vector<std::string>& splits) override {
    data_ = load_splits(config_, splits);
    model_data_ = data_.at(splits.front());
    spec_ = image_spec(config_, model_data_.get());
    for (const auto& [name, d] : data_) {  // every split must fit the model (fail now)
      const int64_t channels = s_.data.channels ? s_.data.channels : d->channels();
      LSF_CHECK(channels == spec_.in_channels) << "'model.in_channels' (" << spec_.in_channels << ") differs from the "
                                               << channels << " channels of the " << name << " images";
      LSF_CHECK(d->num_classes() <= spec_.num_classes) << "'model.num_classes' (" << spec_.num_classes << ") is smaller than the "
                                                       << d->num_classes() << " classes of the " << name << " split";
    }
    if (data_.count("train")) {
      const auto& train = data_.at("train");
      LSF_CHECK(train->size() >= config_.train.batch_size)
          << "the training split has " << train->size() << " images, fewer than 'train.batch_size' (" << config_.train.batch_size << ")";
      train_loader_ = std::make_unique<data::ImageLoader>(
          train, data::ImagePipeline(pipeline_options(config_, /*training=*/true, spec_.in_channels), spec_.num_classes),
          loader_options(/*training=*/true));
    }
  }

  std::string describe_data() const override {
    std::ostringstream os;
    os << source_name(s_.data.source) << " (";
    const char* sep = "";
    for (const char* s : {"train", "dev", "test"})
      if (data_.count(s)) {
        os << sep << data_.at(s)->size() << " " << s;
        sep = " / ";
      }
    os << " images; " << spec_.image_size << "×" << spec_.image_size << "×" << spec_.in_channels << ", " << spec_.num_classes
       << " classes) with " << s_.model.name;
    return os.str();
  }

  // Every vision model embeds its patches with conv2d, and the CNN adds batch norm and pooling:
  // a backend that lacks one of their kernels cannot run it. Asked of the kernel tables, so the
  // answer follows the build (a CUDA backend with convolutions needs no change here).
  std::string unsupported_device(Device device) const override {
    if (device.is_cpu()) return {};
    std::string missing;
    for (const KernelBase* k : std::initializer_list<const KernelBase*>{
             &conv2d_forward_kernel, &conv2d_backward_kernel, &batch_norm_forward_kernel, &batch_norm_backward_kernel,
             &avg_pool2d_forward_kernel, &avg_pool2d_backward_kernel, &max_pool2d_forward_kernel,
             &max_pool2d_backward_kernel, &adaptive_avg_pool2d_forward_kernel, &adaptive_avg_pool2d_backward_kernel})
      if (!k->implemented(device.type)) missing += std::string(missing.empty() ? "" : ", ") + k->name();
    if (missing.empty()) return {};
    return "the vision models' convolution, batch-norm and pooling ops have no kernels on " +
           std::string(device_type_name(device.type)) + " in this build (" + missing + ")";
  }

  std::shared_ptr<nn::Module> build_model() override {
    LSF_CHECK(model_data_ != nullptr) << "internal: build_model before load_data";
    return make_model(spec_);
  }

  // Data parallelism: the training loader decodes only this rank's rows of each global batch.
  void set_data_shard(const DataShard& shard) override { shard_ = shard; }

  TrainStep train_step(nn::Module& model, int64_t step) override {
    LSF_CHECK(train_loader_ != nullptr) << "internal: the training split was not loaded";
    if (step != next_step_) {  // the first step, or a jump (resume): stream from here
      train_loader_->start(step, config_.train.steps);
      next_step_ = step;
    }
    data::ImageBatch b = train_loader_->next();
    ++next_step_;
    LSF_CHECK(b.index == step) << "internal: the image loader gave batch " << b.index << " for step " << step;
    b = b.to(parameter_device(model));
    Tensor logits = classifier(model).forward(b.images);
    TrainStep s;
    {
      profiler::PhaseScope phase("loss");
      s.loss = b.soft_targets.defined()
                   ? soft_cross_entropy(logits, b.soft_targets)
                   : cross_entropy(logits, b.labels, {.label_smoothing = s_.data.label_smoothing});
    }
    s.units = double(b.labels.numel());
    // Against the unmixed labels (with Mixup/CutMix the image shows two classes): a rough guide.
    s.tally.add("correct", double(count_top_k(logits.detach(), b.labels).correct1));
    s.tally.add("examples", double(b.labels.numel()));
    return s;
  }

  std::vector<Metric> window_metrics(const Tally& sums, int64_t /*steps*/) const override {
    const double examples = sums.get("examples");
    return {{"top1", examples > 0 ? sums.get("correct") / examples : 0.0, Metric::Kind::Percent, "acc"}};
  }

  const char* throughput_unit() const override { return "samples"; }

  int64_t examples(const std::string& split) const override {
    LSF_CHECK(data_.count(split)) << "internal: split '" << split << "' was not loaded";
    return data_.at(split)->size();
  }

  // The image through the evaluation transform (resize, centre crop, normalise), alone in a batch.
  InspectedExample forward_example(nn::Module& module, const std::string& split, int64_t index) override {
    const int64_t count = examples(split);
    LSF_CHECK(index >= 0 && index < count)
        << "example index " << index << " is out of range for the " << split << " split (0.." << count - 1 << ")";
    const data::ImageDataset& dataset = *data_.at(split);
    const data::ImagePipeline pipeline(pipeline_options(config_, /*training=*/false, spec_.in_channels), spec_.num_classes);
    const data::ImageBatch b = pipeline.batch(dataset, {index}, 0, config_.train.seed, 0);
    vision::ImageClassifier& model = classifier(module);
    const bool was_training = model.is_training();
    model.eval();
    NoGradGuard no_grad;
    const Tensor logits = model.forward(b.images.to(parameter_device(model)));  // [1, K]
    model.train(was_training);
    const std::vector<float> p = softmax(logits, 1).to_vector<float>();
    const int64_t predicted = std::max_element(p.begin(), p.end()) - p.begin();
    const data::Image shown = pipeline.augment(dataset.image(index), index, 0, config_.train.seed);
    InspectedExample out;
    out.pixels = shown.pixels;
    out.height = shown.height;
    out.width = shown.width;
    out.channels = shown.channels;
    const auto& names = dataset.class_names();
    auto name = [&](int64_t c) { return c >= 0 && c < int64_t(names.size()) ? names[size_t(c)] : std::to_string(c); };
    std::ostringstream os;
    os << dataset.name() << (dataset.name().find(split) == std::string::npos ? " " + split : "") << " image " << index << ": label " << name(dataset.label(index)) << ", predicted "
       << name(predicted) << " (p " << std::fixed << std::setprecision(2) << p[size_t(predicted)] << ")";
    out.description = os.str();
    return out;
  }

  EvalResult evaluate(nn::Module& module, const std::string& split, int64_t max_batches) override {
    LSF_CHECK(data_.count(split)) << "internal: split '" << split << "' was not loaded";
    vision::ImageClassifier& model = classifier(module);
    const bool was_training = model.is_training();
    model.eval();
    NoGradGuard no_grad;
    data::ImageLoader loader(data_.at(split),
                             data::ImagePipeline(pipeline_options(config_, /*training=*/false, spec_.in_channels), spec_.num_classes),
                             loader_options(/*training=*/false));
    int64_t batches = loader.batches_per_epoch();
    if (max_batches > 0) batches = std::min(batches, max_batches);
    loader.start(0, batches);
    double loss_sum = 0.0;
    int64_t correct1 = 0, correct5 = 0, examples = 0;
    for (int64_t i = 0; i < batches; ++i) {
      const data::ImageBatch b = loader.next().to(parameter_device(model));
      Tensor logits = model.forward(b.images);
      loss_sum += cross_entropy(logits, b.labels, {.reduction = Reduction::Sum}).item<double>();
      const TopK k = count_top_k(logits, b.labels);
      correct1 += k.correct1;
      correct5 += k.correct5;
      examples += b.labels.numel();
    }
    loader.stop();
    model.train(was_training);
    EvalResult r;
    r.split = split;
    r.loss = examples ? loss_sum / double(examples) : 0.0;
    const double n = examples ? double(examples) : 1.0;
    r.metrics = {{"top1", double(correct1) / n, Metric::Kind::Percent, "acc"},
                 {"top5", double(correct5) / n, Metric::Kind::Percent, "top5"},
                 {"correct", double(correct1), Metric::Kind::Count, ""},
                 {"examples", double(examples), Metric::Kind::Count, ""}};
    return r;
  }

  Selection selection() const override { return {"top1", /*higher_is_better=*/true}; }

  std::string describe(const EvalResult& r) const override {
    std::ostringstream os;
    os << "top-1 " << percent(r.metric("top1")) << " (" << int64_t(r.metric("correct")) << "/" << int64_t(r.metric("examples"))
       << "), top-5 " << percent(r.metric("top5"));
    return os.str();
  }

  ModelSummary summarize_model() override {
    vision::ImageSpec spec;
    if (needs_data_for_spec()) {
      load_data({"train"});
      spec = spec_;
    } else {
      spec = image_spec(config_, nullptr);
    }
    std::shared_ptr<vision::ImageClassifier> model;
    {
      nn::init::SkipRandomInit skip;  // counting only
      model = make_model(spec);
    }
    const vision::ModelCost cost = vision::measure_cost(*model);
    std::ostringstream os;
    os << s_.model.name << ", " << spec.image_size << "×" << spec.image_size << "×" << spec.in_channels << " images, "
       << spec.num_classes << " classes";
    return {.description = os.str(), .parameters = cost.parameters, .multiply_adds = cost.multiply_adds, .example = "image"};
  }

 private:
  static vision::ImageClassifier& classifier(nn::Module& model) {
    auto* c = dynamic_cast<vision::ImageClassifier*>(&model);
    LSF_CHECK(c != nullptr) << "internal: the image task was given a model that is not an ImageClassifier";
    return *c;
  }

  // The built-in datasets as decoded bytes at their own size (an image folder decodes lazily:
  // 0), one batch of images at data.image_size in float32 (the pipeline's output and the
  // model's copy), and the model's parameters, counted by building it without initialisation
  // (the presets bound its size) once the input batch is known to fit. Activations inside the
  // model are not estimated for this family.
  MemoryEstimate estimate_memory(MemoryUse use) const override {
    const SourceFacts facts = source_facts(s_.data.source);
    const double size = double(s_.data.image_size ? s_.data.image_size : facts.image_size);
    const double channels = double(s_.model.in_channels ? s_.model.in_channels : s_.data.channels ? s_.data.channels : facts.channels);
    const double examples = s_.data.source == ImageSource::Folder ? 0
                            : s_.data.source == ImageSource::Cifar10 || s_.data.source == ImageSource::Cifar100 ? 60000
                                                                                                               : 70000;
    MemoryEstimate e;
    e.add("dataset", examples * double(facts.channels) * double(facts.image_size) * double(facts.image_size),
          MemoryPlace::Host);
    const double batch = double(use == MemoryUse::Train ? config_.train.batch_size : loader_options(false).batch_size);
    e.add("image batches", 2 * 4 * batch * channels * size * size, MemoryPlace::Host);
    check_memory_fits(e, config_, "");  // before a model sized by the images is built
    if (!needs_data_for_spec()) {
      const vision::ImageSpec spec = image_spec(config_, nullptr);
      {  // and before one too large to build at all: the parameters its stage list implies at least
        MemoryEstimate at_least;
        add_parameter_parts(at_least, vision::parameter_lower_bound(s_.model.name, spec), use, config_);
        check_memory_fits(at_least, config_, "");
      }
      nn::init::SkipRandomInit skip;  // counting only
      const std::shared_ptr<vision::ImageClassifier> model = make_model(spec);
      const double parameters = double(model->parameter_count());
      MemoryEstimate with_model;
      add_parameter_parts(with_model, parameters, use, config_);
      if (use == MemoryUse::Train) with_model.add("activations", vision_activation_bytes(*model, batch));
      for (const MemoryPart& part : e.parts) with_model.parts.push_back(part);
      return with_model;
    }
    return e;
  }

  // A folder's classes are known only from its class folders.
  bool needs_data_for_spec() const { return s_.model.num_classes == 0 && s_.data.source == ImageSource::Folder; }

  std::shared_ptr<vision::ImageClassifier> make_model(const vision::ImageSpec& spec) const {
    try {
      return vision::make_image_classifier(s_.model.name, spec, classifier_options(config_));
    } catch (const Error& e) {
      LSF_FAIL() << "'model.name' (" << s_.model.name << ") for " << spec.image_size << "×" << spec.image_size
                 << " images ('data.image_size'): " << e.what();
    }
  }

  data::ImageLoaderOptions loader_options(bool training) const {
    const int64_t eval_batch = s_.data.eval_batch_size > 0 ? s_.data.eval_batch_size : config_.train.batch_size;
    return {.batch_size = training ? config_.train.batch_size : eval_batch,
            .shuffle = training,
            .drop_last = training,
            .seed = config_.train.seed,
            .num_workers = int(s_.data.workers),
            .prefetch = s_.data.prefetch,
            .shard = training ? shard_.rank : 0,
            .shards = training ? shard_.world : 1};
  }

  DataShard shard_;

  RunConfig config_;
  VisionSections s_;
  std::map<std::string, std::shared_ptr<const data::ImageDataset>> data_;
  std::shared_ptr<const data::ImageDataset> model_data_;
  vision::ImageSpec spec_;
  std::unique_ptr<data::ImageLoader> train_loader_;
  int64_t next_step_ = -1;  // the step the loader's stream delivers next (−1: not started)
};

// The family's registration: one task, "image".
[[maybe_unused]] const bool kRegistered = register_task_family(
    task_family_of<VisionSections, VisionTask>("vision", {kTask}, validate_vision, check_vision_data_paths));

}  // namespace

void VisionSections::visit(FieldVisitor& v) {
  v.field("data.source", data.source, kImageSourceNames);
  v.field("data.path", data.path);
  v.field("data.dev_fraction", data.dev_fraction);
  v.field("data.image_size", data.image_size);
  v.field("data.channels", data.channels);
  v.field("data.interpolation", data.interpolation, kInterpolationNames);
  v.field("data.mean", data.mean);
  v.field("data.std", data.std);
  v.field("data.random_resized_crop", data.random_resized_crop);
  v.field("data.crop_scale", data.crop_scale);
  v.field("data.crop_ratio", data.crop_ratio);
  v.field("data.hflip", data.hflip);
  v.field("data.rand_augment", data.rand_augment);
  v.field("data.color_jitter", data.color_jitter);
  v.field("data.force_color_jitter", data.force_color_jitter);
  v.field("data.erasing", data.erasing);
  v.field("data.mixup", data.mixup);
  v.field("data.cutmix", data.cutmix);
  v.field("data.mix_prob", data.mix_prob);
  v.field("data.switch_prob", data.switch_prob);
  v.field("data.label_smoothing", data.label_smoothing);
  v.field("data.crop_pct", data.crop_pct);
  v.field("data.eval_batch_size", data.eval_batch_size);
  v.field("data.workers", data.workers);
  v.field("data.prefetch", data.prefetch);
  v.field("model.name", model.name);
  v.field("model.num_classes", model.num_classes);
  v.field("model.in_channels", model.in_channels);
  v.field("model.drop_path", model.drop_path);
  v.field("model.drop_rate", model.drop_rate);
  v.field("model.qkv_bias", model.qkv_bias);
  v.field("model.dual_ln", model.dual_ln);
  v.field("model.kv_stride", model.kv_stride);
  v.field("model.dp_kernel", model.dp_kernel);
  v.field("model.batch_norm_projection", model.batch_norm_projection);
}

const VisionSections& vision_sections(const RunConfig& config) { return config.sections_as<VisionSections>(); }

SourceFacts source_facts(ImageSource source) {
  switch (source) {
    case ImageSource::FashionMnist:
    case ImageSource::Mnist: return {.num_classes = 10, .channels = 1, .image_size = 28};
    case ImageSource::Cifar10: return {.num_classes = 10, .channels = 3, .image_size = 32};
    case ImageSource::Cifar100: return {.num_classes = 100, .channels = 3, .image_size = 32};
    case ImageSource::Folder: return {.num_classes = 0, .channels = 3, .image_size = 0};
  }
  LSF_FAIL() << "internal: no ImageSource " << int(source);
}

std::pair<std::vector<float>, std::vector<float>> mean_std(const VisionDataConfig& d, int64_t channels) {
  std::vector<double> mean = d.mean, std = d.std;
  if (mean.empty()) {
    // Population statistics of the training images / 255 (Fashion-MNIST's checked by
    // data::channel_stats in tests/test_data_images.cpp; the others the values in common use).
    switch (d.source) {
      case ImageSource::FashionMnist: mean = {0.2860}, std = {0.3530}; break;
      case ImageSource::Mnist: mean = {0.1307}, std = {0.3081}; break;
      case ImageSource::Cifar10: mean = {0.4914, 0.4822, 0.4465}, std = {0.2470, 0.2435, 0.2616}; break;
      case ImageSource::Cifar100: mean = {0.5071, 0.4865, 0.4409}, std = {0.2673, 0.2564, 0.2762}; break;
      case ImageSource::Folder: mean = {0.485, 0.456, 0.406}, std = {0.229, 0.224, 0.225}; break;  // ImageNet's
    }
    LSF_CHECK(int64_t(mean.size()) == channels)
        << "the " << source_name(d.source) << " normalisation has " << mean.size() << " channels but the images have " << channels
        << " ('data.channels'): set 'data.mean' and 'data.std'";
  }
  return {std::vector<float>(mean.begin(), mean.end()), std::vector<float>(std.begin(), std.end())};
}

data::ImagePipelineOptions pipeline_options(const RunConfig& config, bool training, int64_t channels) {
  const VisionSections& s = vision_sections(config);
  const VisionDataConfig& d = s.data;
  data::ImagePipelineOptions o;
  o.train = training;
  o.image_size = d.image_size ? d.image_size : source_facts(d.source).image_size;
  o.channels = channels;
  o.interpolation = d.interpolation;
  std::tie(o.mean, o.std) = mean_std(d, channels);
  o.random_resized_crop = d.random_resized_crop;
  o.crop = {.scale_min = d.crop_scale[0], .scale_max = d.crop_scale[1], .ratio_min = d.crop_ratio[0], .ratio_max = d.crop_ratio[1]};
  o.hflip = d.hflip;
  o.rand_augment = d.rand_augment;
  o.color_jitter = {.brightness = d.color_jitter, .contrast = d.color_jitter, .saturation = d.color_jitter};
  o.force_color_jitter = d.force_color_jitter;
  o.erasing.probability = d.erasing;
  o.mixup = {.mixup_alpha = d.mixup, .cutmix_alpha = d.cutmix, .prob = d.mix_prob, .switch_prob = d.switch_prob,
             .label_smoothing = d.label_smoothing};
  o.crop_pct = d.crop_pct;
  return o;
}

vision::ImageSpec image_spec(const RunConfig& config, const data::ImageDataset* data) {
  const VisionSections& s = vision_sections(config);
  const SourceFacts facts = source_facts(s.data.source);
  vision::ImageSpec spec;
  spec.image_size = s.data.image_size ? s.data.image_size : facts.image_size;
  spec.in_channels = s.model.in_channels ? s.model.in_channels : s.data.channels ? s.data.channels : facts.channels;
  if (s.model.num_classes > 0) {
    spec.num_classes = s.model.num_classes;
  } else if (data != nullptr) {
    spec.num_classes = data->num_classes();
  } else {
    LSF_CHECK(facts.num_classes > 0) << "'model.num_classes' is 0 (the data's) and the " << source_name(s.data.source)
                                     << " classes are known only from its folders: set 'model.num_classes'";
    spec.num_classes = facts.num_classes;
  }
  return spec;
}

vision::ClassifierOptions classifier_options(const RunConfig& config) {
  const VisionModelConfig& m = vision_sections(config).model;
  vision::ClassifierOptions o;
  o.drop_rate = m.drop_rate;
  const vision::ClassifierFamily family = vision::classifier_family(m.name);
  if (family != vision::ClassifierFamily::Cnn) {
    o.drop_path = m.drop_path;
    o.qkv_bias = m.qkv_bias;
    o.dual_ln = m.dual_ln;
  }
  if (family == vision::ClassifierFamily::CvTLS) {
    o.kv_stride = m.kv_stride;
    o.dp_kernel = m.dp_kernel;
    o.batch_norm_projection = m.batch_norm_projection;
  }
  return o;
}

std::shared_ptr<const data::ImageDataset> load_image_split(const RunConfig& config, const std::string& split) {
  return load_splits(config, {split}).at(split);
}

TopK count_top_k(const Tensor& logits, const Tensor& labels) {
  LSF_CHECK(logits.dim() == 2 && labels.dim() == 1 && labels.size(0) == logits.size(0))
      << "count_top_k: logits [B, K] and labels [B] expected, got " << logits.shape() << " and " << labels.shape();
  const int64_t B = logits.size(0), K = logits.size(1), top = std::min<int64_t>(5, K);
  const std::vector<double> l = logits.detach().to(kF64).contiguous().to_vector<double>();
  const std::vector<int64_t> y = labels.to(kI64).to_vector<int64_t>();
  TopK t;
  for (int64_t b = 0; b < B; ++b) {
    const double* row = l.data() + b * K;
    const int64_t label = y[size_t(b)];
    LSF_CHECK(label >= 0 && label < K) << "count_top_k: label " << label << " outside [0, " << K << ")";
    int64_t rank = 0;  // logits above the label's, and equal ones of lower index (argmax's tie rule)
    for (int64_t j = 0; j < K; ++j) rank += row[j] > row[label] || (row[j] == row[label] && j < label);
    t.correct1 += rank == 0;
    t.correct5 += rank < top;
  }
  return t;
}

}  // namespace lsf::train
