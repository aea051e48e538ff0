// cat, stack, split and constant pad: argument checks, copies through copy_kernel, backward.
//
// None of these needs a kernel of its own: cat and pad copy each input into a narrow()ed view
// of a fresh output with the engine's strided copy_kernel (a memcpy when both sides are
// contiguous, e.g. cat along dim 0), and split's pieces are narrow()s of x, with one backward
// node for all of them.
#include "lsformer/ops/shape.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "lsformer/engine/autograd.h"
#include "lsformer/engine/core_kernels.h"

namespace lsf {
namespace {

using autograd::NeedsGrad;

// Every tensor defined, all of the first one's dtype and device; the list non-empty.
void check_list(const char* op, const TensorList& tensors) {
  LSF_CHECK(!tensors.empty()) << op << ": expected a non-empty list of tensors";
  for (size_t i = 0; i < tensors.size(); ++i)
    LSF_CHECK(tensors[i].defined()) << op << ": tensor " << i << " of the list is undefined";
  const Tensor& first = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    LSF_CHECK(t.dtype() == first.dtype())
        << op << ": tensor " << i << " (shape " << t.shape() << ") has dtype " << t.dtype()
        << " but tensor 0 (shape " << first.shape() << ") has " << first.dtype()
        << "; convert with to(dtype) first";
    LSF_CHECK(t.device() == first.device())
        << op << ": tensor " << i << " (shape " << t.shape() << ") is on " << t.device()
        << " but tensor 0 (shape " << first.shape() << ") is on " << first.device()
        << "; move them with to(device) first";
  }
}

// Views of x's pieces of `sizes` along d, recorded as the outputs of one node: its backward
// writes every piece's gradient into one x-sized buffer. Pieces recorded as separate narrow()s
// would each scatter into a zero-filled x-sized gradient of its own, which autograd then adds up
// (a qkv projection split three ways: three fills, three scatters and two adds of three times
// each piece's size, instead of one pass).
TensorList split_views(const Tensor& x, int64_t d, const std::vector<int64_t>& sizes) {
  TensorList pieces;
  pieces.reserve(sizes.size());
  {
    NoGradGuard no_grad;
    int64_t at = 0;
    for (int64_t s : sizes) {
      pieces.push_back(x.narrow(d, at, s));
      at += s;
    }
  }
  if (!autograd::any_requires_grad({&x})) return pieces;
  const Shape shape = x.shape();
  autograd::record("split", {x}, pieces, [shape, d, sizes](const TensorList& g, const NeedsGrad&) -> TensorList {
    Tensor dx = empty(shape, g[0].options());  // every element is some piece's
    NoGradGuard no_grad;
    int64_t at = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] > 0 && g[i].numel() > 0) copy_kernel(dx.device(), dx.narrow(d, at, sizes[i]), g[i]);
      at += sizes[i];
    }
    return {dx};
  });
  return pieces;
}

}  // namespace

Tensor cat(const TensorList& tensors, int64_t dim) {
  check_list("cat", tensors);
  const Tensor& first = tensors[0];
  const int64_t rank = first.dim();
  LSF_CHECK(rank > 0) << "cat: tensor 0 is 0-d and cannot be concatenated; unsqueeze it first";
  const int64_t d = wrap_dim(dim, rank, "cat");
  Shape out_shape = first.shape();
  out_shape[d] = 0;
  std::vector<int64_t> sizes;  // each input's extent along d
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Shape& s = tensors[i].shape();
    LSF_CHECK(int64_t(s.size()) == rank)
        << "cat: tensor " << i << " has shape " << s << " but tensor 0 has shape " << first.shape()
        << "; all tensors need the same number of dimensions";
    for (int64_t k = 0; k < rank; ++k)
      LSF_CHECK(k == d || s[k] == first.shape()[k])
          << "cat: shapes must match except in dimension " << d << ", but tensor " << i
          << " has shape " << s << " and tensor 0 has shape " << first.shape() << " (dimension "
          << k << ")";
    sizes.push_back(s[d]);
    out_shape[d] += s[d];
  }

  Tensor out = empty(out_shape, first.options());
  {
    NoGradGuard no_grad;  // the narrow()s are plumbing, not part of the graph
    int64_t at = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (sizes[i] > 0 && tensors[i].numel() > 0)
        copy_kernel(out.device(), out.narrow(d, at, sizes[i]), tensors[i]);
      at += sizes[i];
    }
  }

  autograd::record("cat", tensors, {out}, [d, sizes](const TensorList& g, const NeedsGrad& needs) -> TensorList {
    // dout [.., sum(sizes), ..] → dx_i = its slab along d, a view (strided for any d but the
    // first non-trivial one): as for a permute's gradient, the ops that need contiguous
    // gradients make them so, and a gradient sum adds the slab into the other contribution
    // rather than copying it (engine/autograd.cpp). Copying every slab here cost the long-short
    // layer two activation-sized copies per call for the slices of its [K | V] stack.
    TensorList dx(sizes.size());
    int64_t at = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (needs[i]) dx[i] = g[0].narrow(d, at, sizes[i]);
      at += sizes[i];
    }
    return dx;
  });
  return out;
}

