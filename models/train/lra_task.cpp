// The LRA tasks: config sections, datasets, model and batches from a RunConfig, and the Task the
// trainer runs (see lra_task.h).
#include "lsformer/models/train/lra_task.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <map>
#include <sstream>

#include "lsformer/data/idx.h"
#include "lsformer/data/image.h"
#include "lsformer/data/listops.h"
#include "lsformer/data/lra_synthetic.h"
#include "lsformer/data/pathfinder.h"
#include "lsformer/data/retrieval.h"
#include "lsformer/data/text.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/engine/error.h"
#include "lsformer/engine/profiler.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/models/train/config_checks.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/flops.h"
#include "lsformer/ops/loss.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/softmax.h"

namespace lsf::train {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kLraTasks = {"listops", "text", "retrieval", "lra_image", "pathfinder"};
const std::map<std::string, int64_t> kLraClasses = {{"listops", 10}, {"text", 2}, {"retrieval", 2}, {"lra_image", 10}, {"pathfinder", 2}};

std::shared_ptr<const data::Dataset> share(data::Dataset d) { return std::make_shared<const data::Dataset>(std::move(d)); }

// Examples [begin, end) of `d` as a dataset of their own (CIFAR-10's train/dev split).
data::Dataset slice(const data::Dataset& d, size_t begin, size_t end) {
  data::Dataset out = d;
  out.examples.assign(d.examples.begin() + begin, d.examples.begin() + end);
  return out;
}

data::ListOpsSplits generate_listops(const LraDataConfig& d) {
  data::ListOpsOptions o;
  o.max_depth = d.generate.max_depth;
  o.max_args = d.generate.max_args;
  o.min_length = d.generate.min_length;
  o.max_length = d.generate.max_length;
  o.seed = d.seed;
  return data::generate_listops(d.generate.train, d.generate.dev, d.generate.test, o);
}

// One generated split (data.generate) of pathfinder, text or retrieval: the consecutive index
// ranges train = [0, train), dev = [train, train + dev), test after them, of one seeded set.
data::Dataset generate_split(const std::string& task, const LraDataConfig& d, const std::string& split) {
  const GenerateConfig& g = d.generate;
  const int64_t first = split == "train" ? 0 : split == "dev" ? g.train : g.train + g.dev;
  const int64_t count = split == "train" ? g.train : split == "dev" ? g.dev : g.test;
  if (task == "pathfinder")
    return data::generate_pathfinder_dataset({.size = g.image_size, .difficulty = g.difficulty, .seed = d.seed}, first, count);
  const data::SyntheticTextOptions o{.min_length = g.min_length, .max_length = g.max_length, .seed = d.seed};
  if (task == "text") return data::synthetic_text(o, first, count);
  LSF_CHECK(task == "retrieval") << "internal: no generator for task " << task;
  return data::synthetic_retrieval(o, first, count);
}

// A text split: a TSV file ("label<TAB>text") or an aclImdb split folder (.../aclImdb/test).
data::Dataset read_text(const std::string& path, int64_t max_length) {
  if (fs::is_directory(path)) {
    fs::path p = fs::path(path).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();  // a trailing slash
    return data::read_imdb_folder(p.parent_path().string(), p.filename().string(), max_length);
  }
  return data::read_text_tsv(path, max_length);
}

data::Dataset read_split(const std::string& task, const LraDataConfig& d, const std::string& split) {
  SplitPaths paths = data_files(task, d);
  const std::string& path = split == "train" ? paths.train : split == "dev" ? paths.dev : paths.test;
  if (task == "listops") return data::read_listops_tsv(path);
  if (task == "text") return read_text(path, d.max_length);
  if (task == "retrieval") return data::read_retrieval_tsv(path, d.max_length);
  if (task == "pathfinder") return data::read_pathfinder(path, split == "dev" ? "val" : split, d.seed);
  if (d.source == LraImageSource::FashionMnist) {
    // Fashion-MNIST as LRA Image: its 60,000 training images split 54,000 / 6,000 (the same
    // 90/10 as CIFAR-10's below), its 10,000 test images the test split.
    if (split == "test") return data::read_fashion_mnist_lra(path, "test");
    data::Dataset all = data::read_fashion_mnist_lra(path, "train");
    const size_t cut = all.examples.size() * 9 / 10;
    return split == "train" ? slice(all, 0, cut) : slice(all, cut, all.examples.size());
  }
  // lra_image: CIFAR-10's five training batches split 45,000 / 5,000 (LRA: train[:90%], train[90%:])
  if (split == "test") return data::read_cifar10_gray({path});
  std::vector<std::string> batches;
  if (fs::is_regular_file(path)) {
    batches.push_back(path);  // data.files.train: one batch file of one's own
  } else {
    for (int i = 1; i <= 5; ++i) batches.push_back((fs::path(path) / ("data_batch_" + std::to_string(i) + ".bin")).string());
  }
  data::Dataset all = data::read_cifar10_gray(batches);
  size_t cut = all.examples.size() * 9 / 10;
  return split == "train" ? slice(all, 0, cut) : slice(all, cut, all.examples.size());
}

void check_split_name(const std::string& split) {
  LSF_CHECK(split == "train" || split == "dev" || split == "test")
      << "unknown split '" << split << "' (expected train, dev or test)";
}

std::string join(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

std::string percent(double fraction) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << 100.0 * fraction << "%";
  return os.str();
}

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  std::vector<int64_t> pred = argmax(logits.detach(), 1).to_vector<int64_t>();
  std::vector<int64_t> want = labels.to_vector<int64_t>();
  int64_t correct = 0;
  for (size_t i = 0; i < pred.size(); ++i) correct += pred[i] == want[i];
  return correct;
}

