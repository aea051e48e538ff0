// The Task interface: what a model family plugs into `lsf train` / `lsf eval` (models/train/
// trainer.h). The trainer owns the loop — optimizer, schedule, clipping, logging, checkpoints,
// resume — and knows nothing of any family; a Task owns its data, builds its model, computes
// one step's loss and evaluates a split.
//
//   std::unique_ptr<Task> task = make_task(config);   // by config.task ("listops", "text", ...)
//   task->load_data({"train", "dev", "test"});
//   std::shared_ptr<nn::Module> model = task->build_model();
//   TrainStep s = task->train_step(*model, step);      // batch `step`: a pure function of step
//   s.loss.backward();  ...optimizer step...
//   EvalResult dev = task->evaluate(*model, "dev", /*max_batches=*/0);
//
// A family registers itself once (a static TaskFamily object in its task file, like the kernel
// registrations), naming the data.task values it serves, the defaults of its "data" and
// "model" config sections, their validation, and a factory. So adding a family touches its own
// files only: the trainer, the config layer and the tools never branch on a task name.
//
// Contracts the trainer relies on:
//   * train_step(model, k) draws batch k as a pure function of (config, k): a resumed run sees
//     the batches an uninterrupted one sees. State that travels between steps (the char-LM's
//     memory) is the task's, saved and restored through state() / restore_state().
//   * evaluate() is a pure function of (weights, split, config): the end of training and
//     `lsf eval` print the same numbers.
//   * metrics come in a fixed order; the first of an EvalResult is the one best checkpoints are
//     chosen by (selection().higher_is_better says which way).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lsformer/engine/safetensors.h"
#include "lsformer/engine/tensor.h"
#include "lsformer/models/nn/module.h"
#include "lsformer/models/train/config.h"
#include "lsformer/models/train/memory_estimate.h"

namespace lsf::train {

// One named number of a log window or an evaluation ("accuracy", "bpc", "correct", ...).
struct Metric {
  enum class Kind { Number, Percent, Count };  // how it is shown; a Count is written as an integer
  std::string name;    // its metrics.jsonl key
  double value = 0.0;
  Kind kind = Kind::Number;
  std::string label;   // its name on the progress line ("acc"); empty: not shown there
};

// Counters a task sums over the steps of one log window (e.g. {"correct", 12}, {"examples", 32}),
// in the order they were first added; window_metrics() turns the sums into what is shown.
class Tally {
 public:
  void add(const std::string& name, double value);
  double get(const std::string& name) const;  // 0 when never added
  void clear() { entries_.clear(); }
  const std::vector<std::pair<std::string, double>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, double>> entries_;
};

// What one training step produced.
struct TrainStep {
  Tensor loss;        // [] the scalar backward() runs on
  double units = 0;   // samples (classifiers) or tokens (language models) in this step
  Tally tally;        // the step's counters (summed over the log window by the trainer)
};

// The result of evaluating one split.
struct EvalResult {
  std::string split;            // "train", "dev" or "test"
  int64_t step = 0;             // the training step of the weights evaluated
  double loss = 0.0;            // the task's mean loss (per example, per token, ...)
  std::vector<Metric> metrics;  // the task's numbers in display order; metrics[0] selects checkpoints
  // The value of metric `name`; throws naming the metric and those present when it is absent.
  double metric(const std::string& name) const;
  bool has(const std::string& name) const;
};

// Which way the first metric of an EvalResult is better, for best-checkpoint selection.
struct Selection {
  std::string metric;           // e.g. "accuracy", "bpc"
  bool higher_is_better = true;
};

// How often each true class (row) was predicted as each class (column) on a split.
struct ConfusionMatrix {
  int64_t classes = 0;          // C; 0: the task has no classes (a language model)
  std::vector<int64_t> counts;  // [C, C] row-major: counts[t * C + p]
  int64_t at(int64_t truth, int64_t predicted) const { return counts[size_t(truth * classes + predicted)]; }
};

// What `lsf info --model` reports about a config's model.
struct ModelSummary {
  std::string description;     // the model and what it is built for ("vil_ls_medium_224, 224×224×3 images, 1000 classes")
  int64_t parameters = 0;      // trainable scalars
  int64_t multiply_adds = -1;  // one forward pass of one example (ops/flops.h's convention); −1: not measured
  std::string example;         // what that example is ("image", "sequence of 2048 tokens")
};

// One example of a split after a forward pass for inspection (`lsf attention`): what the model
// saw, as text or as an image, for drawing next to what an nn::CaptureScope recorded.
struct InspectedExample {
  std::string description;           // e.g. "listops dev example 3: 42 tokens, label 7, predicted 7"
  int64_t batch_row = 0;             // the example's row in the recorded tensors' batch axis
  // Sequence tasks: one short label per position of the model's key axis, in order (for the
  // char-LM: the memory's C positions, then the block's M). Padding is not listed.
  std::vector<std::string> tokens;
  int64_t memory = 0;                // char-LM: positions of `tokens` that are memory (C); 0 otherwise
  // Vision: the image as the model saw it (after the evaluation transform, before
  // normalisation), [height, width, channels] uint8 row-major; empty for sequence tasks.
  std::vector<uint8_t> pixels;
  int64_t height = 0, width = 0, channels = 0;
  // LRA's pixel tasks (Image, Pathfinder): `pixels` is the image whose pixels, row-major, are
  // the sequence's tokens (one token per pixel; `tokens` labels them as for any sequence).
  bool pixel_sequence = false;
  // The attention layer whose sequence starts with a CLS token (the last layer of an LRA model
  // pooled at the CLS whose attention has no CLS slot joins the CLS to it as a token); null if none.
  const nn::Module* cls_token_attention = nullptr;
};

// Data parallelism (models/train/data_parallel.h): this process is rank `rank` of `world` and
// computes rows [first(B), first(B) + rows(B)) of every global training batch of B rows
// (B = train.batch_size, which the trainer has checked divides by world).
struct DataShard {
  int rank = 0;
  int world = 1;
  int64_t rows(int64_t global_rows) const { return global_rows / world; }
  int64_t first(int64_t global_rows) const { return int64_t(rank) * rows(global_rows); }
};

// Where a model's parameters are (the trainer puts a model on one device, train.device; the
// CPU for a model without parameters): a task moves each batch there before its forward.
inline Device parameter_device(const nn::Module& model) {
  const TensorList params = model.parameters();
  return params.empty() ? kCPU : params.front().device();
}

class Task {
 public:
  virtual ~Task() = default;

