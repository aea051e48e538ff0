// What this build of lsformer is: version, build type, BLAS, threads, backends and devices.
#pragma once

#include <string>

namespace lsf {

std::string version();
// A human-readable multi-line report (what `lsf info` prints).
std::string build_info();

// A backend's lines of that report (each ending in '\n'), asked for each time the report is
// made, after the thread counts: the engine knows nothing of ops/ (docs/architecture.md), so
// the CPU backend registers what it runs (its vector level, its bf16 products) at load time.
void register_build_info_section(std::string (*describe)());

}  // namespace lsf