// ---- the config sections ----

void validate_lra(const std::string& source, const RunConfig& c) {
  const LraSections& s = lra_sections(c);
  const LraDataConfig& d = s.data;
  LSF_CHECK(d.source == LraImageSource::Cifar10 || c.task == "lra_image")
      << source << ": 'data.source' is only for task lra_image, not \"" << c.task << "\"";
  if (d.generate.enabled) {
    LSF_CHECK(c.task != "lra_image") << source << ": 'data.generate.enabled' is for listops, pathfinder, text and retrieval; "
                                     << "lra_image reads CIFAR-10, or Fashion-MNIST offline with data.source=fashion_mnist";
    // A path beside generation would be silently ignored: the user meant one of the two.
    for (const auto& [key, value] : {std::pair<const char*, const std::string&>{"data.path", d.path},
                                     {"data.files.train", d.files.train}, {"data.files.dev", d.files.dev},
                                     {"data.files.test", d.files.test}})
      LSF_CHECK(value.empty()) << source << ": '" << key << "' is \"" << value
                               << "\" but 'data.generate.enabled' is true, so it would be ignored: set "
                                  "data.generate.enabled=false to read files, or leave '"
                               << key << "' empty to generate the data in memory";
    at_least(source, "data.generate.train", double(d.generate.train), 1);
    at_least(source, "data.generate.dev", double(d.generate.dev), 1);
    at_least(source, "data.generate.test", double(d.generate.test), 1);
    at_least(source, "data.generate.min_length", double(d.generate.min_length), 0);
    LSF_CHECK(d.generate.max_length > d.generate.min_length + 1)
        << source << ": 'data.generate.max_length' (" << d.generate.max_length << ") must exceed 'data.generate.min_length' ("
        << d.generate.min_length << ") by at least 2 (the bounds are strict)";
    at_least(source, "data.generate.max_depth", double(d.generate.max_depth), 2);
    at_least(source, "data.generate.max_args", double(d.generate.max_args), 2);
    LSF_CHECK(d.generate.image_size == 32 || d.generate.image_size == 64 || d.generate.image_size == 128)
        << source << ": 'data.generate.image_size' must be 32, 64 or 128, got " << d.generate.image_size;
  } else {
    SplitPaths p = data_files(c.task, d);
    LSF_CHECK(!p.train.empty() && !p.dev.empty() && !p.test.empty())
        << source << ": 'data.path' (or 'data.files.*') must name the " << c.task << " data"
        << (c.task == "lra_image" ? ", or set data.source=fashion_mnist for the offline stand-in"
                                  : ", or set 'data.generate.enabled' to generate it in memory");
  }
  // Keys another task (or another attention) reads (config_checks.h check_key_read). The
  // generate.* keys of a run that reads files stay allowed, so that
  // --set data.generate.enabled=false switches a generating config to files.
  {
    const GenerateConfig g0;
    const std::string& t = c.task;
    auto check = [&](const char* key, bool differs, bool read, const char* readers) {
      check_key_read(source, key, differs, read, readers, "data.task", t);
    };
    check("data.generate.image_size", d.generate.image_size != g0.image_size, t == "pathfinder", "pathfinder only");
    check("data.generate.difficulty", d.generate.difficulty != g0.difficulty, t == "pathfinder", "pathfinder only");
    check("data.generate.max_depth", d.generate.max_depth != g0.max_depth, t == "listops", "listops only");
    check("data.generate.max_args", d.generate.max_args != g0.max_args, t == "listops", "listops only");
    check("data.generate.min_length", d.generate.min_length != g0.min_length, t != "pathfinder", "listops, text and retrieval");
    check("data.generate.max_length", d.generate.max_length != g0.max_length, t != "pathfinder", "listops, text and retrieval");
    check("data.max_length", d.max_length != LraDataConfig{}.max_length, t == "text" || t == "retrieval", "text and retrieval only");
    check_key_read(source, "model.linformer_k", s.model.linformer_k != ModelConfig{}.linformer_k,
                   s.model.attention == lra::AttentionKind::Linformer, "linformer attention only", "model.attention",
                   lra::to_string(s.model.attention));
  }
  at_least(source, "data.max_length", double(d.max_length), 1);
  at_least(source, "data.seq_len", double(d.seq_len), 0);
  at_least(source, "data.pad_multiple", double(d.pad_multiple), 0);

  const ModelConfig& m = s.model;
  using lra::AttentionKind;
  at_least(source, "model.vocab_size", double(m.vocab_size), 2);
  at_least(source, "model.max_seq_len", double(m.max_seq_len), 1);
  at_least(source, "model.dim", double(m.dim), 1);
  at_least(source, "model.heads", double(m.heads), 1);
  LSF_CHECK(m.dim % m.heads == 0) << source << ": 'model.dim' (" << m.dim << ") must be a multiple of 'model.heads' (" << m.heads << ")";
  at_least(source, "model.layers", double(m.layers), 1);
  at_least(source, "model.ffn_dim", double(m.ffn_dim), 1);
  at_least(source, "model.num_classes", double(m.num_classes), 0);
  at_least(source, "model.window", double(m.window), 0);
  at_least(source, "model.rank", double(m.rank), 0);
  at_least(source, "model.linformer_k", double(m.linformer_k), 1);
  in_unit(source, "model.dropout", m.dropout);
  in_unit(source, "model.attention_dropout", m.attention_dropout);
  at_least(source, "model.head_hidden", double(m.head_hidden), 1);
  LSF_CHECK(d.seq_len <= m.max_seq_len) << source << ": 'data.seq_len' (" << d.seq_len << ") exceeds 'model.max_seq_len' ("
                                        << m.max_seq_len << ")";
  if (m.attention == AttentionKind::Linformer) {
    LSF_CHECK(d.seq_len == 0 || d.seq_len == m.max_seq_len)
        << source << ": linformer projects a fixed length: 'data.seq_len' must be 0 or 'model.max_seq_len' (" << m.max_seq_len
        << "), got " << d.seq_len;
    LSF_CHECK(m.pooling == lra::Pooling::Mean) << source << ": linformer has a fixed sequence length, so no CLS slot: "
                                               << "'model.pooling' must be \"mean\", got \"" << lra::to_string(m.pooling) << "\"";
  }
  if (m.attention == AttentionKind::LongShort && m.window == 0 && m.rank == 0) {
    LSF_CHECK(m.layers == 1 && m.pooling == lra::Pooling::Cls)
        << source << ": 'model.window' = 'model.rank' = 0 leaves only the CLS to attend to: it needs 'model.layers' = 1 and "
        << "'model.pooling' = \"cls\"";
  }
  if (m.attention == AttentionKind::LongShort && m.window > 0 && d.seq_len > 0) {
    LSF_CHECK(d.seq_len % m.window == 0) << source << ": 'data.seq_len' (" << d.seq_len << ") must be a multiple of 'model.window' ("
                                         << m.window << ")";
  }
}

