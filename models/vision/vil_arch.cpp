// parse_vil_arch / format_vil_arch: strict parsing of the MsViT arch string.
#include "lsformer/models/vision/vil_arch.h"

#include <cctype>
#include <set>
#include <sstream>

#include "lsformer/engine/error.h"

namespace lsf::vision {

namespace {

std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

// The integer after the field letter: optional '-', then digits only.
bool parse_int(const std::string& text, int64_t& value) {
  if (text.empty() || text.size() > 18) return false;
  size_t i = text[0] == '-' ? 1 : 0;
  if (i == text.size()) return false;
  for (size_t j = i; j < text.size(); ++j)
    if (!std::isdigit(static_cast<unsigned char>(text[j]))) return false;
  value = std::stoll(text);
  return true;
}

}  // namespace

std::vector<ViLStageConfig> parse_vil_arch(const std::string& arch) {
  LSF_CHECK(!arch.empty()) << "ViL arch: the architecture string is empty";
  std::vector<ViLStageConfig> stages;
  const std::vector<std::string> stage_texts = split_on(arch, '_');
  for (size_t si = 0; si < stage_texts.size(); ++si) {
    const int64_t stage_no = int64_t(si) + 1;
    const std::string& text = stage_texts[si];
    auto where = [&]() {
      std::ostringstream os;
      os << "ViL arch \"" << arch << "\", stage " << stage_no << " (\"" << text << "\")";
      return os.str();
    };
    LSF_CHECK(!text.empty()) << where() << ": empty stage (two '_' in a row or a trailing '_')";
    ViLStageConfig s;
    int64_t a = 1, sparse = 1;
    std::set<char> seen;
    for (const std::string& field : split_on(text, ',')) {
      LSF_CHECK(!field.empty()) << where() << ": empty field (two ',' in a row or a trailing ',')";
      const char key = field[0];
      LSF_CHECK(std::string("lhdnsgpfar").find(key) != std::string::npos)
          << where() << ": unknown field '" << field << "' (fields: l stage, h heads, d width, n blocks, "
          << "s attention, g global tokens, p patch, f window, a absolute position, r rank)";
      LSF_CHECK(seen.insert(key).second) << where() << ": field '" << key << "' is given twice";
      int64_t v = 0;
      LSF_CHECK(parse_int(field.substr(1), v)) << where() << ": field '" << field << "' needs an integer after '"
                                               << key << "'";
      switch (key) {
        case 'l': s.id = v; break;
        case 'h': s.heads = v; break;
        case 'd': s.dim = v; break;
        case 'n': s.blocks = v; break;
        case 's': sparse = v; break;
        case 'g': s.global_tokens = v; break;
        case 'p': s.patch = v; break;
        case 'f': s.window = v; break;
        case 'a': a = v; break;
        case 'r': s.rank = v; break;
      }
    }
    LSF_CHECK(s.id == stage_no) << where() << ": field 'l" << s.id << "' must equal the stage's position " << stage_no
                                << " (stages are numbered 1, 2, ... in order)";
    LSF_CHECK(sparse == 0 || sparse == 1) << where() << ": field 's" << sparse << "' must be 0 (full) or 1 (long-short)";
    LSF_CHECK(a == 0 || a == 1) << where() << ": field 'a" << a << "' must be 0 or 1";
    s.long_short = sparse == 1;
    s.absolute_pos = a == 1;
    LSF_CHECK(s.heads >= 1) << where() << ": field 'h" << s.heads << "' must be ≥ 1";
    LSF_CHECK(s.dim >= 1 && s.dim % s.heads == 0)
        << where() << ": width 'd" << s.dim << "' must be ≥ 1 and divisible by the heads 'h" << s.heads << "'";
    LSF_CHECK(!s.absolute_pos || s.dim % 2 == 0)
        << where() << ": width 'd" << s.dim << "' must be even with an absolute position embedding ('a1' splits it "
        << "into x and y halves)";
    LSF_CHECK(s.blocks >= 0) << where() << ": field 'n" << s.blocks << "' must be ≥ 0";
    LSF_CHECK(s.global_tokens >= 0) << where() << ": field 'g" << s.global_tokens << "' must be ≥ 0";
    LSF_CHECK(!s.long_short || s.global_tokens <= 1)
        << where() << ": field 'g" << s.global_tokens
        << "': long-short stages take 0 or 1 global tokens (the official arithmetic is right only for 1)";
    LSF_CHECK(s.patch >= 1) << where() << ": field 'p" << s.patch << "' must be ≥ 1";
    LSF_CHECK(s.rank >= 0) << where() << ": field 'r" << s.rank << "' must be ≥ 0";
    if (s.long_short) {
      LSF_CHECK(s.window >= 1) << where() << ": field 'f" << s.window << "' (the window) must be ≥ 1";
      LSF_CHECK(s.absolute_pos || s.window >= 2)
          << where() << ": field 'f1' with relative position biases ('a0') is unusable (transformer-ls.md §4.3); "
          << "use f ≥ 2 or a1";
    }
    stages.push_back(s);
  }
  return stages;
}

std::string format_vil_arch(const std::vector<ViLStageConfig>& stages) {
  std::ostringstream os;
  for (size_t i = 0; i < stages.size(); ++i) {
    const ViLStageConfig& s = stages[i];
    if (i > 0) os << "_";
    os << "l" << s.id << ",h" << s.heads << ",d" << s.dim << ",n" << s.blocks << ",s" << (s.long_short ? 1 : 0) << ",g"
       << s.global_tokens << ",p" << s.patch << ",f" << s.window << ",a" << (s.absolute_pos ? 1 : 0) << ",r"
       << s.rank;
  }
  return os.str();
}

}  // namespace lsf::vision
