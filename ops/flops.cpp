// FlopCounter: a thread-local stack of active counters (each links to the one it nests in).
#include "lsformer/ops/flops.h"

namespace lsf {

namespace {
thread_local FlopCounter* innermost = nullptr;
}  // namespace

FlopCounter::FlopCounter() : parent_(innermost) { innermost = this; }

FlopCounter::~FlopCounter() {
  // Guards are scoped objects, so they end in reverse order of construction.
  innermost = parent_;
}

void count_multiply_adds(const char* op, int64_t macs) {
  for (FlopCounter* c = innermost; c != nullptr; c = c->parent_) {
    c->total_ += macs;
    c->by_op_[op] += macs;
  }
}

}  // namespace lsf
