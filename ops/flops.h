// Counting the multiply-adds of a forward pass, for `lsf info --model` and the model tests.
//
//   int64_t macs;
//   { FlopCounter counter; model.forward(images); macs = counter.multiply_adds(); }
//
// Convention (the one ViL, CvT, Swin and fvcore report as "FLOPs"): one multiply-add = one
// FLOP, counted for the products that dominate every model here: matmul / bmm (batch·M·N·K,
// so a Linear layer on T tokens counts T·in·out), conv2d (N·Ho·Wo·O·(C/groups)·kH·kW) and the
// fused attention ops (their two products, logits and weighted sum). Bias adds, normalisation,
// activations, softmax, pooling and other elementwise work are not counted (fvcore counts a
// few of these, e.g. 4–5 ops per element of a norm; they are below 1% of a transformer's
// total). A hook costs one thread-local load when no counter is active.
//
// A FlopCounter counts the ops its own thread calls between its construction and destruction
// (ops called from worker threads inside a kernel are not ops). Counters nest: every active
// counter of the thread sees each op. Backward kernels are not counted (only the forward ops
// report), so a counter around forward + backward still gives the forward count.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace lsf {

class FlopCounter {
 public:
  FlopCounter();
  ~FlopCounter();
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;

  // All multiply-adds counted so far.
  int64_t multiply_adds() const { return total_; }
  // The same split by op name ("matmul", "bmm", "conv2d", "long_short_attention", ...).
  const std::map<std::string, int64_t>& by_op() const { return by_op_; }

 private:
  friend void count_multiply_adds(const char* op, int64_t macs);
  FlopCounter* parent_;
  int64_t total_ = 0;
  std::map<std::string, int64_t> by_op_;
};

// Called by the ops (one line each): adds `macs` to every active counter of this thread.
void count_multiply_adds(const char* op, int64_t macs);

}  // namespace lsf
