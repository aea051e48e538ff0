// nn::CausalLongShortAttention (docs/transformer-ls.md §3.3): projections, the two compression
// paths, DualLN, the sinusoid position tables, then the fused (or composed) attention core of
// ops/causal_long_short.h and the output projection. Shapes follow the header's legend.
#include "lsformer/models/attention/causal_long_short.h"

#include <cmath>
#include <sstream>

#include "lsformer/engine/profiler.h"
#include "lsformer/models/attention/heads.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/models/nn/capture.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/causal_long_short.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/shape.h"
#include "lsformer/ops/softmax.h"

namespace lsf::nn {

namespace {
constexpr const char* kName = "CausalLongShortAttention";
}

Tensor ar_sinusoid_table(const std::vector<double>& positions, int64_t d, const TensorOptions& options) {
  LSF_CHECK(d >= 2 && d % 2 == 0) << "ar_sinusoid_table: the width d = " << d << " must be even";
  const int64_t half = d / 2;
  std::vector<double> values(positions.size() * size_t(d));
  for (size_t i = 0; i < positions.size(); ++i)
    for (int64_t k = 0; k < half; ++k) {
      const double angle = positions[i] * std::pow(10000.0, -2.0 * double(k) / double(d));
      values[i * size_t(d) + size_t(k)] = std::sin(angle);
      values[i * size_t(d) + size_t(half + k)] = std::cos(angle);
    }
  return tensor(values, {int64_t(positions.size()), d}).to(options);
}

Tensor ar_window_table(int64_t window, int64_t d, const TensorOptions& options) {
  std::vector<double> distances(static_cast<size_t>(window));
  for (int64_t j = 0; j < window; ++j) distances[size_t(j)] = double(window - 1 - j);
  return ar_sinusoid_table(distances, d, options);
}

Tensor ar_chunk_table(int64_t slots, int64_t d, const TensorOptions& options) {
  std::vector<double> values(static_cast<size_t>(slots));
  for (int64_t p = 0; p < slots; ++p) values[size_t(p)] = double(p);
  return ar_sinusoid_table(values, d, options);
}

CausalLongShortAttention::CausalLongShortAttention(const CausalLongShortAttentionOptions& o)
    : Attention(kName), options_(o) {
  LSF_CHECK(o.dim > 0 && o.heads > 0 && o.dim % o.heads == 0)
      << kName << ": dim " << o.dim << " must be a positive multiple of heads " << o.heads;
  LSF_CHECK(o.dim % 2 == 0) << kName << ": dim " << o.dim << " must be even (sinusoid halves, §3.5)";
  LSF_CHECK(o.chunk_length >= 1 && o.rank >= 1 && o.window >= 1)
      << kName << ": chunk_length " << o.chunk_length << ", rank " << o.rank << " and window " << o.window
      << " must all be ≥ 1";
  LSF_CHECK(o.memory_length % o.chunk_length == 0 && o.memory_length >= o.window)
      << kName << ": memory_length " << o.memory_length << " must be a multiple of chunk_length "
      << o.chunk_length << " and ≥ window " << o.window << " (the window reaches w tokens into memory)";
  LSF_CHECK(o.dropout >= 0.0 && o.dropout < 1.0) << kName << ": dropout " << o.dropout << " must be in [0, 1)";
  const int64_t d = o.dim, h = o.heads, e = d / h;
  r_w_bias = register_parameter("r_w_bias", empty({1, h, 1, 1, e}));
  r_r_bias = register_parameter("r_r_bias", empty({1, h, 1, e}));
  dconv_1 = register_module("dconv_1", std::make_shared<Linear>(d, h * o.rank, /*bias=*/true));
  r_net = register_module("r_net", std::make_shared<Linear>(d, d, /*bias=*/false));
  r_net_chunk = register_module("r_net_chunk", std::make_shared<Linear>(d, d, /*bias=*/true));
  proj_query = register_module("proj_query", std::make_shared<Linear>(d, d, o.bias));
  proj_out = register_module("proj_out", std::make_shared<Linear>(d, d, o.bias));
  proj_val = register_module("proj_val", std::make_shared<Linear>(d, d, o.bias));
  proj_key = register_module("proj_key", std::make_shared<Linear>(d, d, o.bias));
  dual_ln_dproj = register_module("dual_ln_dproj", std::make_shared<LayerNorm>(d));
  dual_ln_win = register_module("dual_ln_win", std::make_shared<LayerNorm>(d));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout, o.generator));
  {
    NoGradGuard no_grad;
    init::normal_(r_w_bias, 0.0, 0.02, o.generator);
    init::normal_(r_r_bias, 0.0, 0.02, o.generator);
    for (Linear* lin : {proj_query.get(), proj_key.get(), proj_val.get(), proj_out.get()}) {
      init::xavier_normal_(lin->weight, 1.0, o.generator);
      if (lin->bias.defined()) init::zeros_(lin->bias);
    }
    for (Linear* lin : {dconv_1.get(), r_net.get(), r_net_chunk.get()}) lin->reset_parameters(o.generator);
  }
}

