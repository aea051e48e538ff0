// nn::Embedding: the table parameter and the call into lsf::embedding.
#include "lsformer/models/nn/embedding.h"

#include <sstream>

#include "lsformer/engine/autograd.h"
#include "lsformer/engine/profiler.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/ops/embedding.h"

namespace lsf::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx)
    : Layer("Embedding"), num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  LSF_CHECK(num_embeddings >= 0 && embedding_dim >= 0)
      << "Embedding: sizes must be non-negative, got num_embeddings=" << num_embeddings
      << ", embedding_dim=" << embedding_dim;
  if (padding_idx) {
    LSF_CHECK(*padding_idx >= -num_embeddings && *padding_idx < num_embeddings)
        << "Embedding: padding_idx " << *padding_idx << " must be within num_embeddings=" << num_embeddings;
    padding_idx_ = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
  }
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

void Embedding::reset_parameters(Generator* generator) {
  init::normal_(weight, 0.0, 1.0, generator);
  if (padding_idx_) {
    NoGradGuard no_grad;
    weight.select(0, *padding_idx_).zero_();
  }
}

Tensor Embedding::forward(const Tensor& ids) {
  ::lsf::nn::ModuleScope call_site(*this);
  profiler::PhaseScope phase("embedding");
  return embedding(weight, ids, padding_idx_);
}

std::string Embedding::extra_repr() const {
  std::ostringstream os;
  os << num_embeddings_ << ", " << embedding_dim_;
  if (padding_idx_) os << ", padding_idx=" << *padding_idx_;
  return os.str();
}

}  // namespace lsf::nn
