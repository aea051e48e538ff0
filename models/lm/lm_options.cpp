// LmModelOptions: validation, the padding rule and the parameter count (see lm_options.h).
#include "lsformer/models/lm/lm_options.h"

#include <numeric>

#include "lsformer/engine/enum_names.h"
#include "lsformer/engine/error.h"

namespace lsf::lm {
namespace {
constexpr const char* kName = "TransformerLSModel";

bool is_long_short(const LmModelOptions& o) { return o.attention == LmAttention::LongShort; }
}  // namespace

const char* to_string(LmAttention attention) {
  return enum_name(attention, kLmAttentionNames);
}

LmAttention parse_lm_attention(const std::string& name) {
  if (name == "long_short") return LmAttention::LongShort;
  if (name == "full") return LmAttention::Full;
  LSF_FAIL() << kName << ": unknown attention \"" << name << "\" (expected \"long_short\" or \"full\")";
}

void validate(const LmModelOptions& o) {
  LSF_CHECK(o.vocab_size >= 1) << kName << ": option vocab_size must be ≥ 1, got " << o.vocab_size;
  LSF_CHECK(o.dim >= 2 && o.dim % 2 == 0)
      << kName << ": option dim must be even and ≥ 2 (the sinusoid tables have sin and cos halves, §3.5), got "
      << o.dim;
  LSF_CHECK(o.heads >= 1) << kName << ": option heads must be ≥ 1, got " << o.heads;
  LSF_CHECK(o.dim % o.heads == 0) << kName << ": option dim = " << o.dim << " is not divisible by heads = " << o.heads;
  LSF_CHECK(o.layers >= 1) << kName << ": option layers must be ≥ 1, got " << o.layers;
  LSF_CHECK(o.ffn_dim >= 1) << kName << ": option ffn_dim must be ≥ 1, got " << o.ffn_dim;
  LSF_CHECK(o.block_length >= 1) << kName << ": option block_length must be ≥ 1, got " << o.block_length;
  LSF_CHECK(o.memory_length >= 1) << kName << ": option memory_length must be ≥ 1, got " << o.memory_length;
  LSF_CHECK(o.dropout >= 0.0 && o.dropout < 1.0) << kName << ": option dropout must be in [0, 1), got " << o.dropout;
  LSF_CHECK(o.emb_dropout >= 0.0 && o.emb_dropout < 1.0)
      << kName << ": option emb_dropout must be in [0, 1), got " << o.emb_dropout;
  LSF_CHECK(o.attention == LmAttention::LongShort || o.attention == LmAttention::Full)
      << kName << ": option attention holds an unknown value " << int(o.attention);
  if (!is_long_short(o)) return;
  const int64_t l = o.chunk_length, w = o.window, M = o.block_length, C = o.memory_length;
  LSF_CHECK(l >= 1) << kName << ": option chunk_length must be ≥ 1, got " << l;
  LSF_CHECK(o.rank >= 1) << kName << ": option rank must be ≥ 1, got " << o.rank;
  LSF_CHECK(w >= 1) << kName << ": option window must be ≥ 1, got " << w;
  LSF_CHECK(M % l == 0) << kName << ": option block_length = " << M << " must be a multiple of chunk_length = " << l;
  LSF_CHECK(M <= w || M % w == 0) << kName << ": option block_length = " << M << " > window = " << w
                                  << " must be a multiple of the window (the official tiling)";
  LSF_CHECK(C % l == 0) << kName << ": option memory_length = " << C << " must be a multiple of chunk_length = " << l;
  LSF_CHECK(C >= w) << kName << ": option memory_length = " << C << " must be ≥ window = " << w
                    << " (the first query's window reaches w−1 tokens into the memory)";
}

int64_t padded_length(const LmModelOptions& o, int64_t n) {
  LSF_CHECK(n >= 1) << kName << ": a block needs at least one token, got " << n;
  if (!is_long_short(o)) return n;
  const int64_t l = o.chunk_length, w = o.window;
  if (n % l == 0 && (n <= w || n % w == 0)) return n;
  const int64_t multiple = std::lcm(l, w);
  return (n + multiple - 1) / multiple * multiple;
}

int64_t layer_parameter_count(const LmModelOptions& o) {
  const int64_t d = o.dim, f = o.ffn_dim;
  const int64_t projections = 4 * (d * d + (o.bias ? d : 0));  // q, k, v, out
  const int64_t relative = d * d + 2 * d;                      // r_net (no bias), u, v
  const int64_t block = 2 * (2 * d) + (d * f + f) + (f * d + d);  // norm1, norm2, fc1, fc2
  int64_t count = projections + relative + block;
  if (is_long_short(o)) {
    count += (d * o.heads * o.rank + o.heads * o.rank)  // dconv_1 (W_P with bias)
             + (d * d + d)                              // r_net_chunk (with bias)
             + 2 * (2 * d);                             // dual_ln_win, dual_ln_dproj
  }
  return count;
}

int64_t parameter_count(const LmModelOptions& o) {
  // The tied token table [V, d] once, the output bias [V], and the layers.
  return o.vocab_size * o.dim + o.vocab_size + o.layers * layer_parameter_count(o);
}

}  // namespace lsf::lm
