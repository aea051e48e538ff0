// Shared by the char-LM tests (test_lm_model.cpp, test_lm_decoding.cpp): tiny model options,
// parameters drawn away from the initialisation, random token blocks, the fixture config, and
// the float tolerance of a whole-model comparison.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "helpers.h"
#include "lsformer/models/lm/lm_model.h"

namespace lsf::test::lm_tests {

// d = 8, h = 2, 2 layers, FFN 12, V = 11; long-short: M = 8 > w = 4, l = 2, r = 2, C = 8.
inline lm::LmModelOptions tiny(lm::LmAttention attention = lm::LmAttention::LongShort) {
  lm::LmModelOptions o;
  o.vocab_size = 11;
  o.dim = 8;
  o.heads = 2;
  o.layers = 2;
  o.ffn_dim = 12;
  o.block_length = 8;
  o.memory_length = 8;
  o.chunk_length = 2;
  o.rank = 2;
  o.window = 4;
  o.dropout = 0.0;
  o.emb_dropout = 0.0;
  o.attention = attention;
  return o;
}

// Parameters of unit-scale influence (the §6 initialisation makes every path nearly linear):
// LayerNorm affine near (1, 0) with spread 0.2, other biases N(0, 0.2²), weights and tables N(0, 0.4²).
inline void randomise(nn::Module& m, uint64_t seed) {
  Generator g(seed);
  NoGradGuard ng;
  for (const auto& [name, t] : m.named_parameters()) {
    const bool norm = name.find("norm") != std::string::npos || name.find("dual_ln") != std::string::npos;
    if (norm) nn::init::normal_(t, name.ends_with("weight") ? 1.0 : 0.0, 0.2, &g);
    else if (name.ends_with("bias") && name.find("r_") == std::string::npos) nn::init::normal_(t, 0.0, 0.2, &g);
    else nn::init::normal_(t, 0.0, 0.4, &g);
  }
}

// Random ids [B, n] in [0, V).
inline Tensor random_tokens(int64_t B, int64_t n, int64_t V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> id(0, V - 1);
  std::vector<int64_t> ids(static_cast<size_t>(B * n));
  for (auto& x : ids) x = id(rng);
  return tensor(ids, {B, n});
}

inline lm::LmModelOptions options_from(const nlohmann::json& c) {
  lm::LmModelOptions o;
  o.vocab_size = c.at("vocab_size");
  o.dim = c.at("dim");
  o.heads = c.at("heads");
  o.layers = c.at("layers");
  o.ffn_dim = c.at("ffn_dim");
  o.block_length = c.at("block_length");
  o.memory_length = c.at("memory_length");
  o.chunk_length = c.at("chunk_length");
  o.rank = c.at("rank");
  o.window = c.at("window");
  o.bias = c.at("bias");
  o.attention = lm::parse_lm_attention(c.at("attention"));
  o.dropout = 0.0;
  o.emb_dropout = 0.0;
  return o;
}

// Tolerance (atol = rtol) of a whole-model value in dtype dt after `blocks` blocks. Each
// summation of n unit-scale terms has relative error ≤ n·u (u = 2^-24 for f32, 2^-53 for f64);
// softmax and LayerNorm turn an absolute input error δ into an output error of order δ (the
// tests' parameters keep gains O(1)), so the errors of the reductions along a path add up. One
// layer's longest path: LN1 (d), q/k/v projections (d), the chunk softmax and compression (l),
// LN_G and LN_L (d), the attention logits (e) and softmax/context over ≤ Nc + w (long-short) or
// C + M (full) slots, W_o (d), LN2 (d), the FFN (d + ffn); then the output layer (d) and the
// log-softmax (V). A memory carried from a previous block repeats the whole chain, hence the
// factor `blocks`. With the safety factor 16 of the module tests: 16·blocks·L·u.
inline double model_tol(const lm::LmModelOptions& o, DType dt, int64_t blocks = 1) {
  const int64_t slots = o.attention == lm::LmAttention::LongShort
                            ? (o.memory_length + o.block_length) / o.chunk_length * o.rank + o.window
                            : o.memory_length + o.block_length;
  const int64_t per_layer = 7 * o.dim + o.chunk_length + o.dim / o.heads + slots + o.ffn_dim;
  const int64_t L = o.layers * per_layer + o.dim + o.vocab_size;
  return 16.0 * double(blocks) * double(L) * (dt == kF32 ? 0x1p-24 : 0x1p-53);
}

}  // namespace lsf::test::lm_tests
