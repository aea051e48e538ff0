// What this build of lsformer is: version, build type, BLAS, threads, backends and devices.
#pragma once

#include <string>

namespace lsf {

std::string version();
// A human-readable multi-line report (what `lsf info` prints).
std::string build_info();

}  // namespace lsf
