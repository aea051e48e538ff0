// pack_sequences / unpack_sequences: the layout from a mask, argument checks, the backward
// nodes (each op's gradient is the other op) and the kernel calls (see ops/pack.h).
#include "lsformer/ops/pack.h"
#include "lsformer/ops/kernels/pack.h"

#include <vector>

#include "lsformer/engine/autograd.h"
#include "lsformer/ops/factory.h"

namespace lsf {

LSF_DEFINE_KERNEL(repack_rows_kernel,
                  void(const Tensor& packed, const Tensor& padded, const Tensor& index, bool to_padded, double fill));

PackedSequences packed_sequences(const Tensor& mask) {
  check_defined("packed_sequences", {&mask});
  LSF_CHECK(mask.dtype() == kBool && mask.dim() == 2)
      << "packed_sequences: mask must be a bool tensor [B, n] (true for real tokens), got " << mask.dtype()
      << " of shape " << mask.shape();
  PackedSequences p;
  p.batch = mask.size(0);
  p.length = mask.size(1);
  p.mask = mask;
  const Tensor host = mask.to(kCPU).to(kU8).contiguous();
  const uint8_t* m = host.data_ptr<uint8_t>();
  const int64_t cells = p.batch * p.length;
  std::vector<int64_t> rows, slots(size_t(cells), -1), positions;
  for (int64_t i = 0; i < cells; ++i) {
    if (m[i] == 0) continue;
    slots[size_t(i)] = int64_t(rows.size());
    rows.push_back(i);
    positions.push_back(i % p.length);
  }
  p.total = int64_t(rows.size());
  const TensorOptions index_options = TensorOptions(kI64).device(mask.device());
  p.rows = tensor(rows, {p.total}).to(index_options.device());
  p.slots = tensor(slots, {cells}).to(index_options.device());
  p.positions = tensor(positions, {p.total}).to(index_options.device());
  return p;
}

namespace {

void check_layout(const char* op, const Tensor& x, const PackedSequences& p) {
  check_defined(op, {&x, &p.rows, &p.slots});
  LSF_CHECK(x.device() == p.rows.device())
      << op << ": x is on " << x.device() << " but the packed layout is on " << p.rows.device();
  LSF_CHECK(is_floating(x.dtype())) << op << ": x must be floating-point, got " << x.dtype();
}

}  // namespace

Tensor pack_sequences(const Tensor& x, const PackedSequences& p, int64_t heads) {
  check_layout("pack_sequences", x, p);
  LSF_CHECK(heads >= 0) << "pack_sequences: heads must be ≥ 0, got " << heads;
  Tensor padded;  // x as [B, H, n, e]
  int64_t H = 1, e = 0;
  if (heads == 0) {
    LSF_CHECK(x.dim() == 3 && x.size(0) == p.batch && x.size(1) == p.length)
        << "pack_sequences: x must be [B, n, F] with B, n = " << p.batch << ", " << p.length << " (the mask's), got "
        << x.shape();
    e = x.size(2);
    NoGradGuard no_grad;
    padded = x.contiguous().view({p.batch, 1, p.length, e});
  } else {
    LSF_CHECK(x.dim() == 4 && x.size(0) == p.batch && x.size(1) == heads && x.size(2) == p.length)
        << "pack_sequences: x must be [B, heads, n, e] with B, heads, n = " << p.batch << ", " << heads << ", "
        << p.length << ", got " << x.shape();
    H = heads;
    e = x.size(3);
    NoGradGuard no_grad;
    padded = x.contiguous();
  }
  Tensor out = empty({p.total, H * e}, x.options());
  repack_rows_kernel(x.device(), out, padded, p.rows, /*to_padded=*/false, 0.0);
  if (autograd::any_requires_grad({&x})) {
    autograd::record("pack_sequences", {x}, {out}, [p, heads](const TensorList& g, const autograd::NeedsGrad&) {
      return TensorList{unpack_sequences(g[0], p, heads, 0.0)};
    });
  }
  return out;
}

Tensor unpack_sequences(const Tensor& x, const PackedSequences& p, int64_t heads, double fill) {
  check_layout("unpack_sequences", x, p);
  LSF_CHECK(heads >= 0) << "unpack_sequences: heads must be ≥ 0, got " << heads;
  LSF_CHECK(x.dim() == 2 && x.size(0) == p.total)
      << "unpack_sequences: x must be [T, F] with T = " << p.total << " (the mask's real tokens), got " << x.shape();
  const int64_t F = x.size(1), H = heads == 0 ? 1 : heads;
  LSF_CHECK(F % H == 0) << "unpack_sequences: the width F = " << F << " of x " << x.shape()
                        << " does not split into heads = " << heads;
  const int64_t e = F / H;
  Tensor padded = empty({p.batch, H, p.length, e}, x.options());
  Tensor packed;
  {
    NoGradGuard no_grad;
    packed = x.contiguous();
  }
  repack_rows_kernel(x.device(), packed, padded, p.slots, /*to_padded=*/true, fill);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = heads == 0 ? padded.view({p.batch, p.length, F}) : padded;
  }
  if (autograd::any_requires_grad({&x})) {
    autograd::record("unpack_sequences", {x}, {out}, [p, heads](const TensorList& g, const autograd::NeedsGrad&) {
      return TensorList{pack_sequences(g[0], p, heads)};
    });
  }
  return out;
}

}  // namespace lsf