  // Reads (or generates) the named splits ("train", "dev", "test"), before anything else; the
  // first one named is the one build_model() checks the model against. Errors name the config
  // key and the file; an unknown split name is an error listing the three.
  virtual void load_data(const std::vector<std::string>& splits) = 0;
  // One line for the start of a run: the dataset and split sizes.
  virtual std::string describe_data() const = 0;
  // The model the config describes (parameters initialised from the default generator), after
  // checking it against the loaded data (vocabulary, classes, lengths).
  virtual std::shared_ptr<nn::Module> build_model() = 0;

  // Forward pass and loss of training batch `step` (0-based). The model is in training mode.
  virtual TrainStep train_step(nn::Module& model, int64_t step) = 0;
  // The metrics of a log window from its summed counters (steps: how many steps it spans; the
  // trainer shows the mean loss itself).
  virtual std::vector<Metric> window_metrics(const Tally& sums, int64_t steps) const = 0;
  // "samples" or "tokens": the unit of TrainStep::units, for the throughput on the progress line.
  virtual const char* throughput_unit() const = 0;

  // Evaluates `split` ("train", "dev", "test"): the first max_batches batches, 0 for all. The
  // model is put in evaluation mode for the call and restored afterwards.
  virtual EvalResult evaluate(nn::Module& model, const std::string& split, int64_t max_batches) = 0;
  virtual Selection selection() const = 0;
  // A line for the final report, e.g. "43.70% (437/1000; majority class 11.90%)".
  virtual std::string describe(const EvalResult& result) const = 0;

  // The config's model for `lsf info --model`, built without its random initialisation. The
  // default loads the "train" split, builds the model and counts its parameters; a family
  // overrides it to build without data where the config fixes what the data would, and to
  // count the multiply-adds of a forward pass.
  virtual ModelSummary summarize_model();

  // A classifier's confusion matrix on the whole split (the same batches as evaluate()); the
  // default is none (classes == 0), for tasks whose outputs are not classes. `lsf report` draws it.
  virtual bool has_confusion_matrix() const { return false; }
  virtual ConfusionMatrix confusion_matrix(nn::Module& model, const std::string& split);

