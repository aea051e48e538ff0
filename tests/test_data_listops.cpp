// ListOps: the generator's distribution and format, checked by an evaluator written here from
// LRA's Python (to_string / to_value) and independent of the library; the TSV writer and reader
// and the fixed vocabulary, including malformed files.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "lsformer/data/listops.h"
#include "helpers.h"

using namespace lsf;
using namespace lsf::data;

namespace {

const std::string kFixtures = std::string(LSF_FIXTURE_DIR) + "/data";

// Throws (failing the test case) when the parsed text breaks LRA's grammar. A plain check
// rather than REQUIRE: the parser runs once per token of thousands of expressions.
void expect(bool ok) {
  if (!ok) throw std::runtime_error("malformed ListOps expression");
}

// ---- an independent reading of LRA's tuple tree -------------------------------------------
// LRA builds ((((op, c0), c1), ...), ']') and prints a tuple as "( a b )". The parser rebuilds
// that tuple tree, and evaluate() follows LRA's to_value: an operator applied to its first
// argument is an unsaturated function; each further pair appends an argument; ']' applies it.
struct Node {
  std::string_view atom;            // "7", "[MAX", "]" — empty for a pair
  std::unique_ptr<Node> left, right;
};

std::unique_ptr<Node> parse(const std::vector<std::string_view>& tokens, size_t& pos) {
  expect(pos < tokens.size());
  auto node = std::make_unique<Node>();
  if (tokens[pos] != "(") {
    expect(tokens[pos] != ")");
    node->atom = tokens[pos++];
    return node;
  }
  ++pos;
  node->left = parse(tokens, pos);
  node->right = parse(tokens, pos);
  expect(pos < tokens.size());
  expect(tokens[pos] == ")");
  ++pos;
  return node;
}

void print(const Node& n, std::string& out) {  // LRA's to_string, appended to `out`
  if (!n.atom.empty()) {
    out += n.atom;
    return;
  }
  out += "( ";
  print(*n.left, out);
  out += ' ';
  print(*n.right, out);
  out += " )";
}

struct Value {
  enum Kind { kNumber, kOperator, kPartial, kEnd } kind = kNumber;
  int number = 0;
  std::string op;
  std::vector<int> args;
};

int reduce(const std::string& op, std::vector<int> args) {
  if (op == "[MIN") return *std::min_element(args.begin(), args.end());
  if (op == "[MAX") return *std::max_element(args.begin(), args.end());
  if (op == "[SM") {
    int sum = 0;
    for (int a : args) sum += a;
    return sum % 10;
  }
  expect(op == "[MED");
  std::sort(args.begin(), args.end());  // np.median, then int() truncates toward zero
  const size_t n = args.size();
  const double median = n % 2 ? args[n / 2] : (args[n / 2 - 1] + args[n / 2]) / 2.0;
  return int(median);
}

Value evaluate(const Node& n) {
  Value v;
  if (!n.atom.empty()) {
    if (n.atom == "]") {
      v.kind = Value::kEnd;
    } else if (n.atom[0] == '[') {
      v.kind = Value::kOperator;
      v.op = std::string(n.atom);
    } else {
      expect(n.atom.size() == 1);
      v.number = n.atom[0] - '0';
    }
    return v;
  }
  Value l = evaluate(*n.left);
  const Value r = evaluate(*n.right);
  if (l.kind == Value::kOperator) {
    expect(r.kind == Value::kNumber);
    v.kind = Value::kPartial;
    v.op = l.op;
    v.args = {r.number};
  } else if (r.kind == Value::kEnd) {
    expect(l.kind == Value::kPartial);
    v.number = reduce(l.op, l.args);
  } else {
    expect(l.kind == Value::kPartial);
    expect(r.kind == Value::kNumber);
    v = std::move(l);
    v.args.push_back(r.number);
  }
  return v;
}

std::vector<std::string_view> split_spaces(const std::string& s) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(' ', pos);
    if (end == std::string::npos) end = s.size();
    if (end > pos) out.push_back(std::string_view(s).substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// Facts about one source string, all derived by the test's own parsing.
struct Facts {
  int label = 0;
  int64_t length = 0;       // tokens other than '(' and ')'
  int64_t operator_depth = 0;  // deepest nesting of operators (the root operator is 1)
  std::map<std::string, int64_t> operators;
  std::set<int64_t> arg_counts;
};

// Walks the tuple tree: a chain of pairs down the left spine is one operator application.
void collect(const Node& n, int64_t depth, Facts& f) {
  if (!n.atom.empty()) return;
  // Unwind ((((op, c0), c1), ...), ']') into op and its children.
  std::vector<const Node*> children;
  const Node* spine = n.left.get();
  while (spine->atom.empty()) {
    children.push_back(spine->right.get());
    spine = spine->left.get();
  }
  expect(spine->atom[0] == '[');
  expect(n.right->atom == "]");
  f.operators[std::string(spine->atom)]++;
  f.arg_counts.insert(int64_t(children.size()));
  f.operator_depth = std::max(f.operator_depth, depth);
  for (const Node* c : children) collect(*c, depth + 1, f);
}

Facts facts(const std::string& source) {
  const std::vector<std::string_view> tokens = split_spaces(source);
  size_t pos = 0;
  std::unique_ptr<Node> root;
  try {
    root = parse(tokens, pos);
    expect(pos == tokens.size());
  } catch (const std::runtime_error&) {
    FAIL("not a well-formed LRA expression: " << source.substr(0, 200));
  }
  std::string printed;
  print(*root, printed);
  CHECK(printed == source);  // the exact LRA to_string format, spaces included
  Facts f;
  const Value v = evaluate(*root);
  expect(v.kind == Value::kNumber);
  f.label = v.number;
  for (std::string_view t : tokens) f.length += (t != "(" && t != ")");
  collect(*root, 1, f);
  return f;
}

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("lsf_test_data_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  return dir.string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("listops: the generator follows LRA's distribution at the default bounds", "[data]") {
  ListOpsOptions options;  // max_depth 10, max_args 10, 500 < L < 2000
  options.seed = 11;
  const ListOpsSplits splits = generate_listops(2000, 300, 200, options);
  REQUIRE(splits.train.size() == 2000);
  REQUIRE(splits.val.size() == 300);
  REQUIRE(splits.test.size() == 200);

  std::set<std::string> sources;
  std::map<std::string, int64_t> operators;
  std::vector<int64_t> labels(10, 0);
  int64_t mismatched_labels = 0, out_of_bounds = 0, total = 0;
  int64_t deepest = 0;
  std::set<int64_t> arg_counts;
  for (const auto* split : {&splits.train, &splits.val, &splits.test}) {
    for (const ListOpsRow& row : *split) {
      ++total;
      sources.insert(row.source);
      const Facts f = facts(row.source);
      mismatched_labels += (f.label != row.label);
      out_of_bounds += !(f.length > 500 && f.length < 2000);
      REQUIRE(row.label >= 0);
      REQUIRE(row.label <= 9);
      labels[size_t(row.label)]++;
      for (const auto& [op, count] : f.operators) operators[op] += count;
      deepest = std::max(deepest, f.operator_depth);
      arg_counts.insert(f.arg_counts.begin(), f.arg_counts.end());
      // The tokenizer keeps exactly the L non-parenthesis tokens.
      REQUIRE(int64_t(tokenize_listops(row.source, "row").size()) == f.length);
    }
  }
  CHECK(mismatched_labels == 0);
  CHECK(out_of_bounds == 0);
  CHECK(int64_t(sources.size()) == total);  // no duplicates within or across splits
  // Depth starts at 1 and depth == max_depth forces a leaf: at most 9 nested operators.
  CHECK(deepest <= 9);
  // randint(2, max_args): every count from 2 to 10 occurs among the sample's many thousands of
  // operators, and no other.
  CHECK(arg_counts == std::set<int64_t>{2, 3, 4, 5, 6, 7, 8, 9, 10});
  for (int label = 0; label < 10; ++label) CHECK(labels[size_t(label)] > 0);

  // The operator of each node is uniform over 4 and independent of the tree's shape, so after
  // conditioning on the length each operator count is Binomial(N, 1/4). A 5σ band
  // (σ = sqrt(N·p·(1−p))) fails a correct generator with probability < 1e-6 per operator.
  int64_t n_ops = 0;
  for (const auto& [op, count] : operators) n_ops += count;
  REQUIRE(operators.size() == 4);
  const double sigma = std::sqrt(n_ops * 0.25 * 0.75);
  for (const char* op : {"[MIN", "[MAX", "[MED", "[SM"}) {
    INFO(op << ": " << operators[op] << " of " << n_ops);
    CHECK(std::abs(double(operators[op]) - 0.25 * double(n_ops)) <= 5.0 * sigma);
  }
}

TEST_CASE("listops: small bounds, determinism by seed, and different seeds", "[data]") {
  ListOpsOptions options;
  options.min_length = 10;
  options.max_length = 100;
  options.seed = 3;
  const ListOpsSplits a = generate_listops(500, 50, 50, options);
  const ListOpsSplits b = generate_listops(500, 50, 50, options);
  options.seed = 4;
  const ListOpsSplits c = generate_listops(500, 50, 50, options);
  int64_t same_as_other_seed = 0;
  for (size_t i = 0; i < a.train.size(); ++i) {
    REQUIRE(a.train[i].source == b.train[i].source);
    REQUIRE(a.train[i].label == b.train[i].label);
    same_as_other_seed += a.train[i].source == c.train[i].source;
    const Facts f = facts(a.train[i].source);
    REQUIRE(f.label == a.train[i].label);
    REQUIRE(f.length > 10);
    REQUIRE(f.length < 100);
  }
  CHECK(same_as_other_seed < 10);  // distinct streams: coincidences only among tiny trees
  CHECK(a.test.back().source == b.test.back().source);
}

TEST_CASE("listops: the strict bounds admit the extreme lengths and nothing beyond", "[data]") {
  // Bounds 3 < L < 6: L = 1 + Σ(args + 1) over operators, so only one operator with 2 arguments
  // (L = 4) or 3 arguments (L = 5) fits.
  ListOpsOptions options;
  options.min_length = 3;
  options.max_length = 6;
  options.seed = 5;
  const ListOpsSplits s = generate_listops(200, 0, 0, options);
  std::set<int64_t> lengths;
  for (const ListOpsRow& row : s.train) lengths.insert(facts(row.source).length);
  CHECK(lengths == std::set<int64_t>{4, 5});
}

TEST_CASE("listops: impossible options fail with a clear error instead of hanging", "[data]") {
  ListOpsOptions options;
  options.min_length = 10;
  options.max_length = 11;  // no integer strictly between
  CHECK_THROWS_WITH(generate_listops(1, 0, 0, options),
                    Catch::Contains("min_length < L < max_length") && Catch::Contains("10"));
  options = {};
  options.max_depth = 2;
  options.max_args = 3;  // longest tree: 2 + 3 leaves = 5 tokens
  CHECK_THROWS_WITH(generate_listops(1, 0, 0, options),
                    Catch::Contains("at most 5 tokens") && Catch::Contains("min_length 500"));
  options = {};
  options.min_length = 0;
  options.max_length = 2;  // only the ten single digits exist
  CHECK_THROWS_WITH(generate_listops(8, 2, 1, options),
                    Catch::Contains("gave up") && Catch::Contains("found 10 of 11"));
  options = {};
  CHECK_THROWS_WITH(generate_listops(-1, 0, 0, options), Catch::Contains("split sizes"));
  options.max_args = 1;
  CHECK_THROWS_WITH(generate_listops(1, 0, 0, options), Catch::Contains("max_args"));
  options = {};
  options.max_depth = 0;
  CHECK_THROWS_WITH(generate_listops(1, 0, 0, options), Catch::Contains("max_depth"));
  CHECK(generate_listops(0, 0, 0, ListOpsOptions{}).train.empty());
  // max_args 1e6 under max_length 60: only 1 root operator in ~70,000 has few enough arguments,
  // ~1.6e9 draws for the quickstart's 22,000 rows (issue #15: this ran for hours); refused at once.
  options = {};
  options.min_length = 10;
  options.max_length = 60;
  options.max_depth = 5;
  options.max_args = 1000000;
  CHECK_THROWS_WITH(generate_listops(20000, 1000, 1000, options),
                    Catch::Contains("so 22000 examples need at least") && Catch::Contains("lower max_args"));
  // max_args 1000 passes that bound but keeps ~1 draw in 10,000: refused once 2 × max_attempts
  // draws have kept fewer than 1 in 1000.
  options.max_args = 1000;
  options.max_attempts = 10000;
  CHECK_THROWS_WITH(generate_listops(2000, 0, 0, options),
                    Catch::Contains("of 20001 draws gave a new expression") && Catch::Contains("fewer than 1 in 1000"));
}

TEST_CASE("listops: fixed vocabulary and in-memory dataset", "[data]") {
  // LRA's own example: ( and ) dropped, ] kept as the closing token.
  CHECK(tokenize_listops("( ( ( ( [MAX 1 ) 7 ) 2 ) ] )", "x") ==
        std::vector<int32_t>{12, 2, 8, 3, 15});
  CHECK(tokenize_listops("[MIN 0 9 X [MED [SM", "x") ==
        std::vector<int32_t>{11, 1, 10, 15, 13, 14});
  CHECK_THROWS_WITH(tokenize_listops("( [MAX 1 ) [FIRST ] )", "somewhere:3"),
                    Catch::Contains("somewhere:3") && Catch::Contains("[FIRST"));
  const Dataset d = listops_dataset({{"( ( ( [SM 3 ) 4 ) ] )", 7}, {"5", 5}});
  CHECK(d.name == "listops");
  CHECK(d.vocab_size == 16);
  CHECK(d.num_classes == 10);
  CHECK_FALSE(d.paired);
  REQUIRE(d.examples.size() == 2);
  CHECK(d.examples[0].tokens == std::vector<int32_t>{14, 4, 5, 15});
  CHECK(d.examples[0].label == 7);
  CHECK(d.examples[1].tokens == std::vector<int32_t>{6});
  CHECK_THROWS_WITH(listops_dataset({{"5", 5}, {"( ( ( [SM 3 ) 4 ) ] )", 12}}),
                    Catch::Contains("row 1") && Catch::Contains("label 12"));
}

TEST_CASE("listops: TSV files round-trip through the writer and the reader", "[data]") {
  ListOpsOptions options;
  options.min_length = 20;
  options.max_length = 60;
  options.seed = 9;
  const ListOpsSplits splits = generate_listops(30, 5, 4, options);
  const std::string dir = temp_dir("listops") + "/nested/out";  // created on demand
  write_listops_dataset(dir, splits);
  const std::string train_path = dir + "/basic_train.tsv";
  const std::string content = slurp(train_path);
  // Python's csv.writer(delimiter='\t'): header row, "\r\n" line ends.
  CHECK(content.rfind("Source\tTarget\r\n" + splits.train[0].source + "\t" +
                          std::to_string(splits.train[0].label) + "\r\n", 0) == 0);
  CHECK_FALSE(std::filesystem::exists(train_path + ".tmp"));
  for (const auto& [name, rows] : {std::pair{"train", &splits.train}, {"val", &splits.val},
                                   {"test", &splits.test}}) {
    const Dataset read = read_listops_tsv(dir + "/basic_" + name + ".tsv");
    const Dataset direct = listops_dataset(*rows);
    REQUIRE(read.examples.size() == rows->size());
    for (size_t i = 0; i < rows->size(); ++i) {
      CHECK(read.examples[i].tokens == direct.examples[i].tokens);
      CHECK(read.examples[i].label == (*rows)[i].label);
    }
  }
  // A bad row is refused before anything is written.
  CHECK_THROWS_WITH(write_listops_tsv(dir + "/bad.tsv", {{"5", 5}, {"7", 10}}),
                    Catch::Contains("row 1") && Catch::Contains("label 10"));
  CHECK_FALSE(std::filesystem::exists(dir + "/bad.tsv"));
  CHECK_FALSE(std::filesystem::exists(dir + "/bad.tsv.tmp"));
  // A directory that cannot be created (its parent is a regular file) names the directory.
  CHECK_THROWS_WITH(write_listops_dataset(train_path + "/sub", splits),
                    Catch::Contains("cannot create directory") && Catch::Contains(train_path));
  std::filesystem::remove_all(temp_dir("listops"));
}

TEST_CASE("listops: reading the TSV fixtures and their malformed variants", "[data]") {
  const Dataset d = read_listops_tsv(kFixtures + "/listops_ok.tsv");
  REQUIRE(d.examples.size() == 3);
  CHECK(d.examples[0].tokens == std::vector<int32_t>{12, 2, 8, 3, 15});
  CHECK(d.examples[0].label == 7);
  CHECK(d.examples[2].label == 2);  // [MED 1 2 3 4] = int(2.5)
  const std::vector<std::tuple<std::string, std::string, std::string>> bad = {
      {"listops_bad_columns.tsv", ":3:", "expected 2 tab-separated columns"},
      {"listops_bad_label.tsv", ":2:", "bad label 'ten'"},
      {"listops_bad_token.tsv", ":4:", "unknown ListOps token '[FIRST'"},
      {"listops_no_header.tsv", ":1:", "missing header"},
  };
  for (const auto& [file, line, what] : bad) {
    INFO(file);
    CHECK_THROWS_WITH(read_listops_tsv(kFixtures + "/" + file),
                      Catch::Contains(file + line) && Catch::Contains(what));
  }
  CHECK_THROWS_WITH(read_listops_tsv(kFixtures + "/no_such_file.tsv"),
                    Catch::Contains("no_such_file.tsv") && Catch::Contains("does not exist"));
}
