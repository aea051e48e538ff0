// The core of the causal (char-LM) long-short attention of docs/transformer-ls.md §3.3 steps 8–11:
// one joint softmax per query over its visible compressed slots and its window band of exactly
// w keys, as one fused op (forward and backward) plus a composed version built from primitive
// ops (the reference the fused op is tested against).
//
// Dimension legend: B batch, h heads, M block length (queries), e head width, w window,
// l chunk length, r rank per chunk, Nm memory chunks, Nb = M/l block chunks,
// Nc = (Nm + Nb)·r compressed slots, ordered chunk·r + rank with the memory chunks first.
//
// For the query t (block chunk c = ⌊t/l⌋) the slots are, in softmax order:
//   compressed σ < nvis(t) = (Nm + c)·r (slot σ = k·r + m of chunk k; chunks k ≥ Nm + c, the
//     query's own and later chunks, are masked — §3.6):
//       logit = q̂_t·kc[σ] + q̂_t·rc[p],   p = D·r − 1 − m = nvis(t) − 1 − σ,  D = Nm + c − k;
//   window j = 0..w−1 (key row t+1+j of kw, i.e. distance δ = w−1−j):
//       logit = (q̂_t + u)·kw[t+1+j] + (q̂_t + v)·rw[j].
// out_t = Σ_σ p_σ·vc[σ] + Σ_j p_j·vw[t+1+j]. Every query sees at least its w window keys, so no
// row is ever fully masked.
//
// Inputs (one dtype f32/f64, one device):
//   q  [B, h, M, e]     the query; q̂ = q_scale·q (q_scale = e^{-1/2} in the model, applied
//                       inside the op: no scaled copy of q, no pass over its gradient)
//   kw, vw [B, h, w+M, e]  window keys/values: the last w memory rows then the block, LN_L applied
//   u, v [h, e]          Transformer-XL content (r_w_bias) and position (r_r_bias) biases
//   rw [h, w, e]         the projected window encodings R W_R, row j ↔ distance w−1−j
//   kc, vc [B, h, Nc, e] compressed keys/values (LN_G applied)
//   rc [h, Nc, e]        the projected chunk encodings W_Rc·sin_cos(p) + b_Rc, row p = 0..Nc−1
// Output: [B, h, M, e].
#pragma once

#include "lsformer/engine/tensor.h"

namespace lsf {

struct CausalLongShortGeometry {
  int64_t chunk_length = 16;  // l
  int64_t rank = 1;           // r
  int64_t memory_chunks = 0;  // Nm = C / l
  double q_scale = 1.0;       // q̂ = q_scale·q (finite, > 0)
};

// The op's inputs, in the order above (kernel arguments). Any strides with the feature (last)
// axis contiguous, e.g. split_heads views of [B, L, d] tensors; other layouts are copied.
struct CausalLongShortInputs {
  Tensor q, kw, vw, u, v, rw, kc, vc, rc;
};

// Fused: no [M, Nc + w] tensor exists in forward or backward.
Tensor causal_long_short_attention(const CausalLongShortInputs& in, const CausalLongShortGeometry& g);
// The same function from primitive ops (index_select of the band, matmul, gather of the chunk
// positions, masked_fill, one softmax over the concatenated logits). Materialises [B, h, M, w, e].
Tensor causal_long_short_attention_composed(const CausalLongShortInputs& in, const CausalLongShortGeometry& g);

// The joint attention probabilities of the same computation: [B, h, M, Nc + w], slot order
// [compressed Nc (chunk·r + rank, memory chunks first; 0 for the chunks a query cannot see) |
// window w (slot j ↔ distance w−1−j, i.e. absolute position t−w+1+j)]. The composed version
// is these probabilities times the values; nn::CausalLongShortAttention records them for
// inspection (models/nn/capture.h).
Tensor causal_long_short_attention_probabilities(const CausalLongShortInputs& in, const CausalLongShortGeometry& g);

}  // namespace lsf
