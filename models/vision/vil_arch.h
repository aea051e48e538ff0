// The ViL / MsViT architecture string (transformer-ls.md §4.4), parsed and printed.
//
//   "l1,h3,d96,n1,s1,g1,p4,f7,a0,r8_l2,h3,d192,n4,s1,g1,p2,f7,a0,r8_l3,..."
//
// Stages are separated by '_', fields by ','; each field is one letter and an integer:
//   l stage number (must be the stage's 1-based position), h heads, d width, n blocks,
//   s attention (1 long-short, 0 full), g global tokens, p patch size, f window w (long-short
//   stages), a absolute 2-D position embedding (1 on, 0 off: then relative-position biases),
//   r dynamic-projection rank.
// A field left out takes the official default: l1, h3, d192, n1, s1, g1, p2, f7, a1, r0.
// Errors name the stage and the field: an unknown letter, a missing or non-integer value, a
// repeated field, or a value out of range (h ≥ 1, d ≥ 1 divisible by h and even when a1,
// n ≥ 0, s/a ∈ {0, 1}, g ≥ 0 and g ≤ 1 in long-short stages, p ≥ 1, f ≥ 1 in long-short stages
// (≥ 2 with relative biases, i.e. a0), r ≥ 0).
// Deviation: the official MsViT takes 3 or 4 stages; any count ≥ 1 is accepted here (small
// images need fewer), and the state_dict names continue as layer1, layer2, ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lsf::vision {

struct ViLStageConfig {
  int64_t id = 1;               // l
  int64_t heads = 3;            // h
  int64_t dim = 192;            // d
  int64_t blocks = 1;           // n: attention + MLP block pairs
  bool long_short = true;       // s: long-short attention (true) or full attention (false)
  int64_t global_tokens = 1;    // g: CLS-like tokens prepended in this stage
  int64_t patch = 2;            // p: patch-embedding conv kernel = stride
  int64_t window = 7;           // f: long-short window w (unused by full attention)
  bool absolute_pos = true;     // a: absolute 2-D position embedding instead of relative biases
  int64_t rank = 0;             // r: dynamic-projection rank (long-short stages)
  bool operator==(const ViLStageConfig&) const = default;
};

// Throws lsf::Error naming the stage (1-based) and the field for malformed strings.
std::vector<ViLStageConfig> parse_vil_arch(const std::string& arch);
// The canonical string (every field, in the order l,h,d,n,s,g,p,f,a,r); parses back to the same.
std::string format_vil_arch(const std::vector<ViLStageConfig>& stages);

}  // namespace lsf::vision
