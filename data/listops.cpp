// ListOps generator (port of LRA's lra_benchmarks/data/listops.py), TSV writer/reader and
// tokenizer. See data/listops.h for the format; docs/data-formats.md §1.4.1 for the reference.
//
// Faithfulness to LRA's generate_tree(depth, max_depth, max_args), started at depth 1:
//   r = random() if depth < max_depth else 1;  r > VALUE_P (0.25) → leaf, a uniform digit;
//   else n = randint(2, max_args) children at depth + 1 and a uniform operator of MIN/MAX/MED/SM.
// Kept rows have min_length < L < max_length (strict), are de-duplicated by source text over all
// splits, and are split first train, then val, then test.
// Two deliberate differences, neither of which changes the distribution of the kept rows:
//  * Python draws the operator after the children; we draw it before them so the source text
//    can be written in one pass. The draws are independent, so the joint law is the same.
//  * A tree is abandoned as soon as it reaches max_length tokens (it would be rejected anyway),
//    which keeps a draw's cost bounded by max_length. Trees are i.i.d., so stopping one early
//    does not bias the next.
// LRA splits a Python set (arbitrary order); we split in generation order, also an i.i.d. split.
#include "lsformer/data/listops.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <unordered_set>

#include "lsformer/data/file_util.h"
#include "lsformer/data/random_stream.h"
#include "lsformer/engine/safetensors.h"
#include "lsformer/engine/error.h"

namespace lsf::data {
namespace {

constexpr double kValueP = 0.25;  // LRA's VALUE_P: an operator is drawn when random() ≤ 0.25
constexpr int kNumOperators = 4;
constexpr const char* kOperatorNames[kNumOperators] = {"[MIN", "[MAX", "[MED", "[SM"};
enum Operator { kMin = 0, kMax = 1, kMed = 2, kSum = 3 };
// PhiloxStream id of the generator, so it never shares random words with other data streams.
constexpr uint64_t kListOpsStream = 0x4c6973744f707300ull;  // "ListOps\0"

// Token ids of the fixed vocabulary.
constexpr int32_t kDigitBase = 1;    // digit d → 1 + d
constexpr int32_t kOperatorBase = 11;  // [MIN 11, [MAX 12, [MED 13, [SM 14
constexpr int32_t kCloseId = 15;     // ']' (LRA's 'X')

int32_t apply_operator(int op, int32_t* args, int64_t n) {
  switch (op) {
    case kMin: return *std::min_element(args, args + n);
    case kMax: return *std::max_element(args, args + n);
    case kMed: {
      // int(np.median): middle value, or the truncated mean of the two middle values.
      std::sort(args, args + n);
      if (n % 2 == 1) return args[n / 2];
      return (args[n / 2 - 1] + args[n / 2]) / 2;
    }
    default: {
      int64_t sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += args[i];
      return int32_t(sum % 10);
    }
  }
}

// Draws one tree at a time, writing its source text and computing its value in one pass.
class TreeGenerator {
 public:
  explicit TreeGenerator(const ListOpsOptions& options)
      : options_(options), rng_(options.seed, kListOpsStream) {}

  // Draws a tree. False when it reached max_length tokens and was abandoned; else the text is
  // in text(), the value in *value and the token count in *length.
  bool draw(int32_t* value, int64_t* length) {
    text_.clear();
    values_.clear();
    length_ = 0;
    aborted_ = false;
    const int32_t v = node(1);
    if (aborted_) return false;
    *value = v;
    *length = length_;
    return true;
  }
  const std::string& text() const { return text_; }

 private:
  int32_t node(int64_t depth) {
    const double r = depth < options_.max_depth ? rng_.uniform() : 1.0;
    if (r > kValueP) {
      const int32_t digit = int32_t(rng_.below(10));
      if (++length_ >= options_.max_length) {
        aborted_ = true;
        return 0;
      }
      text_ += char('0' + digit);
      return digit;
    }
    const int64_t n = 2 + int64_t(rng_.below(uint32_t(options_.max_args - 1)));
    const int op = int(rng_.below(kNumOperators));
    length_ += 2;  // the operator token and its closing ']'
    if (length_ >= options_.max_length) {
      aborted_ = true;
      return 0;
    }
    // LRA nests ((((op, c0), c1), c2), ']'): n + 1 opening parentheses, one ')' per child.
    for (int64_t i = 0; i <= n; ++i) text_ += "( ";
    text_ += kOperatorNames[op];
    const size_t base = values_.size();
    for (int64_t i = 0; i < n; ++i) {
      text_ += ' ';
      const int32_t v = node(depth + 1);
      if (aborted_) return 0;
      values_.push_back(v);
      text_ += " )";
    }
    text_ += " ] )";
    const int32_t result = apply_operator(op, values_.data() + base, n);
    values_.resize(base);
    return result;
  }