void check_lra_data_paths(const RunConfig& config) {
  const LraDataConfig& d = lra_sections(config).data;
  if (d.generate.enabled) return;
  const std::string& task = config.task;
  if (task == "lra_image" && d.source == LraImageSource::FashionMnist) {
    if (d.path.empty() && d.files.train.empty()) data::find_fashion_mnist();  // names the package when missing
  }
  SplitPaths p = data_files(task, d);
  auto check = [&](const char* split, const std::string& path, const std::string& key) {
    LSF_CHECK(fs::exists(path)) << "'" << key << "': the " << task << " " << split << " data '" << path << "' does not exist"
                                << (task == "listops"      ? " (`lsf data listops --out DIR` generates ListOps in that layout)"
                                    : task == "pathfinder" ? " (`lsf data pathfinder --out DIR` generates Pathfinder in that layout, "
                                                             "or set data.generate.enabled to make it in memory)"
                                                           : "");
  };
  check("train", p.train, d.files.train.empty() ? "data.path" : "data.files.train");
  check("dev", p.dev, d.files.dev.empty() ? "data.path" : "data.files.dev");
  check("test", p.test, d.files.test.empty() ? "data.path" : "data.files.test");
  if (task == "lra_image" && d.source == LraImageSource::Cifar10 && d.files.train.empty())
    for (int i = 1; i <= 5; ++i) {
      std::string f = join(d.path, "data_batch_" + std::to_string(i) + ".bin");
      LSF_CHECK(fs::exists(f)) << "'data.path': the CIFAR-10 training batch '" << f << "' does not exist";
    }
}

// ---- the Task ----

// Rows [shard.first(B), + shard.rows(B)) of a batch of B rows (all of it for one rank).
data::Batch shard_rows(data::Batch b, const DataShard& shard) {
  if (shard.world == 1) return b;
  const int64_t B = b.labels.size(0), first = shard.first(B), rows = shard.rows(B);
  auto cut = [&](Tensor& t) {
    if (t.defined()) t = t.narrow(0, first, rows).contiguous();
  };
  cut(b.tokens), cut(b.mask), cut(b.tokens2), cut(b.mask2), cut(b.labels);
  return b;
}

