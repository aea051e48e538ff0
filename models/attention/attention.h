// The one interface every attention module implements: full softmax attention, Linformer,
// and the long-short attention in its bidirectional (LRA), causal (char-LM) and 2-D (vision)
// forms, so models can swap them by configuration.
//
//   Tensor y = attention->forward(x, {.mask = real_tokens});   // x [B, n, d] → y [B, n, d]
//
// Arguments a variant does not use must be left undefined/zero; passing one it cannot honour
// (e.g. a memory to a bidirectional layer) throws an lsf::Error that names it.
#pragma once

#include "lsformer/models/nn/module.h"

namespace lsf::nn {

struct AttentionArgs {
  Tensor mask;    // [B, n] bool, true for real tokens (padding masks keys; padded queries' rows are zeroed)
  Tensor memory;  // [B, C, d] causal only: the cached (detached) inputs of this layer from the previous block
  Tensor cls;     // [B, 1, d] bidirectional only: a CLS vector injected into this layer (output gains row 0)
  // With cls: the caller needs only the updated CLS row (a last layer pooled at its CLS), so the
  // module returns that row alone ([B, 1, d]; [B, d] on a packed path) and never forms the token
  // rows' output projection. The token rows' context is still computed: the CLS attends to it.
  bool cls_only = false;
  int64_t height = 0, width = 0;  // 2-D only: the patch map is height × width
  int64_t num_global = 0;         // 2-D only: global tokens that precede the patches in x
  // Causal (char-LM) only: sinusoid tables the model builds once per forward and shares by every
  // layer (models/lm/); undefined → the module builds its own (without dropout).
  Tensor relative_positions;  // [P, d] row j ↔ relative distance P−1−j (long-short: P = w, the window
                              // table, after the model's embedding dropout; full: P = C + M)
  Tensor chunk_positions;     // [Nc, d] long-short only: row p ↔ chunk-position value p (never dropped out)
};

class Attention : public Module {
 public:
  using Module::Module;
  // x [B, n, d] (2-D: [B, num_global + height·width, d]) → [B, n, d]; with args.cls the result is
  // [B, 1 + n, d], the updated CLS first.
  virtual Tensor forward(const Tensor& x, const AttentionArgs& args = {}) = 0;
};

}  // namespace lsf::nn