  const ListOpsOptions& options_;
  PhiloxStream rng_;
  std::string text_;
  std::vector<int32_t> values_;  // argument values of the operators being built (a stack)
  int64_t length_ = 0;
  bool aborted_ = false;
};

// Largest L any tree within the depth and argument limits can have (saturating at `cap`).
int64_t max_tree_length(const ListOpsOptions& o, int64_t cap) {
  int64_t length = 1;  // depth == max_depth forces a leaf
  for (int64_t depth = o.max_depth - 1; depth >= 1; --depth) {
    if (length > (cap - 2) / o.max_args) return cap;
    length = 2 + o.max_args * length;
  }
  return length;
}

void check_label(int64_t label, const std::string& where) {
  LSF_CHECK(label >= 0 && label < kListOpsClasses)
      << where << ": label " << label << " is outside 0..9";
}

}  // namespace

ListOpsSplits generate_listops(int64_t train, int64_t val, int64_t test, const ListOpsOptions& o) {
  LSF_CHECK(train >= 0 && val >= 0 && test >= 0)
      << "generate_listops: split sizes must be ≥ 0, got train " << train << ", val " << val
      << ", test " << test;
  LSF_CHECK(o.max_depth >= 1) << "generate_listops: max_depth must be ≥ 1, got " << o.max_depth;
  LSF_CHECK(o.max_args >= 2 && o.max_args <= 1000000)
      << "generate_listops: max_args must be in [2, 1000000], got " << o.max_args;
  LSF_CHECK(o.min_length >= 0) << "generate_listops: min_length must be ≥ 0, got " << o.min_length;
  LSF_CHECK(o.max_length - o.min_length >= 2)
      << "generate_listops: no length L satisfies min_length < L < max_length (min_length "
      << o.min_length << ", max_length " << o.max_length << ")";
  LSF_CHECK(o.max_attempts >= 1)
      << "generate_listops: max_attempts must be ≥ 1, got " << o.max_attempts;
  const int64_t longest = max_tree_length(o, o.max_length);
  LSF_CHECK(longest > o.min_length)
      << "generate_listops: trees with max_depth " << o.max_depth << " and max_args "
      << o.max_args << " have at most " << longest << " tokens, so none is longer than min_length "
      << o.min_length;

  const int64_t total = train + val + test;
  // A draw can only be kept if its root is an operator (probability 0.25 below max_depth; a
  // lone digit is 1 token) with few enough arguments for L < max_length (n arguments take at
  // least n + 2 tokens; n is uniform in 2..max_args). When that bound makes the expected number
  // of draws absurd (max_args = 1e6 with max_length = 60: ~1e9 draws), refuse at once instead
  // of drawing for hours.
  if (total > 0 && o.min_length >= 1) {
    const double fits = std::clamp(double(o.max_length - 4) / double(o.max_args - 1), 0.0, 1.0);
    const double keep = (o.max_depth > 1 ? 0.25 : 0.0) * fits;
    const double draws = keep > 0 ? double(total) / keep : INFINITY;
    LSF_CHECK(draws <= 100.0 * double(o.max_attempts))
        << "generate_listops: at most " << keep * 100 << "% of draws can give an expression with " << o.min_length
        << " < L < " << o.max_length << " (max_depth " << o.max_depth << ", max_args " << o.max_args
        << "), so " << total << " examples need at least " << draws << " draws (limit " << 100.0 * double(o.max_attempts)
        << "): lower max_args, raise max_length or ask for fewer examples";
  }
  // A deque never moves its elements, so the set's views into their sources stay valid.
  std::deque<ListOpsRow> rows;
  std::unordered_set<std::string_view> seen;
  TreeGenerator generator(o);
  int64_t failures = 0;  // consecutive draws that produced no new row
  // All draws: once there have been 2 × max_attempts of them (after the consecutive-failure check
  // had its chance to name a space of expressions used up), a config that keeps fewer than one in
  // 1000 (≥ 1000 draws per row; LRA's defaults keep ~8%) is refused rather than drawn for hours.
  int64_t draws = 0;
  while (int64_t(rows.size()) < total) {
    ++draws;
    LSF_CHECK(draws <= 2 * o.max_attempts || double(rows.size()) * 1000.0 >= double(draws))
        << "generate_listops: only " << rows.size() << " of " << draws << " draws gave a new expression with "
        << o.min_length << " < L < " << o.max_length << " (max_depth " << o.max_depth << ", max_args " << o.max_args
        << "), fewer than 1 in 1000, and " << total << " are needed: lower max_args, widen the length bounds or ask for "
        << "fewer examples";
    int32_t value = 0;
    int64_t length = 0;
    const bool kept = generator.draw(&value, &length) && length > o.min_length &&
                      !seen.count(std::string_view(generator.text()));
    if (!kept) {
      LSF_CHECK(++failures < o.max_attempts)
          << "generate_listops: gave up after " << o.max_attempts
          << " consecutive draws without a new expression; found " << rows.size() << " of "
          << total << " distinct expressions with " << o.min_length << " < L < " << o.max_length
          << " (max_depth " << o.max_depth << ", max_args " << o.max_args
          << "): widen the length bounds or ask for fewer examples";
      continue;
    }
    failures = 0;
    rows.push_back(ListOpsRow{generator.text(), value});
    seen.insert(std::string_view(rows.back().source));
  }
  seen.clear();

  ListOpsSplits splits;
  auto take = [&](std::vector<ListOpsRow>& out, int64_t count) {
    out.reserve(size_t(count));
    for (int64_t i = 0; i < count; ++i) {
      out.push_back(std::move(rows.front()));
      rows.pop_front();
    }
  };
  take(splits.train, train);
  take(splits.val, val);
  take(splits.test, test);
  return splits;
}

void write_listops_tsv(const std::string& path, const std::vector<ListOpsRow>& rows) {
  // Check every row before creating anything, so a bad row leaves no file behind.
  for (size_t i = 0; i < rows.size(); ++i) {
    check_label(rows[i].label, "write_listops_tsv: row " + std::to_string(i));
    LSF_CHECK(rows[i].source.find_first_of("\t\r\n\"") == std::string::npos)
        << "write_listops_tsv: row " << i
        << ": the source contains a tab, newline or quote, which LRA's TSV cannot hold";
  }
  write_file_atomically(path, [&](std::ostream& out) {
    out << "Source\tTarget\r\n";
    for (const ListOpsRow& row : rows) out << row.source << '\t' << row.label << "\r\n";
  });
}

void write_listops_dataset(const std::string& dir, const ListOpsSplits& splits) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  LSF_CHECK(!ec) << "write_listops_dataset: cannot create directory '" << dir
                 << "': " << ec.message();
  LSF_CHECK(std::filesystem::is_directory(dir, ec))
      << "write_listops_dataset: '" << dir << "' exists and is not a directory";
  const std::filesystem::path base(dir);
  write_listops_tsv((base / "basic_train.tsv").string(), splits.train);
  write_listops_tsv((base / "basic_val.tsv").string(), splits.val);
  write_listops_tsv((base / "basic_test.tsv").string(), splits.test);
}

