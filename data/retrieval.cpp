// AAN retrieval reader: the 5-column no-header TSV of LRA (data/retrieval.h).
#include "lsformer/data/retrieval.h"

#include <algorithm>
#include <cstdlib>

#include "lsformer/data/file_util.h"
#include "lsformer/data/text.h"
#include "lsformer/engine/error.h"

namespace lsf::data {

Dataset read_retrieval_tsv(const std::string& path, int64_t max_length) {
  LSF_CHECK(max_length >= 1) << "read_retrieval_tsv: max_length must be ≥ 1, got " << max_length;
  std::ifstream in = open_input(path, "read_retrieval_tsv");
  Dataset dataset;
  dataset.name = "retrieval";
  dataset.vocab_size = kByteVocabSize;
  dataset.num_classes = 2;
  dataset.paired = true;
  const int64_t keep = std::min(kRetrievalTextBytes, max_length);
  std::string line;
  int64_t line_no = 0;
  while (read_line(in, line)) {
    ++line_no;
    const std::vector<std::string_view> fields = split_fields(line, '\t');
    LSF_CHECK(fields.size() == 5)
        << "read_retrieval_tsv: " << file_line(path, line_no)
        << ": expected 5 tab-separated columns (label, id1, id2, text1, text2), got " << fields.size();
    // LRA parses the label as a float (tf.io.decode_csv with a float default): "1", "1.0" and
    // "1e0" are all 1; anything that is not exactly 0 or 1 is an error here.
    const std::string label_text(fields[0]);
    char* end = nullptr;
    const double label = label_text.empty() ? -1.0 : std::strtod(label_text.c_str(), &end);
    LSF_CHECK(!label_text.empty() && end == label_text.c_str() + label_text.size() &&
              (label == 0.0 || label == 1.0))
        << "read_retrieval_tsv: " << file_line(path, line_no) << ": bad label '" << label_text
        << "' (expected 0 or 1)";
    LSF_CHECK(!fields[3].empty() && !fields[4].empty())
        << "read_retrieval_tsv: " << file_line(path, line_no) << ": empty text"
        << (fields[3].empty() ? "1" : "2");
    Example example;
    example.tokens = encode_bytes(fields[3], keep);
    example.tokens2 = encode_bytes(fields[4], keep);
    example.label = int32_t(label);
    dataset.examples.push_back(std::move(example));
  }
  return dataset;
}

}  // namespace lsf::data