std::string CausalLongShortAttention::extra_repr() const {
  std::ostringstream s;
  s << "dim=" << options_.dim << ", heads=" << options_.heads << ", chunk_length=" << options_.chunk_length
    << ", rank=" << options_.rank << ", window=" << options_.window << ", memory_length=" << options_.memory_length
    << ", fused=" << (options_.fused ? "true" : "false");
  return s.str();
}

Tensor CausalLongShortAttention::chunk_scores(const Tensor& hv) {
  const int64_t B = hv.size(0), L = hv.size(1), l = options_.chunk_length;
  // dconv_1 features are head-major (head·r + rank); softmax over the l tokens of each chunk.
  Tensor logits = dconv_1->forward(hv).view({B, L / l, l, options_.heads, options_.rank});
  return softmax(logits.permute({0, 3, 1, 4, 2}).contiguous(), -1);
}

Tensor CausalLongShortAttention::compress(const Tensor& vecs, const Tensor& scores) {
  const int64_t B = vecs.size(0), L = vecs.size(1), l = options_.chunk_length, h = options_.heads;
  const int64_t e = options_.dim / h;
  // Head slices [B, h, N, l, e]; P [B, h, N, r, l] · slices → [B, h, N, r, e]; slot = chunk·r + rank.
  Tensor slices = vecs.contiguous().view({B, L / l, l, h, e}).permute({0, 3, 1, 2, 4});
  Tensor z = matmul(scores, slices);
  return z.permute({0, 2, 3, 1, 4}).reshape({B, (L / l) * options_.rank, options_.dim});
}

CausalLongShortAttention::Compressed CausalLongShortAttention::compress_memory(const Tensor& xm) {
  Tensor z = compress(xm, chunk_scores(xm));
  return {split_heads(dual_ln_dproj->forward(proj_key->forward(z)), options_.heads),
          split_heads(dual_ln_dproj->forward(proj_val->forward(z)), options_.heads)};
}

CausalLongShortAttention::Compressed CausalLongShortAttention::compress_block(const Tensor& x) {
  return compress_projected(proj_key->forward(x), proj_val->forward(x), chunk_scores(x));
}

CausalLongShortAttention::Compressed CausalLongShortAttention::compress_projected(const Tensor& kb, const Tensor& vb,
                                                                                  const Tensor& scores) {
  return {split_heads(dual_ln_dproj->forward(compress(kb, scores)), options_.heads),
          split_heads(dual_ln_dproj->forward(compress(vb, scores)), options_.heads)};
}

