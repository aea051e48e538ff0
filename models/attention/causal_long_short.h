// nn::CausalLongShortAttention: the causal (char-LM) long-short attention of docs/transformer-ls.md
// §3 (official `ChunkedLSAttention`, autoregressive/model_lib/layer.py).
//
//   CausalLongShortAttention attn({.dim = 512, .heads = 8, .chunk_length = 16, .rank = 1,
//                                  .window = 512, .memory_length = 2048});
//   Tensor a = attn.forward(ln1(h), {.memory = ln1(h_cache)});   // [B, M, d] → [B, M, d]
//   Tensor a = attn.forward(ln1(h), {.memory = ln1(h_cache), .relative_positions = drop(window_table),
//                                    .chunk_positions = chunk_table});  // as the LM model calls it
//
// Contract (§3.2): x is X = LN1(H), the block's layer input after the block's first LayerNorm,
// and args.memory is Xm = LN1(Hm), the cached (detached) layer inputs of the previous block
// normalised by the SAME LN1 — the caller normalises both; this module applies no LN1. The
// caller also adds the residual (H2 = X + A). An undefined memory means Xm = zeros
// [B, memory_length, d] (§3.4 item 7 initialises the raw cache Hm to zeros; the faithful Xm for
// that state is LN1(0) = LN1's beta, which a caller that wants the official first block passes
// explicitly). The memory may be any length C with C % l == 0 and C ≥ w (evaluation overrides
// mem_len); its last w rows feed the window.
//
// Parameters (official names; §3.1): proj_query, proj_key, proj_val, proj_out (Linear d → d,
// bias only with options.bias, as `use_bias`), dconv_1 (W_P, Linear d → h·r with bias,
// head-major outputs), r_net (W_R, Linear d → d, no bias), r_net_chunk (W_Rc, b_Rc, Linear
// d → d with bias), r_w_bias (u) [1, h, 1, 1, e] and r_r_bias (v) [1, h, 1, e] (the official
// shapes, so that checkpoints load; §3.1 lists them as h×e), dual_ln_win (LN_L) and
// dual_ln_dproj (LN_G), LayerNorm(d, eps 1e-5).
//
// Deviations / choices (none change the function of §3.3):
// * No explicit M ≤ w special case is needed: the band rule (window rows t+1 … t+w of
//   [last w memory rows ; block]) is the same for every M; the M % w == 0 requirement for M > w
//   is still enforced because the official tiling needs it (§3.3 requirements).
// * Position tables (§3.4 items 3–4): the model wrapper builds the window sinusoid table
//   (ar_window_table, rows w−1 … 0), applies its embedding dropout and passes it as
//   args.relative_positions [w, d]; the chunk table (ar_chunk_table, rows 0 … Nc−1, never dropped
//   out) as args.chunk_positions [Nc, d]. The official code builds the chunk table in descending
//   order (Nc−1 … 0) and relative-shifts the scores; our op reads row p = value p directly (same
//   function). Undefined tables are built here, without dropout. Both the fused and the composed
//   path take them. Attention-probability dropout is fixed to 0 as in the official model;
//   options.dropout is the output dropout after proj_out.
// * Initialisation: proj_* xavier_normal_ (as the official code), u and v N(0, 0.02²)
//   (the official tensors are uninitialised until the model's init), other Linears PyTorch's default.
//
// Recorded under an active nn::CaptureScope (models/nn/capture.h), by name (Nm = C/l memory
// chunks, Nb = M/l block chunks, Nc = (Nm + Nb)·r):
//   q          [B, h, M, e] queries scaled by e^{-1/2}
//   kc, vc     [B, h, Nc, e] compressed keys and values (LN_G), slot chunk·r + rank, memory first
//   proj       [B, h, Nm + Nb, r, l] the chunk weights P: slot k·r + m pools token k·l + i of
//              [memory ; block] with weight proj[.., k, m, i]
//   attention  [B, h, M, Nc + w] the joint softmax, slots [compressed Nc | window w], window slot
//              j ↔ the key at distance w−1−j (ops/causal_long_short.h); computed only then
#pragma once

