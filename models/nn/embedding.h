// nn::Embedding: a lookup table [num_embeddings, embedding_dim] indexed by integer ids, as
// torch.nn.Embedding. ids [*] (i32/i64) → [*, embedding_dim].
//
// Parameter: weight [num_embeddings, embedding_dim], initialised N(0, 1) with the padding_idx
// row zeroed (PyTorch's default). The padding row receives no gradient. padding_idx may be
// negative (counted from the end) and is stored normalised to [0, num_embeddings).
#pragma once

#include <optional>
#include <string>

#include "lsformer/models/nn/layer.h"

namespace lsf::nn {

class Embedding : public Layer {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& ids) override;
  std::string extra_repr() const override;
  void reset_parameters(Generator* generator = nullptr);  // N(0, 1), padding row zero

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  std::optional<int64_t> padding_idx() const { return padding_idx_; }

  Tensor weight;  // [num_embeddings, embedding_dim]

 private:
  int64_t num_embeddings_, embedding_dim_;
  std::optional<int64_t> padding_idx_;
};

}  // namespace lsf::nn