class LraTask final : public Task {
 public:
  explicit LraTask(const RunConfig& config) : config_(config) {}

  void load_data(const std::vector<std::string>& splits) override {
    for (const auto& s : splits) check_split_name(s);
    if (std::find(splits.begin(), splits.end(), "train") != splits.end() && splits.size() == 3) {
      TaskData all = load_task_data(config_);
      data_ = {{"train", all.train}, {"dev", all.dev}, {"test", all.test}};
    } else {
      for (const auto& s : splits) data_[s] = load_split(config_, s);
    }
    // An empty split (a file holding only its header, a Pathfinder folder too small for a dev
    // tenth) is named with its file here: later it surfaced as "BatchLoader: dataset has no examples".
    const LraDataConfig& d = lra_sections(config_).data;
    const SplitPaths paths = d.generate.enabled ? SplitPaths{} : data_files(config_.task, d);
    for (const auto& [name, split] : data_) {
      const std::string& file = name == "train" ? paths.train : name == "dev" ? paths.dev : paths.test;
      LSF_CHECK(!split->examples.empty()) << "the " << name << " split of " << config_.task
                                          << (file.empty() ? std::string() : " ('" + file + "')")
                                          << " holds no examples: an empty file, a header alone, or too few examples to split";
    }
    model_data_ = data_.at(splits.front());
    if (data_.count("train")) {
      LSF_CHECK(int64_t(data_["train"]->examples.size()) >= config_.train.batch_size)
          << "the training split has " << data_["train"]->examples.size() << " examples, fewer than 'train.batch_size' ("
          << config_.train.batch_size << ")";
      train_batches_ = std::make_unique<data::BatchLoader>(data_["train"], batch_options(config_, /*training=*/true));
    }
    for (const auto& [name, d] : data_) model_options(config_, *d);  // every split must fit the model (fail now)
  }

  std::string describe_data() const override {
    std::ostringstream os;
    os << model_data_->name << " (";
    const char* sep = "";
    for (const char* s : {"train", "dev", "test"})
      if (data_.count(s)) {
        os << sep << data_.at(s)->examples.size() << " " << s;
        sep = " / ";
      }
    os << " examples) with " << lra::to_string(lra_sections(config_).model.attention) << " attention";
    return os.str();
  }

  std::shared_ptr<nn::Module> build_model() override { return train::build_model(config_, *model_data_); }

  // Data parallelism: every rank builds the whole global batch (token ids: cheap) and keeps its
  // rows, so its rows are padded exactly as a single process pads them.
  void set_data_shard(const DataShard& shard) override { shard_ = shard; }

  TrainStep train_step(nn::Module& model, int64_t step) override {
    const data::Batch batch = shard_rows(train_batches_->batch(step), shard_).to(parameter_device(model));
    Tensor logits = forward(classifier(model), batch);
    TrainStep s;
    profiler::PhaseScope phase("loss");
    s.loss = cross_entropy(logits, batch.labels);
    s.units = double(batch.labels.numel());
    s.tally.add("correct", double(count_correct(logits, batch.labels)));
    s.tally.add("examples", double(batch.labels.numel()));
    return s;
  }

  std::vector<Metric> window_metrics(const Tally& sums, int64_t /*steps*/) const override {
    const double examples = sums.get("examples");
    return {{"accuracy", examples > 0 ? sums.get("correct") / examples : 0.0, Metric::Kind::Percent, "acc"}};
  }

  const char* throughput_unit() const override { return "samples"; }

  // The split's batches in order (the first max_batches; 0: all), each with the model's logits
  // [B, C], in eval mode without recording; the model's mode is restored afterwards.
  template <typename Visit>
  void for_each_eval_batch(nn::Module& module, const std::string& split, int64_t max_batches, Visit&& visit) {
    LSF_CHECK(data_.count(split)) << "internal: split '" << split << "' was not loaded";
    lra::LraClassifier& model = classifier(module);
    struct ModeRestore {
      lra::LraClassifier& model;
      bool was_training;
      ~ModeRestore() { model.train(was_training); }
    } restore{model, model.is_training()};
    model.eval();
    NoGradGuard no_grad;
    data::BatchLoader loader(data_.at(split), batch_options(config_, /*training=*/false));
    int64_t batches = loader.batches_per_epoch();
    if (max_batches > 0) batches = std::min(batches, max_batches);
    for (int64_t i = 0; i < batches; ++i) {
      const data::Batch b = loader.batch(i).to(parameter_device(model));
      visit(b, forward(model, b));
    }
  }

