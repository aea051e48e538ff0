// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ (PyTorch 1.13).
//
// The norm is taken over every defined .grad as if they were one vector (Σ|g|^p accumulated in
// double; p = inf: max |g|). When max_norm / (norm + 1e-6) < 1 every gradient is multiplied by
// that coefficient in place; so, exactly as PyTorch, a norm within 1e-6 below max_norm is
// scaled too (by a factor just under 1). Parameters without a gradient are ignored; with none
// at all the norm is 0.
//
// A non-finite norm (an inf or NaN gradient, e.g. an fp16 overflow) is handled by `non_finite`:
//   Error   throw an lsf::Error naming the norm (the default)
//   Skip    leave the gradients untouched and return finite = false: the caller skips the step
//   Ignore  do what PyTorch does by default: scale by the non-finite coefficient (gradients
//           become NaN, or 0 where finite for an infinite norm)
#pragma once

#include <limits>

#include "lsformer/engine/safetensors.h"
#include "lsformer/engine/tensor.h"

namespace lsf::optim {

enum class NonFinite { Error, Skip, Ignore };

struct ClipResult {
  double norm = 0.0;     // total norm before clipping
  bool finite = true;    // norm is finite
  bool clipped = false;  // the gradients were scaled
};

inline constexpr double kInfNorm = std::numeric_limits<double>::infinity();

ClipResult clip_grad_norm_(const TensorList& parameters, double max_norm, double norm_type = 2.0,
                           NonFinite non_finite = NonFinite::Error);
ClipResult clip_grad_norm_(const NamedTensors& parameters, double max_norm, double norm_type = 2.0,
                           NonFinite non_finite = NonFinite::Error);

// The total gradient norm alone (for logging), without clipping.
double grad_norm(const TensorList& parameters, double norm_type = 2.0);

}  // namespace lsf::optim
