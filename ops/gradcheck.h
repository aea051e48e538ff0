// Finite-difference gradient checking, as torch.autograd.gradcheck does it.
//
// Every input that requires grad (it must be f64) is perturbed by ±eps; the central difference
// gives the numerical Jacobian, and one backward pass per output element gives the analytic
// one; each entry must satisfy |analytic − numerical| ≤ atol + rtol·|numerical|. When the full
// Jacobian would have more than max_jacobian_entries entries, the check instead compares
// random projections uᵀ J v for unit vectors u and v.
#pragma once

#include <functional>
#include <string>

#include "lsformer/engine/tensor.h"

namespace lsf::testing {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  int64_t max_jacobian_entries = 1 << 15;
  int projections = 8;
  uint64_t seed = 1234;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // what mismatched, where, and by how much
  explicit operator bool() const { return ok; }
};

using MultiFn = std::function<TensorList(const TensorList&)>;
using SingleFn = std::function<Tensor(const TensorList&)>;

GradcheckResult gradcheck(const MultiFn& fn, const TensorList& inputs, const GradcheckOptions& options = {});
GradcheckResult gradcheck(const SingleFn& fn, const TensorList& inputs, const GradcheckOptions& options = {});

}  // namespace lsf::testing
