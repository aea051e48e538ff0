// The checks the config families' validate functions share (config.cpp, lra_task.cpp,
// lm_task.cpp, vision_task.cpp): every message starts with the config's source and names the
// dotted key.
#pragma once

#include <string>

#include "lsformer/engine/error.h"

namespace lsf::train {

inline void at_least(const std::string& source, const char* key, double value, double low) {
  LSF_CHECK(value >= low) << source << ": '" << key << "' must be ≥ " << low << ", got " << value;
}

inline void in_unit(const std::string& source, const char* key, double value) {
  LSF_CHECK(value >= 0.0 && value < 1.0) << source << ": '" << key << "' must be in [0, 1), got " << value;
}

// A key that only another choice reads (another schedule, task or attention) is an error when
// it `differs` from its default and the chosen one does not `read` it: it would be ignored. (A
// stored config holds every key at its default, so only a user's own value is refused.)
inline void check_key_read(const std::string& source, const std::string& key, bool differs, bool read,
                           const std::string& readers, const std::string& choice_key, const std::string& choice) {
  LSF_CHECK(read || !differs) << source << ": '" << key << "' applies to " << readers << ", and '" << choice_key
                              << "' is \"" << choice << "\": it would be ignored";
}

}  // namespace lsf::train