namespace {
// Calls visit(token) for each space-separated token of a ListOps source, in order.
template <typename Visit>
void for_each_token(const std::string& source, Visit&& visit) {
  size_t pos = 0;
  while (pos < source.size()) {
    if (source[pos] == ' ') {
      ++pos;
      continue;
    }
    size_t end = source.find(' ', pos);
    if (end == std::string::npos) end = source.size();
    visit(std::string_view(source.data() + pos, end - pos));
    pos = end;
  }
}
}  // namespace

std::vector<int32_t> tokenize_listops(const std::string& source, const std::string& where) {
  std::vector<int32_t> ids;
  ids.reserve(source.size() / 2);
  for_each_token(source, [&](std::string_view token) {
    if (token == "(" || token == ")") return;  // LRA's pipeline drops parentheses
    if (token.size() == 1 && token[0] >= '0' && token[0] <= '9') {
      ids.push_back(kDigitBase + (token[0] - '0'));
    } else if (token == "]" || token == "X") {
      ids.push_back(kCloseId);
    } else {
      int32_t id = -1;
      for (int op = 0; op < kNumOperators; ++op)
        if (token == kOperatorNames[op]) id = kOperatorBase + op;
      LSF_CHECK(id >= 0) << where << ": unknown ListOps token '" << token
                         << "' (expected ( ) ] X 0-9 [MIN [MAX [MED [SM)";
      ids.push_back(id);
    }
  });
  LSF_CHECK(!ids.empty()) << where << ": empty ListOps expression";
  return ids;
}