Tensor CausalLongShortAttention::forward(const Tensor& x, const AttentionArgs& args) {
  ::lsf::nn::ModuleScope call_site(*this);
  profiler::PhaseScope phase("attention");
  const auto& o = options_;
  const int64_t d = o.dim, h = o.heads, e = d / h, l = o.chunk_length, w = o.window;
  LSF_CHECK(x.defined() && x.dim() == 3 && x.size(2) == d)
      << kName << ": x must be [B, M, d] with d = " << d << ", got shape " << (x.defined() ? x.shape() : Shape{});
  LSF_CHECK(!args.mask.defined())
      << kName << ": the causal model has no padding mask (§3.6); leave AttentionArgs::mask undefined";
  LSF_CHECK(!args.cls.defined() && !args.cls_only)
      << kName << ": AttentionArgs::cls and cls_only are bidirectional-only; leave them unset";
  LSF_CHECK(args.height == 0 && args.width == 0 && args.num_global == 0)
      << kName << ": height/width/num_global are 2-D-only; leave them 0";
  const int64_t B = x.size(0), M = x.size(1);
  Tensor xm = args.memory.defined() ? args.memory : zeros({B, o.memory_length, d}, x.options());
  check_same_device(kName, {&x, &xm});
  check_same_dtype(kName, {&x, &xm});
  LSF_CHECK(xm.dim() == 3 && xm.size(0) == B && xm.size(2) == d)
      << kName << ": memory must be [B, C, d] = [" << B << ", C, " << d << "], got shape " << xm.shape();
  const int64_t C = xm.size(1);
  LSF_CHECK(M >= 1 && M % l == 0) << kName << ": block length M = " << M << " (x shape " << x.shape()
                                  << ") must be a positive multiple of chunk_length " << l << "; pad the block";
  LSF_CHECK(C % l == 0) << kName << ": memory length C = " << C << " (memory shape " << xm.shape()
                        << ") must be a multiple of chunk_length " << l;
  LSF_CHECK(C >= w) << kName << ": memory length C = " << C << " (memory shape " << xm.shape()
                    << ") must be ≥ window " << w << ": the band of the first query reaches w−1 tokens back";
  LSF_CHECK(M <= w || M % w == 0) << kName << ": block length M = " << M << " > window " << w
                                  << " must be a multiple of the window (official tiling); choose M % w == 0";

  const int64_t Nc = (C / l + M / l) * o.rank;
  if (args.relative_positions.defined()) {
    const Tensor& t = args.relative_positions;
    LSF_CHECK(t.dim() == 2 && t.size(0) == w && t.size(1) == d)
        << kName << ": relative_positions must be the window table [w, d] = [" << w << ", " << d << "], got shape "
        << t.shape();
    check_same_device(kName, {&x, &t});
    check_same_dtype(kName, {&x, &t});
  }
  if (args.chunk_positions.defined()) {
    const Tensor& t = args.chunk_positions;
    LSF_CHECK(t.dim() == 2 && t.size(0) == Nc && t.size(1) == d)
        << kName << ": chunk_positions must be [Nc, d] = [" << Nc << ", " << d << "] (Nc = (C/l + M/l)·r), got shape "
        << t.shape();
    check_same_device(kName, {&x, &t});
    check_same_dtype(kName, {&x, &t});
  }

  // Steps 1, 7: q̂ = split_heads(X W_q)·e^{-1/2}. Step 3: the block's keys and values,
  // projected once for the window (step 4) and the block compression (step 5). One op for the
  // three projections of x: their gradients for x sum in one buffer.
  const TensorList qkv = forward_linears(x, {proj_query.get(), proj_key.get(), proj_val.get()});
  Tensor q = split_heads(qkv[0], h);  // unscaled: the core applies e^{-1/2} (q_scale)
  const double q_scale = 1.0 / std::sqrt(double(e));
  Tensor kb = qkv[1], vb = qkv[2];
  // Steps 2, 5, 6: compressed keys/values, memory chunks first.
  Compressed mem = compress_memory(xm);
  Compressed blk = compress_projected(kb, vb, chunk_scores(x));
  Tensor kc = cat({mem.k, blk.k}, 2), vc = cat({mem.v, blk.v}, 2);
  // Step 4: window keys/values over [last w memory rows ; block], LN_L.
  // Contiguous, so that its projections below are one GEMM over all B·w rows instead of B
  // products of w rows each (each packing the weight again).
  Tensor tail = xm.narrow(1, C - w, w).contiguous();
  Tensor kw = split_heads(dual_ln_win->forward(cat({proj_key->forward(tail), kb}, 1)), h);
  Tensor vw = split_heads(dual_ln_win->forward(cat({proj_val->forward(tail), vb}, 1)), h);
  // Position tables: window row j ↔ distance w−1−j through W_R; chunk row p ↔ value p through W_Rc.
  Tensor window = args.relative_positions.defined() ? args.relative_positions : ar_window_table(w, d, x.options());
  Tensor chunk = args.chunk_positions.defined() ? args.chunk_positions : ar_chunk_table(Nc, d, x.options());
  Tensor rw = r_net->forward(window).view({w, h, e}).permute({1, 0, 2});
  Tensor rc = r_net_chunk->forward(chunk).view({Nc, h, e}).permute({1, 0, 2});

  CausalLongShortInputs in{q, kw, vw, r_w_bias.view({h, e}), r_r_bias.view({h, e}), rw, kc, vc, rc};
  CausalLongShortGeometry g{l, o.rank, C / l, q_scale};
  Tensor ctx = o.fused ? causal_long_short_attention(in, g) : causal_long_short_attention_composed(in, g);
  if (capturing(this)) {
    NoGradGuard no_grad;  // for looking at: no graph behind what only the capture needs
    capture(this, "q", mul(q, q_scale));  // the scaled queries the logits are formed from
    capture(this, "kc", kc);
    capture(this, "vc", vc);
    capture(this, "proj", cat({chunk_scores(xm), chunk_scores(x)}, 2));  // [B, h, C/l + M/l, r, l]
    capture(this, "attention", causal_long_short_attention_probabilities(in, g));
  }
  return dropout->forward(proj_out->forward(merge_heads(ctx)));
}

}  // namespace lsf::nn
