// lm::IncrementalDecoder: one position at a time through every layer, reusing the model's own
// modules (LayerNorms, projections, the long-short module's chunk weights and compression), so
// the only code of its own is the attention of ONE query over its cached slots — the same
// formulas as ops/causal_long_short.h (long-short) and causal_full_attention.h (full), written
// with matmuls over the visible rows.
#include "lsformer/models/lm/incremental.h"

#include <cmath>

#include "lsformer/models/attention/heads.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/engine/error.h"
#include "lsformer/models/attention/causal_long_short.h"
#include "lsformer/models/lm/causal_full_attention.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/index.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/shape.h"
#include "lsformer/ops/softmax.h"

namespace lsf::lm {
namespace {

constexpr const char* kName = "IncrementalDecoder";

nn::CausalLongShortAttention& long_short(const TransformerLSLayer& layer) {
  return dynamic_cast<nn::CausalLongShortAttention&>(*layer.attn);
}

CausalFullAttention& full(const TransformerLSLayer& layer) { return dynamic_cast<CausalFullAttention&>(*layer.attn); }

// Rows [0, n) of a [P, d] table through a Linear, as [h, P, e] (contiguous).
Tensor project_table(nn::Linear& lin, const Tensor& table, int64_t h) {
  const int64_t P = table.size(0), d = table.size(1);
  return lin.forward(table).view({P, h, d / h}).permute({1, 0, 2}).contiguous();
}

}  // namespace

IncrementalDecoder::IncrementalDecoder(TransformerLSModel& model, int64_t batch)
    : IncrementalDecoder(model, model.initial_memory(batch)) {}

IncrementalDecoder::IncrementalDecoder(TransformerLSModel& model, Memory memory)
    : model_(model), memory_(std::move(memory)) {
  const LmModelOptions& o = model_.options();
  LSF_CHECK(!model_.is_training())
      << kName << ": the model is in training mode; call model.eval() (decoding runs without dropout)";
  LSF_CHECK(!memory_.empty()) << kName << ": the memory is empty; pass model.initial_memory(B) or a forward's memory";
  batch_ = memory_.batch_size();
  check_memory(kName, memory_, o, batch_, model_.in_emb->weight);

  NoGradGuard no_grad;
  const TensorOptions act = model_.in_emb->weight.options();
  const int64_t B = batch_, M = o.block_length, C = o.memory_length, d = o.dim, h = o.heads, e = d / h;
  layers_.resize(model_.layers.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    LayerState& s = layers_[i];
    const TransformerLSLayer& layer = *model_.layers[i];
    s.h_block = zeros({B, M, d}, act);
    s.x_block = zeros({B, M, d}, act);
    s.k_block = zeros({B, M, d}, act);
    s.v_block = zeros({B, M, d}, act);
    if (o.attention == LmAttention::LongShort) {
      auto& attn = long_short(layer);
      const int64_t w = o.window, Nc = (C / o.chunk_length + M / o.chunk_length) * o.rank;
      s.keys = zeros({B, h, w + M, e}, act);
      s.values = zeros({B, h, w + M, e}, act);
      s.kc = zeros({B, h, Nc, e}, act);
      s.vc = zeros({B, h, Nc, e}, act);
      s.rel = project_table(*attn.r_net, nn::ar_window_table(w, d, act), h);
      // Query t sees slots σ < nvis with table rows nvis−1−σ: with the rows reversed that is the
      // contiguous range [Nc − nvis, Nc).
      std::vector<int64_t> reversed(static_cast<size_t>(Nc));
      for (int64_t j = 0; j < Nc; ++j) reversed[size_t(j)] = Nc - 1 - j;
      s.chunk_rel = index_select(project_table(*attn.r_net_chunk, nn::ar_chunk_table(Nc, d, act), h), 1,
                                 tensor(reversed, {Nc}).to(act.device()));
    } else {
      auto& attn = full(layer);
      s.keys = zeros({B, h, C + M, e}, act);
      s.values = zeros({B, h, C + M, e}, act);
      s.rel = project_table(*attn.r_net, relative_distance_table(C + M, d, act), h);
    }
  }
  load_memory();
}

void IncrementalDecoder::load_memory() {
  NoGradGuard no_grad;
  const LmModelOptions& o = model_.options();
  const int64_t C = o.memory_length, h = o.heads;
  for (size_t i = 0; i < layers_.size(); ++i) {
    LayerState& s = layers_[i];
    const TransformerLSLayer& layer = *model_.layers[i];
    const Tensor xm = layer.norm1->forward(memory_.layers[i]);  // [B, C, d]
    if (o.attention == LmAttention::LongShort) {
      auto& attn = long_short(layer);
      const int64_t w = o.window, slots = C / o.chunk_length * o.rank;
      const auto mem = attn.compress_memory(xm);  // [B, h, Nm·r, e], §3.3 step 2
      s.kc.narrow(2, 0, slots).copy_(mem.k);
      s.vc.narrow(2, 0, slots).copy_(mem.v);
      const Tensor tail = xm.narrow(1, C - w, w);  // the window's memory rows, §3.3 step 4
      s.keys.narrow(2, 0, w).copy_(nn::split_heads(attn.dual_ln_win->forward(attn.proj_key->forward(tail)), h));
      s.values.narrow(2, 0, w).copy_(nn::split_heads(attn.dual_ln_win->forward(attn.proj_val->forward(tail)), h));
    } else {
      auto& attn = full(layer);
      s.keys.narrow(2, 0, C).copy_(nn::split_heads(attn.proj_key->forward(xm), h));
      s.values.narrow(2, 0, C).copy_(nn::split_heads(attn.proj_val->forward(xm), h));
    }
  }
}

Tensor IncrementalDecoder::attend_long_short(size_t i, const Tensor& x, int64_t t) {
  const LmModelOptions& o = model_.options();
  LayerState& s = layers_[i];
  auto& attn = long_short(*model_.layers[i]);
  const int64_t d = o.dim, h = o.heads, e = d / h, l = o.chunk_length, r = o.rank, w = o.window;
  const int64_t Nm = o.memory_length / l, Nc = s.kc.size(2);

  const Tensor q = mul(nn::split_heads(attn.proj_query->forward(x), h), 1.0 / std::sqrt(double(e)));  // [B, h, 1, e]
  const Tensor kb = attn.proj_key->forward(x), vb = attn.proj_val->forward(x);                // [B, 1, d]
  s.x_block.narrow(1, t, 1).copy_(x);
  s.k_block.narrow(1, t, 1).copy_(kb);
  s.v_block.narrow(1, t, 1).copy_(vb);
  s.keys.narrow(2, w + t, 1).copy_(nn::split_heads(attn.dual_ln_win->forward(kb), h));
  s.values.narrow(2, w + t, 1).copy_(nn::split_heads(attn.dual_ln_win->forward(vb), h));

  // Compressed slots of the chunks that end before the query's chunk (§3.3 step 9): slot σ
  // with position row nvis−1−σ.
  const int64_t nvis = (Nm + t / l) * r;
  const Tensor keys_c = add(s.kc.narrow(2, 0, nvis), s.chunk_rel.narrow(1, Nc - nvis, nvis));
  const Tensor logits_c = matmul(q, keys_c.transpose(2, 3));  // [B, h, 1, nvis]
  // The window band: rows t+1 … t+w of [last w memory rows ; block], distances w−1 … 0 (step 8).
  const Tensor keys_w = s.keys.narrow(2, t + 1, w), values_w = s.values.narrow(2, t + 1, w);
  const Tensor logits_w = add(matmul(add(q, attn.r_w_bias.view({1, h, 1, e})), keys_w.transpose(2, 3)),
                              matmul(add(q, attn.r_r_bias.view({1, h, 1, e})), s.rel.transpose(1, 2).unsqueeze(0)));
  const Tensor p = softmax(cat({logits_c, logits_w}, 3), 3);  // [B, h, 1, nvis + w]
  const Tensor ctx = add(matmul(p.narrow(3, 0, nvis), s.vc.narrow(2, 0, nvis)), matmul(p.narrow(3, nvis, w), values_w));
  const Tensor out = attn.proj_out->forward(nn::merge_heads(ctx));

  if ((t + 1) % l == 0) {  // chunk c is complete: its block-path slots (step 5) become visible from t + 1
    const int64_t c = t / l;
    const auto comp = attn.compress_projected(s.k_block.narrow(1, c * l, l), s.v_block.narrow(1, c * l, l),
                                              attn.chunk_scores(s.x_block.narrow(1, c * l, l)));
    s.kc.narrow(2, (Nm + c) * r, r).copy_(comp.k);
    s.vc.narrow(2, (Nm + c) * r, r).copy_(comp.v);
  }
  return out;
}

Tensor IncrementalDecoder::attend_full(size_t i, const Tensor& x, int64_t t) {
  const LmModelOptions& o = model_.options();
  LayerState& s = layers_[i];
  auto& attn = full(*model_.layers[i]);
  const int64_t d = o.dim, h = o.heads, e = d / h, C = o.memory_length, M = o.block_length;

  const Tensor q = mul(nn::split_heads(attn.proj_query->forward(x), h), 1.0 / std::sqrt(double(e)));  // [B, h, 1, e]
  s.keys.narrow(2, C + t, 1).copy_(nn::split_heads(attn.proj_key->forward(x), h));
  s.values.narrow(2, C + t, 1).copy_(nn::split_heads(attn.proj_val->forward(x), h));
  // Keys 0 … C+t; key s is at distance C+t−s, table row (C+M−1) − (C+t−s) = M−1−t+s.
  const int64_t n = C + t + 1;
  const Tensor keys = s.keys.narrow(2, 0, n), values = s.values.narrow(2, 0, n);
  const Tensor rel = s.rel.narrow(1, M - 1 - t, n);  // [h, n, e]
  const Tensor logits = add(matmul(add(q, attn.r_w_bias.view({1, h, 1, e})), keys.transpose(2, 3)),
                            matmul(add(q, attn.r_r_bias.view({1, h, 1, e})), rel.transpose(1, 2).unsqueeze(0)));
  const Tensor ctx = matmul(softmax(logits, 3), values);  // [B, h, 1, e]
  return attn.proj_out->forward(nn::merge_heads(ctx));
}

Tensor IncrementalDecoder::step(const Tensor& tokens) {
  const LmModelOptions& o = model_.options();
  LSF_CHECK(!model_.is_training()) << kName << ": the model is in training mode; call model.eval()";
  LSF_CHECK(tokens.defined() && (tokens.dtype() == kI64 || tokens.dtype() == kI32) && tokens.dim() == 1 &&
            tokens.size(0) == batch_)
      << kName << ": step takes one token per stream, an i64 [B] = [" << batch_ << "] tensor, got "
      << (tokens.defined() ? tokens.shape() : Shape{});
  const int64_t lo = amin(tokens).to(kI64).item<int64_t>(), hi = amax(tokens).to(kI64).item<int64_t>();
  LSF_CHECK(lo >= 0 && hi < o.vocab_size)
      << kName << ": token ids span [" << lo << ", " << hi << "], outside [0, vocab_size = " << o.vocab_size << ")";
  NoGradGuard no_grad;
  const int64_t t = position_, B = batch_, d = o.dim;
  Tensor h = mul(model_.in_emb->forward(tokens.view({B, 1})), std::sqrt(double(d)));  // [B, 1, d]
  for (size_t i = 0; i < layers_.size(); ++i) {
    const TransformerLSLayer& layer = *model_.layers[i];
    layers_[i].h_block.narrow(1, t, 1).copy_(h);
    const Tensor x = layer.norm1->forward(h);
    const Tensor a = o.attention == LmAttention::LongShort ? attend_long_short(i, x, t) : attend_full(i, x, t);
    const Tensor y = layer.norm2->forward(add(x, a));
    h = add(y, layer.ff->forward(y));
  }
  Tensor logits = add(matmul(h, model_.in_emb->weight.t()), model_.out_emb->bias).view({B, o.vocab_size});
  if (logits.dtype() == kF16 || logits.dtype() == kBF16) logits = logits.to(kF32);
  const Tensor log_probs = log_softmax(logits, -1);

  if (++position_ == o.block_length) {  // the block is full: roll the memory as forward does
    const int64_t C = o.memory_length, M = o.block_length;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Tensor& old = memory_.layers[i];
      const Tensor& block = layers_[i].h_block;
      // New tensors (never a view of the reused block buffer).
      memory_.layers[i] = M >= C ? block.narrow(1, M - C, C).clone() : cat({old.narrow(1, M, C - M), block}, 1);
    }
    position_ = 0;
    load_memory();
  }
  return log_probs;
}

Tensor IncrementalDecoder::feed(const Tensor& tokens) {
  const LmModelOptions& o = model_.options();
  LSF_CHECK(tokens.defined() && tokens.dim() == 2 && tokens.size(0) == batch_ && tokens.size(1) >= 1)
      << kName << ": feed takes tokens [B, n] = [" << batch_ << ", n ≥ 1], got "
      << (tokens.defined() ? tokens.shape() : Shape{});
  const int64_t n = tokens.size(1), M = o.block_length;
  Tensor last;
  int64_t at = 0;
  while (position_ == 0 && n - at >= M) {  // whole blocks at once, through the model's forward
    NoGradGuard no_grad;
    last = model_.forward(tokens.narrow(1, at, M), memory_).select(1, M - 1);
    load_memory();
    at += M;
  }
  for (; at < n; ++at) last = step(tokens.select(1, at).contiguous());
  return last;
}

}  // namespace lsf::lm