void check_listops_expression(const std::string& source, const std::string& where) {
  struct Open {
    std::string_view op;
    int64_t token, args;
  };
  std::vector<Open> operators;  // the operators not yet closed, innermost last
  int64_t parens = 0, top_level = 0, index = 0, last_open_paren = 0;
  // A value (a digit, or a closed operator) is an argument of the innermost open operator, or
  // the top-level value, of which there must be exactly one.
  auto value = [&](int64_t token) {
    if (!operators.empty()) {
      ++operators.back().args;
      return;
    }
    LSF_CHECK(++top_level == 1) << where << ": token " << token
                                << " starts a second expression (a row holds exactly one; missing '[OP'?)";
  };
  for_each_token(source, [&](std::string_view token) {
    ++index;
    if (token == "(") {
      ++parens;
      last_open_paren = index;
    } else if (token == ")") {
      LSF_CHECK(parens > 0) << where << ": unbalanced parentheses: ')' (token " << index << ") closes nothing";
      --parens;
    } else if (token == "]" || token == "X") {
      LSF_CHECK(!operators.empty()) << where << ": '" << token << "' (token " << index << ") closes no operator";
      LSF_CHECK(operators.back().args > 0) << where << ": operator " << operators.back().op << " (token "
                                           << operators.back().token << ") has no arguments";
      operators.pop_back();  // its value took its slot in the parent when it opened
    } else if (token.size() == 1 && token[0] >= '0' && token[0] <= '9') {
      value(index);
    } else if (token.size() > 1 && token[0] == '[') {
      value(index);  // the operator's result takes this argument slot (counted when it opens)
      operators.push_back({token, index, 0});
    } else {
      LSF_FAIL() << where << ": unknown ListOps token '" << token << "' (expected ( ) ] X 0-9 [MIN [MAX [MED [SM)";
    }
  });
  LSF_CHECK(operators.empty()) << where << ": operator " << operators.back().op << " (token " << operators.back().token
                               << ") is never closed by ']' (" << operators.size() << " open at the end)";
  LSF_CHECK(parens == 0) << where << ": unbalanced parentheses: " << parens << " '(' never closed (the last at token "
                         << last_open_paren << ")";
  LSF_CHECK(top_level == 1) << where << ": empty ListOps expression";
}

namespace {
Dataset empty_listops_dataset() {
  Dataset dataset;
  dataset.name = "listops";
  dataset.vocab_size = kListOpsVocabSize;
  dataset.num_classes = kListOpsClasses;
  return dataset;
}
}  // namespace

Dataset listops_dataset(const std::vector<ListOpsRow>& rows) {
  Dataset dataset = empty_listops_dataset();
  dataset.examples.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string where = "listops_dataset: row " + std::to_string(i);
    check_label(rows[i].label, where);
    check_listops_expression(rows[i].source, where);
    Example example;
    example.tokens = tokenize_listops(rows[i].source, where);
    example.label = rows[i].label;
    dataset.examples.push_back(std::move(example));
  }
  return dataset;
}

Dataset read_listops_tsv(const std::string& path) {
  std::ifstream in = open_input(path, "read_listops_tsv");
  Dataset dataset = empty_listops_dataset();
  std::string line;
  int64_t line_no = 0;
  auto where = [&] { return "read_listops_tsv: " + file_line(path, line_no); };
  LSF_CHECK(read_line(in, line)) << "read_listops_tsv: '" << path
                                 << "' is empty (expected the header \"Source<TAB>Target\")";
  line_no = 1;
  LSF_CHECK(line == "Source\tTarget")
      << where() << ": missing header: expected \"Source<TAB>Target\", got \""
      << line.substr(0, 60) << "\"";
  while (read_line(in, line)) {
    ++line_no;
    const std::vector<std::string_view> fields = split_fields(line, '\t');
    LSF_CHECK(fields.size() == 2) << where() << ": expected 2 tab-separated columns (Source, Target), got "
                                  << fields.size();
    const std::string_view label = fields[1];
    LSF_CHECK(label.size() == 1 && label[0] >= '0' && label[0] <= '9')
        << where() << ": bad label '" << label << "' (expected an integer 0..9)";
    const std::string source(fields[0]);
    check_listops_expression(source, where());
    Example example;
    example.tokens = tokenize_listops(source, where());
    example.label = label[0] - '0';
    dataset.examples.push_back(std::move(example));
  }
  return dataset;
}

}  // namespace lsf::data
