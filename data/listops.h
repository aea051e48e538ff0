// ListOps (LRA): a C++ port of the generator in lra_benchmarks/data/listops.py, LRA's TSV files,
// and the fixed-vocabulary tokenizer. Spec: docs/data-formats.md §1.4.1.
//
// An expression is a tree. Each operator node holds 2..max_args children; a leaf is a digit.
//   MIN, MAX   min / max of the arguments
//   MED        int(np.median(args)): an even count averages the two middle values, then
//              truncates toward zero (all values are ≥ 0, so this is floor((a + b) / 2))
//   SM         sum of the arguments mod 10
// Source text nests every argument in its own parenthesis pair, exactly as LRA's to_string:
//   [MAX 1 7 2]  →  "( ( ( ( [MAX 1 ) 7 ) 2 ) ] )"
// Length L = number of tokens once '(' and ')' are dropped = leaves + 2 · operators.
//
// Fixed vocabulary (LRA's own TokenTextEncoder order comes from a Python set and is not
// reproducible, so we fix one): 0 pad, digits 0..9 → 1..10, [MIN 11, [MAX 12, [MED 13, [SM 14,
// ']' (LRA renames it 'X') 15; vocab_size 16. '(' and ')' are dropped, as LRA's pipeline does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lsformer/data/dataset.h"

namespace lsf::data {

struct ListOpsOptions {
  int64_t max_depth = 10, max_args = 10;
  int64_t min_length = 500, max_length = 2000;   // strict: min_length < L < max_length
  uint64_t seed = 0;
  // Give up (with an error) after this many consecutive draws that yield no new example — too
  // long, too short or a duplicate — so impossible bounds or counts fail instead of hanging.
  int64_t max_attempts = 1000000;
};

struct ListOpsRow {
  std::string source;  // LRA source text, e.g. "( ( [SM 3 ) 4 ) ] )"
  int32_t label = 0;   // value of the expression, 0..9
};

struct ListOpsSplits {
  std::vector<ListOpsRow> train, val, test;
};

constexpr int64_t kListOpsVocabSize = 16;
constexpr int64_t kListOpsClasses = 10;

// Draws distinct expressions with min_length < L < max_length until train + val + test are
// found; the first `train` go to train, the next `val` to val, the rest to test (no duplicates
// across splits). Deterministic in options.seed.
ListOpsSplits generate_listops(int64_t train, int64_t val, int64_t test, const ListOpsOptions& options);

// LRA's TSV: header "Source\tTarget", then "source\tlabel" rows, "\r\n" line ends (Python's
// csv.writer). Written to a temporary file and renamed, so a reader never sees half a file.
void write_listops_tsv(const std::string& path, const std::vector<ListOpsRow>& rows);
// Creates `dir` if needed and writes basic_train.tsv, basic_val.tsv and basic_test.tsv.
void write_listops_dataset(const std::string& dir, const ListOpsSplits& splits);

// Token ids of one source string (parentheses dropped). Throws naming the unknown token; the
// message starts with `where` (e.g. "file.tsv:12").
std::vector<int32_t> tokenize_listops(const std::string& source, const std::string& where);

// Checks that `source` is exactly one well-formed expression: every '(' closed by a ')', every
// operator closed by a ']' (or 'X') after at least one argument, no ']' without an operator,
// one top-level value. Throws starting with `where`, naming the token that breaks it (so
// "] ] ] ) ) )", "( ( [MAX 1 2" and "1 2 3" are errors, not rows of garbage tokens).
void check_listops_expression(const std::string& source, const std::string& where);

// Both check every row with check_listops_expression, then tokenise it (fixed vocabulary).
Dataset listops_dataset(const std::vector<ListOpsRow>& rows);      // in memory
Dataset read_listops_tsv(const std::string& path);                 // errors name file and line

}  // namespace lsf::data
