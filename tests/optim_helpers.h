// Test helpers shared by the optimizer and schedule tests.
#pragma once

#include <nlohmann/json.hpp>

#include "lsformer/models/optim/schedule.h"

namespace lsf::test {

// OneCycle options as tests/fixtures/gen_optim.py records them (PyTorch OneCycleLR's names).
inline optim::OneCycleOptions onecycle_options(const nlohmann::json& o) {
  return {.max_lr = o.at("max_lr"), .total_steps = o.at("total_steps"), .pct_start = o.at("pct_start"),
          .anneal = o.at("anneal") == "linear" ? optim::Anneal::Linear : optim::Anneal::Cos,
          .cycle_momentum = o.at("cycle_momentum"), .base_momentum = o.at("base_momentum"),
          .max_momentum = o.at("max_momentum"), .div_factor = o.at("div_factor"),
          .final_div_factor = o.at("final_div_factor"), .three_phase = o.at("three_phase")};
}

}  // namespace lsf::test