  EvalResult evaluate(nn::Module& module, const std::string& split, int64_t max_batches) override {
    double loss_sum = 0.0;
    int64_t correct = 0, examples = 0;
    for_each_eval_batch(module, split, max_batches, [&](const data::Batch& b, const Tensor& logits) {
      loss_sum += cross_entropy(logits, b.labels, {.reduction = Reduction::Sum}).item<float>();
      correct += count_correct(logits, b.labels);
      examples += b.labels.numel();
    });
    EvalResult r;
    r.split = split;
    r.loss = examples ? loss_sum / double(examples) : 0.0;
    r.metrics = {{"accuracy", examples ? double(correct) / double(examples) : 0.0, Metric::Kind::Percent, "acc"},
                 {"correct", double(correct), Metric::Kind::Count, ""},
                 {"examples", double(examples), Metric::Kind::Count, ""},
                 {"majority_accuracy", majority_class_accuracy(*data_.at(split)), Metric::Kind::Percent, ""}};
    return r;
  }

  Selection selection() const override { return {"accuracy", /*higher_is_better=*/true}; }

  bool has_confusion_matrix() const override { return true; }
  ConfusionMatrix confusion_matrix(nn::Module& module, const std::string& split) override {
    ConfusionMatrix m;
    for_each_eval_batch(module, split, /*max_batches=*/0, [&](const data::Batch& b, const Tensor& logits) {  // [B, C]
      if (m.classes == 0) m.classes = logits.size(1), m.counts.assign(size_t(m.classes * m.classes), 0);
      const std::vector<int64_t> predicted = argmax(logits, 1).to_vector<int64_t>();
      const std::vector<int64_t> truth = b.labels.to_vector<int64_t>();
      for (size_t k = 0; k < truth.size(); ++k) ++m.counts[size_t(truth[k] * m.classes + predicted[k])];
    });
    return m;
  }

  int64_t examples(const std::string& split) const override {
    check_split_name(split);
    LSF_CHECK(data_.count(split)) << "internal: split '" << split << "' was not loaded";
    return int64_t(data_.at(split)->examples.size());
  }

  // The example alone in a batch of one (padded to the padding multiple only: padding changes
  // no real token's output, so its attention is the one it gets inside an evaluation batch).
  InspectedExample forward_example(nn::Module& module, const std::string& split, int64_t index) override {
    const int64_t count = examples(split);
    LSF_CHECK(index >= 0 && index < count)
        << "example index " << index << " is out of range for the " << split << " split (0.." << count - 1 << ")";
    const data::Dataset& all = *data_.at(split);
    auto one = std::make_shared<data::Dataset>(data::Dataset{.name = all.name,
                                                             .examples = {all.examples[size_t(index)]},
                                                             .vocab_size = all.vocab_size,
                                                             .num_classes = all.num_classes,
                                                             .paired = all.paired});  // not a copy of the split
    data::BatchOptions options = batch_options(config_, /*training=*/false);
    options.batch_size = 1;
    const data::Batch b = data::BatchLoader(one, options).batch(0).to(parameter_device(module));
    lra::LraClassifier& model = classifier(module);
    const bool was_training = model.is_training();
    model.eval();
    NoGradGuard no_grad;
    const Tensor logits = forward(model, b);  // [1, C]
    model.train(was_training);
    const std::vector<float> p = softmax(logits, 1).to_vector<float>();
    const int64_t predicted = std::max_element(p.begin(), p.end()) - p.begin();
    const data::Example& ex = one->examples.front();
    InspectedExample out;
    for (int32_t id : ex.tokens) out.tokens.push_back(lra_token_label(all.name, id));
    const lra::LraBlock& last = *model.model->blocks.back();
    if (model.options().pooling == lra::Pooling::Cls && last.cls_as_token) out.cls_token_attention = last.mha.get();
    if (config_.task == "lra_image" || config_.task == "pathfinder") {
      // The tokens are the grayscale pixels of a square image, row-major: draw attention over it.
      const int64_t n = int64_t(ex.tokens.size()), side = int64_t(std::llround(std::sqrt(double(n))));
      if (side > 0 && side * side == n) {
        for (int32_t id : ex.tokens) out.pixels.push_back(uint8_t(std::clamp(id, 0, 255)));
        out.height = out.width = side;
        out.channels = 1;
        out.pixel_sequence = true;
      }
    }
    std::ostringstream os;
    os << config_.task << " " << split << " example " << index << ": " << ex.tokens.size() << " tokens"
       << (ex.tokens2.empty() ? "" : " (first document)") << ", label " << ex.label << ", predicted " << predicted
       << " (p " << std::fixed << std::setprecision(2) << p[size_t(predicted)] << ")";
    out.description = os.str();
    return out;
  }

