// The Long Range Arena family for the trainer (models/train/task.h): data.task "listops",
// "text", "retrieval", "lra_image" (CIFAR-10 as LRA's grayscale pixel sequences; "image" is the
// vision family's, models/train/vision_task.h) or "pathfinder".
// Its "data" section says where the task's files are (the LRA release layout) or how the data is
// generated in memory (ListOps, Pathfinder, synthetic Text / Retrieval); its "model" section is the LRA classifier's options
// (models/lra/lra_model.h).
//
//   RunConfig c = load_config("configs/quickstart.json");
//   const LraSections& s = lra_sections(c);                   // c's data and model sections
//   std::unique_ptr<Task> task = make_task(c);                // an LraTask
//
// Batches: training batches are shuffled by train.seed with drop_last; evaluation batches keep
// the split's order and include the last, smaller batch, so an evaluation is a pure function of
// (weights, split, batch size). The padding multiple is data.pad_multiple, or the attention
// window for long-short attention (L must be a multiple of w); Linformer always gets
// model.max_seq_len tokens (its projection has a fixed length).
#pragma once

#include <memory>
#include <string>

#include "lsformer/data/batch.h"
#include "lsformer/data/dataset.h"
#include "lsformer/data/pathfinder_generate.h"
#include "lsformer/models/lra/lra_model.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/task.h"

namespace lsf::train {

// "data.generate": the task's data made in memory instead of read from files
// (docs/data-formats.md §1.4.7): listops by the LRA generator (data/listops.h), pathfinder by
// data/pathfinder_generate.h, text and retrieval as the synthetic byte-level tasks of
// data/lra_synthetic.h. The split sizes are train/dev/test (consecutive, disjoint index ranges
// of one seeded set: data.seed).
struct GenerateConfig {
  bool enabled = false;
  int64_t train = 96000, dev = 2000, test = 2000;
  int64_t min_length = 500, max_length = 2000;  // listops: tokens; text/retrieval: bytes per document (strict)
  int64_t max_depth = 10, max_args = 10;        // listops only
  int64_t image_size = 32;                      // pathfinder only: 32, 64 or 128
  data::PathfinderDifficulty difficulty = data::PathfinderDifficulty::Length14;  // pathfinder only
};

// "data.source" of lra_image: CIFAR-10's binary batches (LRA's data) or Fashion-MNIST's IDX
// files as the offline stand-in (data/image.h read_fashion_mnist_lra; data.path empty: Debian's
// copy, data/idx.h kDebianFashionMnistDir).
enum class LraImageSource { Cifar10, FashionMnist };
inline constexpr const char* kLraImageSourceNames[] = {"cifar10", "fashion_mnist"};

// "data.files": explicit files that replace the task's release layout under data.path
// (empty: derived from data.path, see data_files()).
struct DataFiles {
  std::string train, dev, test;
};

// The "data" section of an LRA task (data.task itself is RunConfig::task).
struct LraDataConfig {
  // The task's directory in its release layout (docs/data-formats.md §1.4):
  //   listops     .../listops-1000              basic_{train,val,test}.tsv
  //   text        .../aclImdb                   {train,test}/{neg,pos}/*.txt (dev = test, as LRA)
  //   retrieval   .../tsv_data                  new_aan_pairs.{train,eval,test}.tsv
  //   lra_image   .../cifar-10-batches-bin      data_batch_{1..5}.bin (45k train / 5k dev), test_batch.bin
  //               (data.source fashion_mnist: the IDX folder, default Debian's; 54k / 6k / 10k)
  //   pathfinder  .../pathfinder32/curv_contour_length_14   80/10/10 split by data.seed
  std::string path;
  DataFiles files;
  GenerateConfig generate;
  LraImageSource source = LraImageSource::Cifar10;  // lra_image only
  uint64_t seed = 0;          // generation (data.generate); Pathfinder's split shuffle
  int64_t max_length = 4000;  // text/retrieval: bytes kept per document
  int64_t seq_len = 0;        // > 0: every batch padded/truncated to exactly this; 0: per batch
  int64_t pad_multiple = 0;   // per-batch padding multiple; 0: the attention window (1 if none)
};

// The "model" section: the LRA model's own options (lra::LraModelOptions), with two
// differences: num_classes defaults to 0, meaning "the data's", and `dual` and `generator` are
// not config keys (the task sets dual; dropout uses the default generator).
struct ModelConfig : lra::LraModelOptions {
  ModelConfig() { num_classes = 0; }
};

struct LraSections final : TaskSections {
  LraDataConfig data;
  ModelConfig model;
  std::unique_ptr<TaskSections> clone() const override { return std::make_unique<LraSections>(*this); }
  void visit(FieldVisitor& v) override;
};

// The LRA sections of a config (an error naming the task when it is not an LRA task).
const LraSections& lra_sections(const RunConfig& config);

// The files (or directories) each split of `task` is read from, by data.files / data.path.
// Empty for generated data. dev and test may be the same path (text: aclImdb/test).
struct SplitPaths {
  std::string train, dev, test;
};
SplitPaths data_files(const std::string& task, const LraDataConfig& data);

struct TaskData {
  std::shared_ptr<const data::Dataset> train, dev, test;
};

// Every split (ListOps is generated once for all three).
TaskData load_task_data(const RunConfig& config);
// One split: "train", "dev" or "test" (generated ListOps makes all three and keeps one).
std::shared_ptr<const data::Dataset> load_split(const RunConfig& config, const std::string& split);

// The model options for this config and data (num_classes 0 → the data's; vocabulary and
// sequence length checked against the data, errors naming the model key).
lra::LraModelOptions model_options(const RunConfig& config, const data::Dataset& data);
std::shared_ptr<lra::LraClassifier> build_model(const RunConfig& config, const data::Dataset& data);

data::BatchOptions batch_options(const RunConfig& config, bool training);

// logits [B, classes] for a batch (both documents for a paired dataset).
Tensor forward(lra::LraClassifier& model, const data::Batch& batch);

// A short label of token `id` of an LRA dataset (Dataset::name) for pictures: ListOps's symbol
// ("[MAX", "7", "]"), a byte's character ("␣" for a space, "\x0a" for others), a pixel's value.
std::string lra_token_label(const std::string& dataset, int32_t id);

// The fraction of the split's examples whose label is the split's most frequent label.
double majority_class_accuracy(const data::Dataset& data);

}  // namespace lsf::train
