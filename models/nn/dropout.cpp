// nn::Dropout: lsf::dropout gated by the module's training flag.
#include "lsformer/models/nn/dropout.h"

#include <sstream>

#include "lsformer/ops/dropout.h"

namespace lsf::nn {

Dropout::Dropout(double p, Generator* generator) : Layer("Dropout"), p_(p), generator_(generator) {
  LSF_CHECK(p >= 0.0 && p <= 1.0) << "Dropout: p must be in [0, 1], got " << p;
}

Tensor Dropout::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  return dropout(x, p_, is_training(), generator_);
}

std::string Dropout::extra_repr() const {
  std::ostringstream os;
  os << "p=" << p_;
  return os.str();
}

}  // namespace lsf::nn