  // Without data: every LRA task has a fixed class count and pairing. The cost is one forward
  // pass of one example of the config's length (data.seq_len, else model.max_seq_len; both
  // documents for Retrieval), every token real.
  ModelSummary summarize_model() override {
    const LraSections& s = lra_sections(config_);
    lra::LraModelOptions o = s.model;
    if (o.num_classes == 0) o.num_classes = kLraClasses.at(config_.task);
    o.dual = config_.task == "retrieval";
    const int64_t multiple = batch_options(config_, false).pad_multiple;
    int64_t length = s.model.attention == lra::AttentionKind::Linformer ? o.max_seq_len : s.data.seq_len > 0 ? s.data.seq_len : o.max_seq_len;
    length = length / multiple * multiple;
    LSF_CHECK(length > 0) << "'model.max_seq_len' (" << o.max_seq_len << ") holds no multiple of the padding (" << multiple << ")";
    std::shared_ptr<lra::LraClassifier> model;
    {
      nn::init::SkipRandomInit skip;  // counting only
      model = std::make_shared<lra::LraClassifier>(o);
    }
    model->eval();
    NoGradGuard no_grad;
    const Tensor tokens = zeros({1, length}, kI64), mask = ones({1, length}, kBool);
    FlopCounter counter;
    if (o.dual) {
      model->forward(tokens, mask, tokens, mask);
    } else {
      model->forward(tokens, mask);
    }
    std::ostringstream os, example;
    os << "LRA " << config_.task << " classifier (" << lra::to_string(o.attention) << " attention, " << o.layers << " layers, d "
       << o.dim << ", " << o.num_classes << " classes)";
    example << (o.dual ? "pair of sequences" : "sequence") << " of " << length << " tokens";
    return {.description = os.str(), .parameters = model->parameter_count(), .multiply_adds = counter.multiply_adds(),
            .example = example.str()};
  }

  // Parameters counted from the model's shapes (lra_model.h), activations of one training batch
  // at the longest length the data can have, and the dataset: generated ListOps rows (source
  // text ≈ 3 bytes and an int32 id per token, at the mean of the length bounds), or the split
  // files' sizes × 5 (each byte may become a 4-byte id). Folders (IMDb, Pathfinder) count 0.
  MemoryEstimate estimate_memory(MemoryUse use) const override {
    const LraSections& s = lra_sections(config_);
    const lra::LraModelOptions& m = s.model;
    const double d = double(m.dim), heads = double(m.heads), classes = m.num_classes > 0 ? double(m.num_classes) : 10.0;
    const bool dual = config_.task == "retrieval";
    double extra = 0, span = 0;
    const double n_max = double(m.max_seq_len);
    double n = s.data.seq_len > 0 ? double(s.data.seq_len) : n_max;
    if (s.data.seq_len == 0 && s.data.generate.enabled) n = std::min(n_max, double(s.data.generate.max_length) + 1);
    if (s.data.seq_len == 0 && (config_.task == "text" || config_.task == "retrieval"))
      n = std::min(n_max, double(s.data.max_length) + 1);
    switch (m.attention) {
      case lra::AttentionKind::LongShort:
        extra = 4 * d + d * heads * double(m.rank) + heads * double(m.rank);
        span = 2 * double(m.window) + 2 * double(m.rank);
        break;
      case lra::AttentionKind::Linformer:
        extra = 2 * n_max * double(m.linformer_k);
        span = double(m.linformer_k);
        n = n_max;
        break;
      case lra::AttentionKind::Full: span = n; break;
    }
    const double head_in = dual ? 4 * d : d;
    const double parameters = (double(m.vocab_size) + n_max) * d +
                              transformer_block_parameters(d, double(m.ffn_dim), double(m.layers), extra) + 2 * d +
                              head_in * double(m.head_hidden) + double(m.head_hidden) + double(m.head_hidden) * classes + classes;
    MemoryEstimate e;
    add_parameter_parts(e, parameters, use, config_);
    const double batch = double(use == MemoryUse::Train ? config_.train.batch_size : 1) * (dual ? 2 : 1);
    if (use == MemoryUse::Train)
      e.add("activations", transformer_activation_bytes(batch * n, d, double(m.ffn_dim), heads, span, double(m.layers)));
    const GenerateConfig& g = s.data.generate;
    if (g.enabled) {
      const double rows = double(g.train) + double(g.dev) + double(g.test);
      e.add("generated dataset", rows * (7.0 * 0.5 * (double(g.min_length) + double(g.max_length)) + 150.0),
            MemoryPlace::Host);
    } else {
      const SplitPaths p = data_files(config_.task, s.data);
      double bytes = 0;
      for (const std::string& f : {p.train, p.dev, p.test}) {
        std::error_code ec;
        if (!f.empty() && fs::is_regular_file(f, ec)) bytes += double(fs::file_size(f, ec));
      }
      e.add("dataset", 5 * bytes, MemoryPlace::Host);
    }
    return e;
  }

  std::string describe(const EvalResult& r) const override {
    std::ostringstream os;
    os << "accuracy " << percent(r.metric("accuracy")) << " (" << int64_t(r.metric("correct")) << "/"
       << int64_t(r.metric("examples")) << "; majority class " << percent(r.metric("majority_accuracy")) << ")";
    return os.str();
  }

