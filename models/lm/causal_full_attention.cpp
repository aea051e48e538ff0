// lm::CausalFullAttention: Transformer-XL attention over [memory ; block], composed from
// primitive ops (Linear, matmul, gather, masked_fill, softmax); autograd comes from them. See the
// header for the semantics.
#include "lsformer/models/lm/causal_full_attention.h"
#include "lsformer/models/nn/capture.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "lsformer/engine/profiler.h"
#include "lsformer/models/attention/heads.h"
#include "lsformer/engine/autograd.h"
#include "lsformer/models/attention/causal_long_short.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/index.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/shape.h"
#include "lsformer/ops/softmax.h"

namespace lsf::lm {
namespace {
constexpr const char* kName = "CausalFullAttention";
}

Tensor relative_distance_table(int64_t length, int64_t d, const TensorOptions& options) {
  return nn::ar_window_table(length, d, options);  // the same rule: row j ↔ distance length−1−j
}

CausalFullAttention::CausalFullAttention(const CausalFullAttentionOptions& o) : nn::Attention(kName), options_(o) {
  LSF_CHECK(o.dim > 0 && o.heads > 0 && o.dim % o.heads == 0)
      << kName << ": dim " << o.dim << " must be a positive multiple of heads " << o.heads;
  LSF_CHECK(o.dim % 2 == 0) << kName << ": dim " << o.dim << " must be even (sinusoid halves, §3.5)";
  LSF_CHECK(o.dropout >= 0.0 && o.dropout < 1.0) << kName << ": dropout " << o.dropout << " must be in [0, 1)";
  const int64_t d = o.dim, h = o.heads, e = d / h;
  r_w_bias = register_parameter("r_w_bias", empty({1, h, 1, 1, e}));
  r_r_bias = register_parameter("r_r_bias", empty({1, h, 1, e}));
  r_net = register_module("r_net", std::make_shared<nn::Linear>(d, d, /*bias=*/false));
  proj_query = register_module("proj_query", std::make_shared<nn::Linear>(d, d, o.bias));
  proj_out = register_module("proj_out", std::make_shared<nn::Linear>(d, d, o.bias));
  proj_val = register_module("proj_val", std::make_shared<nn::Linear>(d, d, o.bias));
  proj_key = register_module("proj_key", std::make_shared<nn::Linear>(d, d, o.bias));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(o.dropout, o.generator));
  {
    NoGradGuard no_grad;
    nn::init::normal_(r_w_bias, 0.0, 0.02, o.generator);
    nn::init::normal_(r_r_bias, 0.0, 0.02, o.generator);
    for (nn::Linear* lin : {proj_query.get(), proj_key.get(), proj_val.get(), proj_out.get(), r_net.get()}) {
      nn::init::xavier_normal_(lin->weight, 1.0, o.generator);
      if (lin->bias.defined()) nn::init::zeros_(lin->bias);
    }
  }
}

std::string CausalFullAttention::extra_repr() const {
  std::ostringstream s;
  s << "dim=" << options_.dim << ", heads=" << options_.heads << ", bias=" << (options_.bias ? "true" : "false");
  return s.str();
}

Tensor CausalFullAttention::forward(const Tensor& x, const nn::AttentionArgs& args) {
  ::lsf::nn::ModuleScope call_site(*this);
  profiler::PhaseScope phase("attention");
  const int64_t d = options_.dim, h = options_.heads, e = d / h;
  LSF_CHECK(x.defined() && x.dim() == 3 && x.size(2) == d)
      << kName << ": x must be [B, M, d] with d = " << d << ", got shape " << (x.defined() ? x.shape() : Shape{});
  LSF_CHECK(!args.mask.defined()) << kName << ": the causal model has no padding mask; leave AttentionArgs::mask undefined";
  LSF_CHECK(!args.cls.defined() && !args.cls_only)
      << kName << ": AttentionArgs::cls and cls_only are bidirectional-only; leave them unset";
  LSF_CHECK(!args.chunk_positions.defined())
      << kName << ": chunk_positions are for the long-short attention; leave them undefined";
  LSF_CHECK(args.height == 0 && args.width == 0 && args.num_global == 0)
      << kName << ": height/width/num_global are 2-D-only; leave them 0";
  const Tensor& xm = args.memory;
  LSF_CHECK(xm.defined()) << kName << ": the memory (LN1 of the cached layer inputs, [B, C, d]) is required";
  check_same_device(kName, {&x, &xm});
  check_same_dtype(kName, {&x, &xm});
  const int64_t B = x.size(0), M = x.size(1);
  LSF_CHECK(xm.dim() == 3 && xm.size(0) == B && xm.size(1) >= 1 && xm.size(2) == d)
      << kName << ": memory must be [B, C ≥ 1, d] = [" << B << ", C, " << d << "], got shape " << xm.shape();
  const int64_t C = xm.size(1), P = C + M;
  Tensor table = args.relative_positions;
  if (table.defined()) {
    LSF_CHECK(table.dim() == 2 && table.size(0) == P && table.size(1) == d)
        << kName << ": relative_positions must be [C + M, d] = [" << P << ", " << d << "], got shape " << table.shape();
    check_same_device(kName, {&x, &table});
    check_same_dtype(kName, {&x, &table});
  } else {
    table = relative_distance_table(P, d, x.options());
  }

  Tensor q = mul(nn::split_heads(proj_query->forward(x), h), 1.0 / std::sqrt(double(e)));  // [B, h, M, e]
  Tensor s = cat({xm, x}, 1);                                                       // [B, P, d]
  Tensor k = nn::split_heads(proj_key->forward(s), h);                                 // [B, h, P, e]
  Tensor v = nn::split_heads(proj_val->forward(s), h);                                 // [B, h, P, e]
  Tensor r = r_net->forward(table).view({P, h, e}).permute({1, 2, 0});              // [h, e, P]

  Tensor content = matmul(add(q, r_w_bias.view({1, h, 1, e})), k.transpose(2, 3));  // [B, h, M, P]
  Tensor position_raw = matmul(add(q, r_r_bias.view({1, h, 1, e})), r.unsqueeze(0));  // [B, h, M, P], column j ↔ δ = P−1−j
  // Relative shift: key s of query t has distance δ = C + t − s, i.e. column P−1−δ = M−1−t+s.
  // Future keys (s > C + t) would read past the table; they gather column 0 and are masked below.
  std::vector<int64_t> column(static_cast<size_t>(M * P));
  std::vector<bool> future(static_cast<size_t>(M * P));
  for (int64_t t = 0; t < M; ++t)
    for (int64_t key = 0; key < P; ++key) {
      const bool hidden = key > C + t;
      future[size_t(t * P + key)] = hidden;
      column[size_t(t * P + key)] = hidden ? 0 : M - 1 - t + key;
    }
  Tensor index = tensor(column, {1, 1, M, P}).to(x.device()).expand({B, h, M, P});
  Tensor mask = tensor(future, {M, P}).to(x.device());
  Tensor logits = masked_fill(add(content, gather(position_raw, 3, index)), mask,
                              -std::numeric_limits<double>::infinity());
  Tensor probs = softmax(logits, 3);  // [B, h, M, C + M]
  nn::capture(this, "attention", probs);
  Tensor context = matmul(probs, v);  // [B, h, M, e]
  return dropout->forward(proj_out->forward(nn::merge_heads(context)));
}

}  // namespace lsf::lm
