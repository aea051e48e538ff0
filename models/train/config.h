// The run config of `lsf train`: one JSON document with the sections "data", "model",
// "optimizer", "schedule" and "train" (and an optional top-level "description" string).
// configs/README.md documents every key; the defaults below are the schema.
//
//   RunConfig c = load_config("configs/quickstart.json", {"train.steps=200", "model.attention=full"});
//   validate_data_paths(c);          // the files the task reads exist (not needed for generated data)
//   write_text_file(dir + "/config.json", to_json(c));
//
// Validation is strict and names the dotted key: a key the schema does not have, a value of the
// wrong JSON type ("train.steps must be an integer, got string \"ten\""), an out-of-range value
// ("train.batch_size must be ≥ 1, got 0"), an unknown enum value. A config is "fully
// resolved" once parsed: to_json() writes every key with its value, defaults included, so the
// run directory's config.json and the copy inside each checkpoint rebuild the run exactly.
//
// --set overrides ("a.b=value"): the key must exist in the schema; the value is parsed as JSON
// when it parses (numbers, true/false, arrays, "quoted strings") and taken as a plain string
// otherwise (so model.attention=full works without quotes); a string-typed key always takes
// the text as written, unquoting a JSON string.
//
// The config is independent of the model and data headers: lra_task.h converts it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "models/lra/lra_model.h"

namespace lsf::train {

// "data.generate": ListOps made in memory by the LRA generator (data/listops.h) instead of
// read from files; the split sizes are train/dev/test, lengths strictly inside (min, max).
struct GenerateConfig {
  bool enabled = false;
  int64_t train = 96000, dev = 2000, test = 2000;
  int64_t min_length = 500, max_length = 2000;  // strict bounds on the token count
  int64_t max_depth = 10, max_args = 10;
};

// "data.files": explicit files that replace the task's release layout under data.path
// (empty: derived from data.path, see data_files()).
struct DataFiles {
  std::string train, dev, test;
};

struct DataConfig {
  std::string task = "listops";  // listops | text | retrieval | image | pathfinder
  // The task's directory in its release layout (docs/data-formats.md §1.4):
  //   listops     .../listops-1000              basic_{train,val,test}.tsv
  //   text        .../aclImdb                   {train,test}/{neg,pos}/*.txt (dev = test, as LRA)
  //   retrieval   .../tsv_data                  new_aan_pairs.{train,eval,test}.tsv
  //   image       .../cifar-10-batches-bin      data_batch_{1..5}.bin (45k train / 5k dev), test_batch.bin
  //   pathfinder  .../pathfinder32/curv_contour_length_14   80/10/10 split by data.seed
  std::string path;
  DataFiles files;
  GenerateConfig generate;
  uint64_t seed = 0;          // ListOps generation; Pathfinder's split shuffle
  int64_t max_length = 4000;  // text/retrieval: bytes kept per document
  int64_t seq_len = 0;        // > 0: every batch padded/truncated to exactly this; 0: per batch
  int64_t pad_multiple = 0;   // per-batch padding multiple; 0: the attention window (1 if none)
};

// The LRA model (models/lra/lra_model.h LraModelOptions; dual is set by the task).
// The model section is the model's own options (lra::LraModelOptions), with two differences:
// num_classes defaults to 0, meaning "the data's", and `dual` and `generator` are not config
// keys (the task sets dual; dropout uses the default generator).
struct ModelConfig : lra::LraModelOptions {
  ModelConfig() { num_classes = 0; }
};

struct OptimizerConfig {
  std::string name = "adamw";  // adamw | adam
  double lr = 1e-4;            // peak learning rate (the schedule scales it)
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-6;
  double weight_decay = 0.0;
  double grad_clip = 0.0;      // max global gradient norm; 0: no clipping (the LRA code)
};

struct ScheduleConfig {
  // onecycle (PyTorch OneCycleLR, pct_start = warmup_steps/train.steps: the LRA code's) |
  // warmup_cosine | warmup_constant | linear (warmup, then linear decay to min_lr) | constant
  std::string name = "onecycle";
  int64_t warmup_steps = 1000;
  std::string anneal = "linear";   // onecycle: linear | cos
  bool cycle_momentum = true;      // onecycle: beta1 cycles max_momentum → base → max
  double base_momentum = 0.85, max_momentum = 0.95;
  double div_factor = 25.0, final_div_factor = 1e4;  // onecycle: start lr/div, end start/final_div
  double min_lr = 0.0;             // warmup_cosine / linear: the floor
};

struct LoopConfig {
  int64_t steps = 5000;
  int64_t batch_size = 32;
  int64_t eval_every = 50;        // dev evaluation every N steps (0: only at the end)
  int64_t eval_batches = 0;       // batches per periodic dev evaluation; 0: the whole split
  int64_t log_every = 10;
  int64_t checkpoint_every = 500; // last.safetensors every N steps (0: only at the end)
  uint64_t seed = 1234;           // model initialisation, dropout, batch order
  int64_t threads = 0;            // CPU threads; 0: the default (OMP_NUM_THREADS or all cores)
};

struct RunConfig {
  std::string description;
  DataConfig data;
  ModelConfig model;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  LoopConfig train;
};

// Parses JSON text (strictly, see above), applies the "a.b=value" overrides, validates.
// `source` names the text in error messages (a file path, "checkpoint", ...).
RunConfig parse_config(const std::string& json_text, const std::vector<std::string>& overrides = {},
                       const std::string& source = "config");
// Reads and parses a file; a missing or unreadable file is an error naming it.
RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Every key with its value, as pretty-printed JSON (parse_config(to_json(c)) == c).
std::string to_json(const RunConfig& config);
// The schema's defaults as JSON (what an empty "{}" config resolves to).
std::string default_config_json();

// The files (or directories) each split is read from, by task and data.files / data.path.
// Empty for generated data. dev and test may be the same path (text: aclImdb/test).
struct SplitPaths {
  std::string train, dev, test;
};
SplitPaths data_files(const DataConfig& data);

// Checks that every path of data_files() exists; the error names the key and the path.
void validate_data_paths(const RunConfig& config);

}  // namespace lsf::train