 private:
  DataShard shard_;
  static lra::LraClassifier& classifier(nn::Module& model) {
    auto* c = dynamic_cast<lra::LraClassifier*>(&model);
    LSF_CHECK(c != nullptr) << "internal: the LRA task was given a model that is not an LraClassifier";
    return *c;
  }

  RunConfig config_;
  std::map<std::string, std::shared_ptr<const data::Dataset>> data_;
  std::shared_ptr<const data::Dataset> model_data_;
  std::unique_ptr<data::BatchLoader> train_batches_;
};

// The family's registration: the five LRA tasks.
[[maybe_unused]] const bool kRegistered =
    register_task_family(task_family_of<LraSections, LraTask>("lra", kLraTasks, validate_lra, check_lra_data_paths));

}  // namespace

void LraSections::visit(FieldVisitor& v) {
  v.field("data.path", data.path);
  v.field("data.files.train", data.files.train);
  v.field("data.files.dev", data.files.dev);
  v.field("data.files.test", data.files.test);
  v.field("data.generate.enabled", data.generate.enabled);
  v.field("data.generate.train", data.generate.train);
  v.field("data.generate.dev", data.generate.dev);
  v.field("data.generate.test", data.generate.test);
  v.field("data.generate.min_length", data.generate.min_length);
  v.field("data.generate.max_length", data.generate.max_length);
  v.field("data.generate.max_depth", data.generate.max_depth);
  v.field("data.generate.max_args", data.generate.max_args);
  v.field("data.generate.image_size", data.generate.image_size);
  v.field("data.generate.difficulty", data.generate.difficulty, data::kPathfinderDifficultyNames);
  v.field("data.source", data.source, kLraImageSourceNames);
  v.field("data.seed", data.seed);
  v.field("data.max_length", data.max_length);
  v.field("data.seq_len", data.seq_len);
  v.field("data.pad_multiple", data.pad_multiple);
  v.field("model.vocab_size", model.vocab_size);
  v.field("model.max_seq_len", model.max_seq_len);
  v.field("model.dim", model.dim);
  v.field("model.heads", model.heads);
  v.field("model.layers", model.layers);
  v.field("model.ffn_dim", model.ffn_dim);
  v.field("model.num_classes", model.num_classes);
  v.field("model.attention", model.attention, lra::kAttentionKindNames);
  v.field("model.window", model.window);
  v.field("model.rank", model.rank);
  v.field("model.linformer_k", model.linformer_k);
  v.field("model.dropout", model.dropout);
  v.field("model.attention_dropout", model.attention_dropout);
  v.field("model.pooling", model.pooling, lra::kPoolingNames);
  v.field("model.head_hidden", model.head_hidden);
  v.field("model.fused", model.fused);
  v.field("model.packed", model.packed);
}

const LraSections& lra_sections(const RunConfig& config) { return config.sections_as<LraSections>(); }

SplitPaths data_files(const std::string& task, const LraDataConfig& d) {
  if (d.generate.enabled) return {};
  SplitPaths p;
  if (task == "lra_image" && d.source == LraImageSource::FashionMnist && d.path.empty())
    p = {data::kDebianFashionMnistDir, data::kDebianFashionMnistDir, data::kDebianFashionMnistDir};
  if (!d.path.empty()) {
    if (task == "listops") {
      p = {join(d.path, "basic_train.tsv"), join(d.path, "basic_val.tsv"), join(d.path, "basic_test.tsv")};
    } else if (task == "text") {
      p = {join(d.path, "train"), join(d.path, "test"), join(d.path, "test")};  // LRA: dev = test
    } else if (task == "retrieval") {
      p = {join(d.path, "new_aan_pairs.train.tsv"), join(d.path, "new_aan_pairs.eval.tsv"),
           join(d.path, "new_aan_pairs.test.tsv")};
    } else if (task == "lra_image" && d.source == LraImageSource::FashionMnist) {
      p = {d.path, d.path, d.path};  // the IDX folder: train/dev from train-*, test from t10k-*
    } else if (task == "lra_image") {
      p = {d.path, d.path, join(d.path, "test_batch.bin")};  // dev: the last 10% of the training batches
    } else {
      p = {d.path, d.path, d.path};  // pathfinder: one folder, split 80/10/10
    }
  }
  if (!d.files.train.empty()) p.train = d.files.train;
  if (!d.files.dev.empty()) p.dev = d.files.dev;
  if (!d.files.test.empty()) p.test = d.files.test;
  return p;
}

TaskData load_task_data(const RunConfig& config) {
  const LraDataConfig& d = lra_sections(config).data;
  if (d.generate.enabled && config.task == "listops") {
    data::ListOpsSplits s = generate_listops(d);
    return {share(data::listops_dataset(s.train)), share(data::listops_dataset(s.val)), share(data::listops_dataset(s.test))};
  }
  if (d.generate.enabled)
    return {share(generate_split(config.task, d, "train")), share(generate_split(config.task, d, "dev")),
            share(generate_split(config.task, d, "test"))};
  validate_data_paths(config);
  return {share(read_split(config.task, d, "train")), share(read_split(config.task, d, "dev")),
          share(read_split(config.task, d, "test"))};
}

