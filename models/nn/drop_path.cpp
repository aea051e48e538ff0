// nn::DropPath: lsf::drop_path gated by the module's training flag.
#include "lsformer/models/nn/drop_path.h"

#include <sstream>

#include "lsformer/ops/drop_path.h"

namespace lsf::nn {

DropPath::DropPath(double p, Generator* generator) : Layer("DropPath"), p_(p), generator_(generator) {
  LSF_CHECK(p >= 0.0 && p <= 1.0) << "DropPath: p must be in [0, 1], got " << p;
}

Tensor DropPath::forward(const Tensor& x) {
  ::lsf::nn::ModuleScope call_site(*this);
  return drop_path(x, p_, is_training(), generator_);
}

std::string DropPath::extra_repr() const {
  std::ostringstream os;
  os << "drop_prob=" << p_;
  return os.str();
}

}  // namespace lsf::nn