  // Example `index` of `split` (loaded by load_data) run through the model in evaluation mode
  // without gradients, as evaluate() would see it (the model's mode is restored afterwards);
  // the caller observes the forward through an nn::CaptureScope. An index outside
  // [0, examples(split)) is an error naming it and the range. The default: not supported
  // (an error naming the task).
  virtual int64_t examples(const std::string& split) const;
  virtual InspectedExample forward_example(nn::Module& model, const std::string& split, int64_t index);

  // Why this task's model cannot train or evaluate on `device` (train.device), in words that
  // follow "but"; empty when it can. The trainer asks before it makes the run directory, so a
  // family with ops a backend lacks is refused at once rather than at its first step. Default:
  // every device.
  virtual std::string unsupported_device(Device /*device*/) const { return {}; }

  // Data-parallel training: called before load_data() with this rank's shard; train_step()
  // then computes the loss (mean over the shard's rows, so that the mean over ranks is the global
  // batch's) and the units and tally of the shard's rows only. Evaluation is not sharded. The
  // default accepts only world = 1, naming the family in its error.
  virtual void set_data_shard(const DataShard& shard);
  // State that must survive a checkpoint besides weights, optimizer and RNG (the char-LM's
  // memory). Stored as "task.<name>" tensors in last.safetensors. Default: none. When sharded,
  // dim 0 of every state tensor is the shard's rows (streams) of the batch: the trainer joins
  // the ranks' rows in rank order for the checkpoint and gives restore_state() this rank's rows.
  virtual NamedTensors state() const { return {}; }
  virtual void restore_state(const NamedTensors& tensors);

  // The memory this config needs (models/train/memory_estimate.h), from the config alone: called
  // before load_data and build_model, so that a config that cannot fit is refused before
  // anything large is allocated or generated. Default: no estimate (nothing is refused).
  virtual MemoryEstimate estimate_memory(MemoryUse use) const;
};

// Refuses (lsf::Error naming train.device and the reason) a task whose model cannot run on
// `device` (Task::unsupported_device).
void check_device_supported(const Task& task, Device device, const RunConfig& config);

// ---- the registry ----

// A model family as the config layer and the trainer see it.
struct TaskFamily {
  std::string name;                // "lra", "lm", ...: for messages
  std::vector<std::string> tasks;  // the data.task values it serves
  // The family's "data" and "model" sections with their defaults, for data.task = task.
  std::function<std::unique_ptr<TaskSections>(const std::string& task)> default_sections;
  // Checks the parsed config (its sections and the common ones it depends on); errors name the
  // key and start with `source`.
  std::function<void(const std::string& source, const RunConfig& config)> validate;
  // Checks that every file or directory the config reads exists (before a run directory is
  // created); the error names the config key and the path. Nothing to check for generated data.
  std::function<void(const RunConfig& config)> check_data_paths;
  std::function<std::unique_ptr<Task>(const RunConfig& config)> make;
};

// Registers a family; a task name served twice is an error. Returns true, so that a static
// initialiser registers it: [[maybe_unused]] const bool kRegistered = register_task_family(...);
bool register_task_family(TaskFamily family);

// The usual family: the sections are a default Sections for every task it serves, a task is
// TaskT(config). validate and check_data_paths default to checking nothing.
template <typename Sections, typename TaskT>
TaskFamily task_family_of(std::string name, std::vector<std::string> tasks,
                          std::function<void(const std::string& source, const RunConfig& config)> validate = {},
                          std::function<void(const RunConfig& config)> check_data_paths = {}) {
  return TaskFamily{
      .name = std::move(name),
      .tasks = std::move(tasks),
      .default_sections = [](const std::string&) -> std::unique_ptr<TaskSections> { return std::make_unique<Sections>(); },
      .validate = validate ? std::move(validate) : [](const std::string&, const RunConfig&) {},
      .check_data_paths = check_data_paths ? std::move(check_data_paths) : [](const RunConfig&) {},
      .make = [](const RunConfig& config) -> std::unique_ptr<Task> { return std::make_unique<TaskT>(config); }};
}

// The family serving `task`; throws listing every known task when there is none.
const TaskFamily& task_family(const std::string& task);
// Every registered data.task value, sorted.
std::vector<std::string> task_names();

// The Task for config.task.
std::unique_ptr<Task> make_task(const RunConfig& config);

}  // namespace lsf::train
