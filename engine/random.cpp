// Generator: a Philox4x32-10 stream as (seed, offset) with thread-safe reservation of counter
// ranges, and the process-wide default generator (see random.h).
#include "lsformer/engine/random.h"

namespace lsf {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = {seed, 0};
}

GeneratorState Generator::reserve(uint64_t blocks) {
  std::lock_guard<std::mutex> lock(mutex_);
  GeneratorState s = state_;
  state_.offset += blocks;
  return s;
}

GeneratorState Generator::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

void Generator::set_state(const GeneratorState& s) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = s;
}

Generator& default_generator() {
  static Generator g(/*seed=*/0);
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace lsf