std::shared_ptr<const data::Dataset> load_split(const RunConfig& config, const std::string& split) {
  check_split_name(split);
  const LraDataConfig& d = lra_sections(config).data;
  if (d.generate.enabled && config.task == "listops") {
    data::ListOpsSplits s = generate_listops(d);
    return share(data::listops_dataset(split == "train" ? s.train : split == "dev" ? s.val : s.test));
  }
  if (d.generate.enabled) return share(generate_split(config.task, d, split));
  validate_data_paths(config);
  return share(read_split(config.task, d, split));
}

lra::LraModelOptions model_options(const RunConfig& config, const data::Dataset& data) {
  const LraSections& s = lra_sections(config);
  const ModelConfig& m = s.model;
  LSF_CHECK(m.vocab_size >= data.vocab_size) << "'model.vocab_size' (" << m.vocab_size << ") is smaller than the " << data.name
                                             << " vocabulary (" << data.vocab_size << ")";
  LSF_CHECK(m.num_classes == 0 || m.num_classes >= data.num_classes)
      << "'model.num_classes' (" << m.num_classes << ") is smaller than the " << data.name << " classes (" << data.num_classes << ")";
  // The longest example must fit the position table unless batches are cut to data.seq_len.
  if (s.data.seq_len == 0 && m.attention != lra::AttentionKind::Linformer) {
    size_t longest = 0;
    for (const auto& e : data.examples) longest = std::max({longest, e.tokens.size(), e.tokens2.size()});
    int64_t multiple = batch_options(config, false).pad_multiple;
    int64_t padded = (int64_t(longest) + multiple - 1) / multiple * multiple;
    // The key that sets the multiple (batch_options) is named: a window of 1000 pads 59 tokens to 1000.
    std::string padding;
    if (multiple > 1)
      padding = " (" + std::to_string(padded) + " padded to a multiple of " +
                (s.data.pad_multiple > 0 ? "'data.pad_multiple'" : "'model.window'") + " = " + std::to_string(multiple) + ")";
    LSF_CHECK(padded <= m.max_seq_len) << "the longest " << data.name << " example has " << longest << " tokens" << padding
                                       << ", more than 'model.max_seq_len' (" << m.max_seq_len
                                       << "): raise it, or set 'data.seq_len' to truncate";
  }
  lra::LraModelOptions o = m;
  if (o.num_classes == 0) o.num_classes = data.num_classes;
  o.dual = data.paired;
  return o;
}

std::shared_ptr<lra::LraClassifier> build_model(const RunConfig& config, const data::Dataset& data) {
  return std::make_shared<lra::LraClassifier>(model_options(config, data));
}

data::BatchOptions batch_options(const RunConfig& config, bool training) {
  const LraSections& s = lra_sections(config);
  data::BatchOptions o;
  o.batch_size = config.train.batch_size;
  o.seq_len = s.model.attention == lra::AttentionKind::Linformer ? s.model.max_seq_len : s.data.seq_len;
  if (s.data.pad_multiple > 0) {
    o.pad_multiple = s.data.pad_multiple;
  } else if (s.model.attention == lra::AttentionKind::LongShort && s.model.window > 0) {
    o.pad_multiple = s.model.window;
  } else {
    o.pad_multiple = 1;
  }
  o.shuffle = training;
  o.seed = config.train.seed;
  o.drop_last = training;
  return o;
}

std::string lra_token_label(const std::string& dataset, int32_t id) {
  if (dataset == "listops") {
    static const char* const names[] = {"<pad>", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
                                        "[MIN", "[MAX", "[MED", "[SM", "]"};
    return id >= 0 && id < int32_t(std::size(names)) ? std::string(names[id]) : std::string("#").append(std::to_string(id));
  }
  if (dataset == "text" || dataset == "retrieval") {  // byte + 1
    const int32_t byte = id - 1;
    if (byte >= 0x21 && byte < 0x7f) return std::string(1, char(byte));
    if (byte == ' ') return "␣";
    std::ostringstream os;
    os << "\\x" << std::hex << std::setw(2) << std::setfill('0') << byte;
    return os.str();
  }
  return std::to_string(id);  // pixel values
}

Tensor forward(lra::LraClassifier& model, const data::Batch& batch) {
  if (batch.tokens2.defined()) return model.forward(batch.tokens, batch.mask, batch.tokens2, batch.mask2);
  return model.forward(batch.tokens, batch.mask);
}

double majority_class_accuracy(const data::Dataset& data) {
  if (data.examples.empty()) return 0.0;
  std::map<int32_t, int64_t> counts;
  int64_t best = 0;
  for (const auto& e : data.examples) best = std::max(best, ++counts[e.label]);
  return double(best) / double(data.examples.size());
}

}  // namespace lsf::train
