// The run config of `lsf train`: one JSON document with the sections "data", "model",
// "optimizer", "schedule" and "train" (and an optional top-level "description" string).
// configs/README.md documents every key.
//
//   RunConfig c = load_config("configs/quickstart.json", {"train.steps=200", "model.attention=full"});
//   write_text_file(dir + "/config.json", to_json(c));
//
// data.task picks the model family (models/train/task.h): the family defines the rest of the
// "data" section and the whole "model" section (their keys and defaults); "optimizer",
// "schedule" and "train" are common to every family and defined here.
//
// Validation is strict and names the dotted key: a key the schema does not have, a value of the
// wrong JSON type ("train.steps must be an integer, got string \"ten\""), an out-of-range value
// ("train.batch_size must be ≥ 1, got 0"), an option string that is not one of the enum's
// names. Option strings are parsed once, here, into enums: nothing downstream compares strings.
// A config is "fully resolved" once parsed: to_json() writes every key with its value, defaults
// included, so the run directory's config.json and the copy inside each checkpoint rebuild the
// run exactly.
//
// --set overrides ("a.b=value"): the key must exist in the schema of the task in effect (a
// --set data.task=... switches the schema); the value is parsed as JSON when it parses
// (numbers, true/false, arrays, "quoted strings") and taken as a plain string otherwise (so
// model.attention=full works without quotes); a string-typed key always takes the text as
// written, unquoting a JSON string.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <typeinfo>
#include <vector>

#include "lsformer/engine/device.h"
#include "lsformer/engine/dtype.h"
#include "lsformer/engine/enum_names.h"
#include "lsformer/engine/error.h"
#include "lsformer/models/optim/schedule.h"

namespace lsf::train {

// ---- describing a config section field by field ----

// Visits every field of a config section with its dotted key ("model.window"). The config
// layer implements it (JSON in both directions, type checks); a family describes its sections
// by calling field() once per member, in the order config.json shows them.
class FieldVisitor {
 public:
  virtual ~FieldVisitor() = default;
  virtual void field(const char* key, std::string& value) = 0;
  virtual void field(const char* key, bool& value) = 0;
  virtual void field(const char* key, int64_t& value) = 0;
  virtual void field(const char* key, uint64_t& value) = 0;  // a non-negative integer (seeds)
  virtual void field(const char* key, double& value) = 0;
  virtual void field(const char* key, std::array<double, 2>& value) = 0;
  virtual void field(const char* key, std::vector<std::string>& value) = 0;
  // A list of numbers of any length (e.g. per-channel means); empty is allowed.
  virtual void field(const char* key, std::vector<double>& value) = 0;
  // An enum written as one of `names`, names[i] naming the enumerator of value i
  // (engine/enum_names.h).
  template <typename E>
  void field(const char* key, E& value, std::span<const char* const> names) {
    int64_t index = int64_t(value);
    enum_field(key, index, names);
    value = E(index);
  }

