// Training checkpoints: everything needed to resume a run bit-identically, in one safetensors
// file.
//
//   tensors        the model's state_dict under its PyTorch names (so torch can load the
//                  weights: drop the "optimizer." keys and call load_state_dict), and the
//                  optimizer's state buffers under "optimizer.<param name>.<buffer>", and the
//                  task's own state (the char-LM's memory) under "task.<name>"
//   __metadata__   "format": "pt", "lsformer.version", "lsformer.step", the default
//                  generator's "lsformer.rng.seed" / "lsformer.rng.offset", "lsformer.config"
//                  (the run's resolved config as JSON text), "lsformer.optimizer" (the
//                  optimizer's state_json) and the caller's extra entries as "extra.<key>"
//
// save_checkpoint writes atomically (temporary file, fsync, rename): an interrupted save never
// destroys the previous checkpoint. load_checkpoint checks everything before it changes the
// model or the optimizer.
#pragma once

#include <string>

#include "lsformer/engine/random.h"
#include "lsformer/engine/safetensors.h"
#include "lsformer/models/nn/module.h"
#include "lsformer/models/optim/optimizer.h"

namespace lsf {

struct CheckpointInfo {
  int64_t step = 0;        // training steps completed
  GeneratorState rng;      // the default generator when saved (restored on load)
  std::string config;      // the run's resolved config, JSON text (may be empty)
  Metadata extra;          // further string entries, e.g. {"best_accuracy", "0.71"}
  NamedTensors task_state; // tensors a training task carries between steps (Task::state())
};

// Saves the model, the optimizer (if any) and `info` (with its task_state); info.rng is ignored
// and the default generator's current state is stored instead.
void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer* optimizer,
                     const CheckpointInfo& info);

// Loads into `model` (strictly: every name and shape must match) and `optimizer` (if given; the
// file must then hold optimizer state) and, when restore_rng, resets the default generator to
// the saved state. Returns what the file recorded, the task state included.
CheckpointInfo load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer* optimizer,
                               bool restore_rng = true);

}  // namespace lsf