Tensor stack(const TensorList& tensors, int64_t dim) {
  check_list("stack", tensors);
  const Shape& shape = tensors[0].shape();
  for (size_t i = 1; i < tensors.size(); ++i)
    LSF_CHECK(tensors[i].shape() == shape)
        << "stack: expects tensors of equal shape, but tensor 0 has shape " << shape
        << " and tensor " << i << " has shape " << tensors[i].shape();
  const int64_t d = wrap_dim(dim, int64_t(shape.size()) + 1, "stack");
  TensorList unsqueezed;
  unsqueezed.reserve(tensors.size());
  for (const Tensor& t : tensors) unsqueezed.push_back(t.unsqueeze(d));
  return cat(unsqueezed, d);
}

TensorList split(const Tensor& x, int64_t split_size, int64_t dim) {
  check_defined("split", {&x});
  LSF_CHECK(x.dim() > 0) << "split: cannot split a 0-d tensor";
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  const int64_t size = x.shape()[d];
  LSF_CHECK(split_size >= 0) << "split: split_size must be non-negative, got " << split_size
                             << " (shape " << x.shape() << ")";
  LSF_CHECK(split_size > 0 || size == 0)
      << "split: split_size can be 0 only if dimension " << d << " has size 0, but shape is "
      << x.shape();
  // An empty dimension still yields one (empty) piece, as in PyTorch.
  const int64_t pieces = size == 0 ? 1 : (size + split_size - 1) / split_size;
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < pieces; ++i) sizes.push_back(std::min(split_size, size - i * split_size));
  return split_views(x, d, sizes);
}

TensorList split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  check_defined("split", {&x});
  LSF_CHECK(x.dim() > 0) << "split: cannot split a 0-d tensor";
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    LSF_CHECK(s >= 0) << "split: sizes " << sizes << " contain a negative size (shape " << x.shape() << ")";
    total += s;
  }
  LSF_CHECK(total == x.shape()[d])
      << "split: sizes " << sizes << " sum to " << total << " but dimension " << d
      << " of shape " << x.shape() << " has size " << x.shape()[d];
  return split_views(x, d, sizes);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& padding, double value) {
  check_defined("pad", {&x});
  LSF_CHECK(padding.size() % 2 == 0)
      << "pad: padding " << padding << " has an odd number of values; expected pairs "
      << "{left, right}, last dimension first (input shape " << x.shape() << ")";
  const int64_t pairs = int64_t(padding.size()) / 2;
  LSF_CHECK(pairs <= x.dim()) << "pad: padding " << padding << " has " << pairs
                              << " pairs but the input of shape " << x.shape() << " has only "
                              << x.dim() << " dimensions";
  LSF_CHECK(is_floating(x.dtype()) || std::nearbyint(value) == value)
      << "pad: value " << value << " is not representable in a " << x.dtype() << " tensor (shape "
      << x.shape() << ")";

  // Per padded dim: where the kept input elements start in x and in the output, and how many.
  struct Region {
    int64_t dim, x_start, out_start, length;
  };
  std::vector<Region> regions;
  Shape out_shape = x.shape();
  bool grows = false;  // any positive amount: the border needs `value`
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t d = x.dim() - 1 - i, size = x.shape()[d];
    const int64_t left = padding[2 * i], right = padding[2 * i + 1];
    const int64_t new_size = size + left + right;
    const int64_t kept = size - std::max<int64_t>(-left, 0) - std::max<int64_t>(-right, 0);
    LSF_CHECK(new_size >= 0) << "pad: padding (" << left << ", " << right << ") of dimension " << d
                             << " (size " << size << ") gives a negative output size " << new_size
                             << " (input shape " << x.shape() << ", padding " << padding << ")";
    LSF_CHECK(kept >= 0) << "pad: padding (" << left << ", " << right << ") of dimension " << d
                         << " crops more than its size " << size << " (input shape " << x.shape()
                         << ", padding " << padding << ")";
    out_shape[d] = new_size;
    grows = grows || left > 0 || right > 0;
    regions.push_back({d, std::max<int64_t>(-left, 0), std::max<int64_t>(left, 0), kept});
  }

  Tensor out = empty(out_shape, x.options());
  if (grows) fill_kernel(out.device(), out, value);
  {
    NoGradGuard no_grad;  // the narrow()s are plumbing, not part of the graph
    Tensor src = x, dst = out;
    for (const Region& r : regions) {
      src = src.narrow(r.dim, r.x_start, r.length);
      dst = dst.narrow(r.dim, r.out_start, r.length);
    }
    if (src.numel() > 0) copy_kernel(out.device(), dst, src);
  }

  std::vector<int64_t> negated(padding.size());
  for (size_t i = 0; i < padding.size(); ++i) negated[i] = -padding[i];
  autograd::record("pad", {x}, {out}, [negated](const TensorList& g, const NeedsGrad&) -> TensorList {
    // dout [out_shape] → dx [x.shape]: undo the padding (crop the border, zero-fill what the
    // forward cropped away).
    return {pad(g[0], negated, 0.0)};
  });
  return out;
}

}  // namespace lsf