#include <memory>

#include "lsformer/models/attention/attention.h"
#include "lsformer/models/nn/dropout.h"
#include "lsformer/models/nn/layer_norm.h"
#include "lsformer/models/nn/linear.h"

namespace lsf::nn {

struct CausalLongShortAttentionOptions {
  int64_t dim = 512;            // d
  int64_t heads = 8;            // h (e = d / h)
  int64_t chunk_length = 16;    // l
  int64_t rank = 1;             // r, compressed slots per chunk
  int64_t window = 512;         // w, the exact causal band [t−w+1, t]
  int64_t memory_length = 512;  // C used when no memory is given
  bool bias = false;            // biases of proj_query/key/val/out (`use_bias`)
  double dropout = 0.0;         // on the output, after proj_out
  bool fused = true;            // the fused op (ops/causal_long_short.h) or the composed reference
  Generator* generator = nullptr;  // initialisation and dropout (default generator when null)
};

class CausalLongShortAttention : public Attention {
 public:
  explicit CausalLongShortAttention(const CausalLongShortAttentionOptions& options);
  // x [B, M, d] (= LN1(H)), args.memory [B, C, d] (= LN1(Hm)) or undefined → [B, M, d].
  Tensor forward(const Tensor& x, const AttentionArgs& args = {}) override;
  std::string extra_repr() const override;
  const CausalLongShortAttentionOptions& options() const { return options_; }
  void set_fused(bool fused) { options_.fused = fused; }

  // The two compression paths of §3.3 (exposed for the §3.7 test), each → K̄, V̄ [B, h, N·r, e]:
  // memory path (step 2): compress the LN1 head slices of xm [B, C, d], then project, then LN_G;
  // block path (step 5): project x [B, M, d], then compress the head slices, then LN_G.
  struct Compressed {
    Tensor k, v;
  };
  Compressed compress_memory(const Tensor& xm);
  Compressed compress_block(const Tensor& x);
  // Step 5 from the already projected block keys kb and values vb [B, L, d] and the chunk
  // weights P = chunk_scores(x) (the forward projects x once for the window and the compression;
  // incremental decoding compresses one completed chunk at a time).
  Compressed compress_projected(const Tensor& kb, const Tensor& vb, const Tensor& scores);
  // P [B, h, L/l, r, l]: softmax over the l tokens of each chunk of W_P·x + b_P, x [B, L, d], L % l == 0.
  Tensor chunk_scores(const Tensor& x);

  std::shared_ptr<Linear> proj_query, proj_key, proj_val, proj_out;
  std::shared_ptr<Linear> dconv_1, r_net, r_net_chunk;
  Tensor r_w_bias;  // u [1, h, 1, 1, e]
  Tensor r_r_bias;  // v [1, h, 1, e]
  std::shared_ptr<LayerNorm> dual_ln_win, dual_ln_dproj;
  std::shared_ptr<Dropout> dropout;

 private:
  Tensor compress(const Tensor& vecs, const Tensor& scores);  // → Z [B, (L/l)·r, d]
  CausalLongShortAttentionOptions options_;
};

// The AR sinusoid of §3.5 for each position value: [n, d] rows
// [sin(p·f_0) … sin(p·f_{d/2−1}), cos(p·f_0) … cos(p·f_{d/2−1})], f_k = 10000^{−2k/d}.
Tensor ar_sinusoid_table(const std::vector<double>& positions, int64_t d, const TensorOptions& options);
// The window table [w, d]: row j is the sinusoid of the distance w−1−j (§3.4 item 3).
Tensor ar_window_table(int64_t window, int64_t d, const TensorOptions& options);
// The chunk-position table [slots, d]: row p is the sinusoid of the value p (§3.3 step 9).
Tensor ar_chunk_table(int64_t slots, int64_t d, const TensorOptions& options);

}  // namespace lsf::nn
