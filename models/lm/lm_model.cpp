// lm::TransformerLSModel: construction, the §6 initialisation and the forward of §3.4 (see
// lm_model.h for the model, its names and deviations).
#include "lsformer/models/lm/lm_model.h"

#include <cmath>
#include <sstream>

#include "lsformer/engine/autograd.h"
#include "lsformer/engine/error.h"
#include "lsformer/engine/profiler.h"
#include "lsformer/models/attention/causal_long_short.h"
#include "lsformer/models/lm/causal_full_attention.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/shape.h"
#include "lsformer/ops/softmax.h"

namespace lsf::lm {
namespace {

constexpr const char* kName = "TransformerLSModel";

// The last C rows of [old ; h] (C = old.size(1)), detached: the next memory of one layer.
// Views where possible (nothing ever writes a memory in place, see memory.h).
Tensor roll_memory(const Tensor& old, const Tensor& h) {
  const int64_t C = old.size(1), n = h.size(1);
  const Tensor fresh = h.detach();
  if (n >= C) return fresh.narrow(1, n - C, C);
  return cat({old.narrow(1, n, C - n), fresh}, 1);
}

}  // namespace

TiedOutput::TiedOutput(int64_t vocab_size) : Module("TiedOutput") {
  bias = register_parameter("bias", zeros({vocab_size}));
}

TransformerLSModel::TransformerLSModel(const LmModelOptions& options) : Module(kName), options_(options) {
  validate(options_);
  const LmModelOptions& o = options_;
  // Registration order = the official state_dict order (in_emb, out_emb, layers).
  in_emb = register_module("in_emb", std::make_shared<nn::Embedding>(o.vocab_size, o.dim));
  out_emb = register_module("out_emb", std::make_shared<TiedOutput>(o.vocab_size));
  layers_list = register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < o.layers; ++i) layers.push_back(layers_list->push_back(std::make_shared<TransformerLSLayer>(o)));
  emb_dropout = register_module("emb_dropout", std::make_shared<nn::Dropout>(o.emb_dropout, o.generator));
  reset_parameters();
}

void TransformerLSModel::reset_parameters() {
  NoGradGuard no_grad;
  Generator* g = options_.generator;
  constexpr double kStd = 0.02;  // the official init_std
  apply([&](nn::Module& m) {
    if (auto* lin = dynamic_cast<nn::Linear*>(&m)) {
      nn::init::normal_(lin->weight, 0.0, kStd, g);
      if (lin->bias.defined()) nn::init::zeros_(lin->bias);
    } else if (auto* ln = dynamic_cast<nn::LayerNorm*>(&m)) {
      nn::init::normal_(ln->weight, 1.0, kStd, g);
      nn::init::zeros_(ln->bias);
    } else if (auto* emb = dynamic_cast<nn::Embedding*>(&m)) {
      nn::init::normal_(emb->weight, 0.0, kStd, g);
    } else if (auto* ls = dynamic_cast<nn::CausalLongShortAttention*>(&m)) {
      nn::init::normal_(ls->r_w_bias, 0.0, kStd, g);
      nn::init::normal_(ls->r_r_bias, 0.0, kStd, g);
    } else if (auto* full = dynamic_cast<CausalFullAttention*>(&m)) {
      nn::init::normal_(full->r_w_bias, 0.0, kStd, g);
      nn::init::normal_(full->r_r_bias, 0.0, kStd, g);
    } else if (auto* out = dynamic_cast<TiedOutput*>(&m)) {
      nn::init::zeros_(out->bias);
    }
  });
}

Memory TransformerLSModel::initial_memory(int64_t batch) const {
  return zero_memory(options_.layers, batch, options_.memory_length, options_.dim, in_emb->weight.options());
}

std::string TransformerLSModel::extra_repr() const {
  const LmModelOptions& o = options_;
  std::ostringstream os;
  os << "attention=" << to_string(o.attention) << ", vocab_size=" << o.vocab_size << ", dim=" << o.dim
     << ", heads=" << o.heads << ", layers=" << o.layers << ", block_length=" << o.block_length
     << ", memory_length=" << o.memory_length;
  if (o.attention == LmAttention::LongShort)
    os << ", chunk_length=" << o.chunk_length << ", rank=" << o.rank << ", window=" << o.window;
  return os.str();
}

Tensor TransformerLSModel::forward(const Tensor& tokens, Memory& memory, std::vector<Tensor>* layer_inputs) {
  ::lsf::nn::ModuleScope call_site(*this);
  const LmModelOptions& o = options_;
  LSF_CHECK(tokens.defined()) << kName << ": tokens is undefined";
  LSF_CHECK(tokens.dtype() == kI64 || tokens.dtype() == kI32)
      << kName << ": tokens must be i64 (or i32) ids, got " << tokens.dtype();
  LSF_CHECK(tokens.dim() == 2 && tokens.size(0) >= 1 && tokens.size(1) >= 1)
      << kName << ": tokens must be [B, n] with B, n ≥ 1, got shape " << tokens.shape();
  LSF_CHECK(tokens.device() == in_emb->weight.device())
      << kName << ": tokens are on " << tokens.device() << " but the model is on " << in_emb->weight.device();
  {
    const int64_t lo = amin(tokens).to(kI64).item<int64_t>(), hi = amax(tokens).to(kI64).item<int64_t>();
    LSF_CHECK(lo >= 0 && hi < o.vocab_size)
        << kName << ": token ids span [" << lo << ", " << hi << "], outside [0, vocab_size = " << o.vocab_size << ")";
  }
  const int64_t B = tokens.size(0), n = tokens.size(1), run = padded_length(o, n), d = o.dim, C = o.memory_length;
  check_memory(kName, memory, o, B, in_emb->weight);

  const Tensor ids = run == n ? tokens : pad(tokens, {0, run - n}, 0.0);
  Tensor h = emb_dropout->forward(mul(in_emb->forward(ids), std::sqrt(double(d))));  // [B, run, d]
  const TensorOptions act = h.options();
  nn::AttentionArgs tables;
  if (o.attention == LmAttention::LongShort) {
    tables.relative_positions = emb_dropout->forward(nn::ar_window_table(o.window, d, act));             // [w, d]
    tables.chunk_positions = nn::ar_chunk_table((C / o.chunk_length + run / o.chunk_length) * o.rank, d, act);  // [Nc, d]
  } else {
    tables.relative_positions = emb_dropout->forward(relative_distance_table(C + run, d, act));  // [C + run, d]
  }

  Memory next;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Tensor& old = memory.layers[i];
    next.layers.push_back(roll_memory(old, h));  // recorded before the layer (and its LN1) runs
    if (layer_inputs) layer_inputs->push_back(h);
    h = layers[i]->forward(h, old, tables);
  }
  profiler::PhaseScope phase("output (logits, log-softmax)");
  h = emb_dropout->forward(h);
  Tensor logits = add(matmul(h, in_emb->weight.t()), out_emb->bias);  // [B, run, V]
  if (logits.dtype() == kF16 || logits.dtype() == kBF16) logits = logits.to(kF32);
  Tensor log_probs = log_softmax(logits, -1);
  memory = std::move(next);
  return run == n ? log_probs : log_probs.narrow(1, 0, n);
}

}  // namespace lsf::lm