 protected:
  virtual void enum_field(const char* key, int64_t& index, std::span<const char* const> names) = 0;
};

// A family's "data" section (all keys but data.task) and its "model" section. Each family
// derives its own (e.g. LraSections in models/train/lra_task.h) and describes it in visit().
class TaskSections {
 public:
  virtual ~TaskSections() = default;
  virtual std::unique_ptr<TaskSections> clone() const = 0;
  virtual void visit(FieldVisitor& v) = 0;
};

// ---- the sections every family shares ----

enum class OptimizerKind { AdamW, Adam };
inline constexpr const char* kOptimizerNames[] = {"adamw", "adam"};

struct OptimizerConfig {
  OptimizerKind name = OptimizerKind::AdamW;
  double lr = 1e-4;            // peak learning rate (the schedule scales it)
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-6;
  double weight_decay = 0.0;
  double grad_clip = 0.0;      // max global gradient norm; 0: no clipping (the LRA code)
  // Parameters whose name contains any of these substrings get no weight decay (a second group;
  // the ViL recipe's list is optim::vil_no_decay_patterns()). Empty: one group, all decayed.
  std::vector<std::string> no_decay;
};

enum class ScheduleKind { OneCycle, WarmupCosine, WarmupConstant, Linear, Constant };
inline constexpr const char* kScheduleNames[] = {"onecycle", "warmup_cosine", "warmup_constant", "linear", "constant"};
inline constexpr const char* kAnnealNames[] = {"cos", "linear"};  // optim::Anneal's enumerators

struct ScheduleConfig {
  // onecycle (PyTorch OneCycleLR, pct_start = warmup_steps/train.steps: the LRA code's) |
  // warmup_cosine | warmup_constant | linear (warmup, then linear decay to min_lr) | constant
  ScheduleKind name = ScheduleKind::OneCycle;
  int64_t warmup_steps = 1000;
  optim::Anneal anneal = optim::Anneal::Linear;  // onecycle: linear | cos
  bool cycle_momentum = true;      // onecycle: beta1 cycles max_momentum → base → max
  double base_momentum = 0.85, max_momentum = 0.95;
  double div_factor = 25.0, final_div_factor = 1e4;  // onecycle: start lr/div, end start/final_div
  double min_lr = 0.0;             // warmup_cosine / linear: the floor
  double warmup_start_factor = 0.0;  // warmup_cosine: warmup starts at lr·factor (ViL: 0.002)
  bool rebase = true;              // warmup_cosine: cosine over the steps after warmup; false: on the
                                   // global step, as ViL (optim::WarmupCosineOptions)
};

// What the loop does with a step whose loss or gradient is not finite (NaN or ±Inf): stop with
// an error naming the step, the loss and the first parameter whose gradient is not finite, or
// skip the update (the parameters and optimizer state stay as they were) with a warning.
enum class NonFiniteAction { Stop, Skip };
inline constexpr const char* kNonFiniteNames[] = {"stop", "skip"};

// The arithmetic of a training step's forward (engine/autocast.h): f32 throughout, or the
// product ops in bf16 / f16 (AutocastGuard) with f32 master weights; f16 adds dynamic loss
// scaling (optim::GradScaler), whose skipped steps are part of it, not failures.
enum class Precision { F32, BF16, F16 };
inline constexpr const char* kPrecisionNames[] = {"f32", "bf16", "f16"};
// The AutocastGuard dtype of a precision (kF32: autocast off).
inline DType autocast_dtype_of(Precision p) {
  return p == Precision::BF16 ? DType::BF16 : p == Precision::F16 ? DType::F16 : DType::F32;
}

struct LoopConfig {
  int64_t steps = 5000;
  int64_t batch_size = 32;
  int64_t eval_every = 50;        // dev evaluation every N steps (0: only at the end)
  int64_t eval_batches = 0;       // batches per periodic dev evaluation; 0: the whole split
  int64_t log_every = 10;
  int64_t checkpoint_every = 500; // last.safetensors every N steps (0: only at the end)
  int64_t tensorboard_every = 500; // histograms of parameters and gradients in RUN_DIR/tb every N
                                   // steps (0: none; scalars are written at every log and evaluation)
  uint64_t seed = 1234;           // model initialisation, dropout, batch order
  int64_t threads = 0;            // CPU threads; 0: the default (OMP_NUM_THREADS or all cores)
  NonFiniteAction non_finite = NonFiniteAction::Stop;
  Precision precision = Precision::F32;
  std::string device = "cpu";     // where the model trains and evaluates: "cpu", "cuda" or "cuda:N"
  double memory_limit = 0;        // bytes a run may use (models/train/memory_estimate.h); 0: the
                                  // machine's MemAvailable. A config estimated above it is refused.
};

// A copyable handle to a family's sections (deep copies on copy).
class SectionsHandle {
 public:
  SectionsHandle() = default;
  explicit SectionsHandle(std::unique_ptr<TaskSections> s) : p_(std::move(s)) {}
  SectionsHandle(const SectionsHandle& o) : p_(o.p_ ? o.p_->clone() : nullptr) {}
  SectionsHandle& operator=(const SectionsHandle& o) {
    p_ = o.p_ ? o.p_->clone() : nullptr;
    return *this;
  }
  SectionsHandle(SectionsHandle&&) = default;
  SectionsHandle& operator=(SectionsHandle&&) = default;
  TaskSections* get() const { return p_.get(); }

 private:
  std::unique_ptr<TaskSections> p_;
};

struct RunConfig {
  std::string description;
  std::string task = "listops";  // data.task: which family and task (task_names() lists them)
  SectionsHandle sections;       // the family's data and model sections
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  LoopConfig train;

  // The family's sections as their own type; an error naming both types when the config is of
  // another family.
  template <typename T>
  const T& sections_as() const {
    const T* s = dynamic_cast<const T*>(sections.get());
    LSF_CHECK(s != nullptr) << "this run config (data.task \"" << task << "\") has no " << typeid(T).name() << " sections";
    return *s;
  }
  template <typename T>
  T& sections_as() {
    return const_cast<T&>(static_cast<const RunConfig&>(*this).sections_as<T>());
  }
};

// Parses JSON text (strictly, see above), applies the "a.b=value" overrides, validates.
// `source` names the text in error messages (a file path, "checkpoint", ...).
RunConfig parse_config(const std::string& json_text, const std::vector<std::string>& overrides = {},
                       const std::string& source = "config");
// Reads and parses a file; a missing or unreadable file is an error naming it.
RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Every key with its value, as pretty-printed JSON (parse_config(to_json(c)) == c).
std::string to_json(const RunConfig& config);
// The schema's defaults for a task as JSON (what {"data": {"task": task}} resolves to).
std::string default_config_json(const std::string& task = "listops");

// Checks that every file the config reads exists; the error names the key and the path.
void validate_data_paths(const RunConfig& config);

// The device train.device names, checked against this process: a CUDA device that this build
// or machine lacks is an error that names it and says how to train on the CPU instead.
Device run_device(const RunConfig& config);

}  // namespace lsf::train
