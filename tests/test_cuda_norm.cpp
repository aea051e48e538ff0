// CUDA softmax / log_softmax (and masked_softmax, its composition there), layer norm,
// cross-entropy and nll_loss against the CPU kernels,
// forward and backward: last-dim rows (short, block-sized, longer than a block), softmax over
// an inner dim (the column kernels), non-contiguous inputs, [N, C, d1, d2] losses with
// ignore_index, label smoothing, every reduction and i32 targets, f32/f64/bf16/f16.
// [cuda] cases skip without a device.
//
// Tolerances use Higham's bound for a sum in a given order: within (L + depth)·u·Σ|terms| of
// the exact sum, L the longest run added sequentially, depth that of the trees combining runs.
// Row sums (reduced dim innermost): the GPU runs ≤ n/32 terms per thread then trees of depth
// ≤ 10; the CPU runs n/lanes per vector lane (≥ 4 f32 lanes, ≥ 2 f64 lanes, SSE2 at least)
// then ≤ 16 combining steps. Column sums (an inner dim follows the reduced one): both add all
// n terms in order. So each side is within sum_err = (L + 32)·u with L = n/4 (f32 rows), n/2
// (f64 rows) or n (columns); the two results differ by at most twice that, plus the few
// roundings after the sum.
#include <cmath>

#include "cuda_compare.h"

using namespace lsf;
using test::check_gpu;
using test::cpu_ref;
using test::gpu;
using test::max_abs;
using test::random_tensor;
using test::unit_roundoff;

namespace {

// u of the arithmetic (float for f32/bf16/f16, double for f64).
double compute_u(DType t) { return t == kF64 ? 0x1p-53 : 0x1p-24; }
// Relative error bound of a length-n sum of positive terms, one side (see the top).
double sum_err(int64_t n, DType t, bool columns = false) {
  const double run = columns ? double(n) : t == kF64 ? double(n) / 2.0 : double(n) / 4.0;
  return (run + 32.0) * compute_u(t);
}
// Extra relative error of a 16-bit result: its rounding, ½ ulp = u of the format, against
// an f32 reference that is itself not rounded: 2u to be safe at ties.
double storage_err(DType t) { return t == kBF16 || t == kF16 ? 2.0 * unit_roundoff(t) : 0.0; }
// Below f16's smallest normal (2^-14) its rounding is absolute: half the subnormal step 2^-24
// (softmax values of long rows live there). bf16 shares f32's exponent range: negligible.
double subnormal_err(DType t) { return t == kF16 ? 0x1p-25 : 0.0; }

Tensor softmax_op(bool log, const Tensor& x, int64_t dim) { return log ? log_softmax(x, dim) : softmax(x, dim); }

}  // namespace

TEST_CASE("CUDA softmax and log_softmax match the CPU forward and backward", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  struct Case {
    Shape shape;
    int64_t dim;
  };
  const Case cases[] = {
      {{7, 33}, -1},       // short rows: a warp per row, 8 rows per block, odd count
      {{5, 3000}, 1},      // 128 threads per row
      {{3, 20001}, 1},     // longer than a block: 1024 threads per row
      {{4, 9, 6}, 1},      // inner dim: one thread per column
      {{300, 5}, 0},       // leading dim, few long columns: rows of a transposed copy
      {{2, 4096, 64}, 1},  // the LRA projection softmax (over the tokens): rows of a transposed copy
      {{2, 100, 9000}, 1}, // many columns: one thread per column
  };
  for (DType t : {kF32, kF64, kBF16, kF16}) {
    for (const Case& c : cases) {
      const int64_t d = c.dim < 0 ? c.dim + int64_t(c.shape.size()) : c.dim;
      const int64_t n = c.shape[size_t(d)];
      // An inner dim follows: the column kernels' serial sums, or the row kernels on a transpose,
      // whose shorter sums the column bound covers.
      const bool columns = d + 1 < int64_t(c.shape.size());
      auto serr = [&](int64_t len) { return sum_err(len, t, columns); };
      for (bool log : {false, true}) {
        INFO(dtype_name(t) << " " << (log ? "log_softmax" : "softmax") << " shape " << test::str(c.shape) << " dim "
                           << c.dim);
        Tensor x = random_tensor(c.shape, t, 1, 3.0);
        Tensor dy = random_tensor(c.shape, t, 2);
        Tensor xc = cpu_ref(x).requires_grad_(true);
        Tensor xg = gpu(x).requires_grad_(true);
        Tensor yc = softmax_op(log, xc, c.dim), yg = softmax_op(log, xg, c.dim);
        // softmax: Σ exp has relative error ≤ sum_err per side, each exp ≤ 2 ulp, one division
        // (log_softmax: absolute, plus one rounding of |max + log Σ| ≤ u·max|y|).
        const double e = 2.0 * serr(n) + 6.0 * compute_u(t);
        if (log) check_gpu(yg, yc.detach(), e + (compute_u(t) + storage_err(t)) * max_abs(yc), storage_err(t));
        else check_gpu(yg, yc.detach(), subnormal_err(t), e + storage_err(t));
        yc.backward(cpu_ref(dy));
        yg.backward(gpu(dy));
        // softmax: dx = y·(dy − Σ dy·y); Σ has error ≤ 2·sum_err·max|dy| (Σ y = 1), times y ≤ 1.
        // log_softmax: dx = dy − exp(y)·Σ dy; Σ dy has error ≤ 2·sum_err·Σ|dy| along the dim,
        // times exp(y) ≤ 1, plus exp's and y's own errors e·|Σ dy|. For bf16 the GPU saved y
        // rounded (u relative): through y·(·) and Σ dy·y that is storage_err·max|dy|; through
        // exp(y) it is storage_err·|y|·|Σ dy|. Then dx's own rounding.
        const double dmax = max_abs(dy);
        const double sdy = max_abs(sum(cpu_ref(dy), {d})), absdy = max_abs(sum(abs(cpu_ref(dy)), {d}));
        const double atol = log ? 2.0 * serr(n) * absdy + e * sdy + storage_err(t) * (1.0 + max_abs(yc)) * sdy
                                : (2.0 * serr(n) + e + storage_err(t)) * dmax;
        check_gpu(xg.grad(), xc.grad(), atol + storage_err(t) * max_abs(xc.grad()), storage_err(t) + e);
      }
    }
  }
}

TEST_CASE("CUDA softmax on a non-contiguous input", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Tensor base = random_tensor({40, 70}, kF32, 3);
  Tensor yc = softmax(base.t(), -1), yg = softmax(gpu(base).t(), -1);  // rows of 40 with stride 70
  check_gpu(yg, yc, 0.0, 2.0 * sum_err(40, kF32) + 6 * 0x1p-24);  // rows: see the top
}

TEST_CASE("CUDA masked_softmax (its composition) matches the CPU kernel forward and backward", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  // keep [B, 1, n, n] as full attention builds it, with query 2 of batch 0 keeping nothing.
  Generator g(31);
  Tensor keep = gt(rand({2, 1, 5, 40}, TensorOptions(kF64), &g), 0.3);
  keep = masked_fill(keep, tensor(std::vector<double>{1, 0, 0, 0, 0, 0, 1, 0, 0, 0}, {2, 1, 5, 1}).to(kBool), 0.0);
  for (DType t : {kF32, kF64}) {
    INFO(dtype_name(t));
    Tensor x = random_tensor({2, 3, 5, 40}, t, 4, 3.0);
    Tensor dy = random_tensor({2, 3, 5, 40}, t, 5);
    Tensor xc = cpu_ref(x).requires_grad_(true), xg = gpu(x).requires_grad_(true);
    Tensor yc = masked_softmax(xc, keep), yg = masked_softmax(xg, gpu(keep));
    // As softmax (above): the kept entries are a softmax over at most 40 terms; dropped ones and
    // the empty row are exactly 0 on both.
    const double e = 2.0 * sum_err(40, t) + 6.0 * compute_u(t);
    check_gpu(yg, yc.detach(), 0.0, e);
    yc.backward(cpu_ref(dy));
    yg.backward(gpu(dy));
    check_gpu(xg.grad(), xc.grad(), (2.0 * sum_err(40, t) + e) * max_abs(dy), e);
  }
}

TEST_CASE("CUDA layer_norm matches the CPU forward and backward", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  struct Case {
    Shape shape;
    Shape normalized;
  };
  const Case cases[] = {
      {{6, 5, 33}, {33}},        // short rows (a warp each), 30 rows
      {{3, 4, 256}, {4, 256}},   // rows of 1024 over two dims
      {{5, 6000}, {6000}},       // 256 threads per row
      {{2, 20000}, {20000}},     // longer than a block
      {{700, 40}, {40}},         // many rows: the dweight/dbias split over blocks
  };
  for (DType t : {kF32, kF64, kBF16, kF16}) {
    for (const Case& c : cases) {
      for (int affine = 0; affine < 3; ++affine) {  // none, weight only, weight and bias
        INFO(dtype_name(t) << " shape " << test::str(c.shape) << " affine " << affine);
        const int64_t n = shape_numel(c.normalized), rows = shape_numel(c.shape) / n;
        Tensor x = add(random_tensor(c.shape, t, 4, 2.0).to(kF64), 0.5).to(t);
        Tensor w = add(random_tensor(c.normalized, kF64, 5, 0.2), 1.0).to(t);
        Tensor b = random_tensor(c.normalized, t, 6, 0.3);
        Tensor dy = random_tensor(c.shape, t, 7);
        Tensor xc = cpu_ref(x).requires_grad_(true), xg = gpu(x).requires_grad_(true);
        Tensor wc = cpu_ref(w).requires_grad_(true), wg = gpu(w).requires_grad_(true);
        Tensor bc = cpu_ref(b).requires_grad_(true), bg = gpu(b).requires_grad_(true);
        Tensor yc = layer_norm(xc, c.normalized, affine >= 1 ? wc : Tensor(), affine >= 2 ? bc : Tensor());
        Tensor yg = layer_norm(xg, c.normalized, affine >= 1 ? wg : Tensor(), affine >= 2 ? bg : Tensor());
        // mean and variance are sums (of x, of (x − mean)² ≥ 0): each side within sum_err·Σ|·|;
        // y = (x − mean)·rstd·w + b is off by (mean's error ≤ s·max|x|)·rstd·|w| plus rstd's
        // relative error (≤ s) times |x̂·w|, plus 4 roundings. rstd ≤ 1 here (x has standard
        // deviation 2); max|x̂| is measured on the CPU.
        const double xmax = max_abs(x), wmax = affine >= 1 ? max_abs(w) : 1.0;
        const double xh = max_abs(layer_norm(cpu_ref(x), c.normalized));
        const double s = 2.0 * sum_err(n, t);
        const double y_atol = s * (xmax + xh) * wmax + storage_err(t) * max_abs(yc);
        check_gpu(yg, yc.detach(), y_atol, 4.0 * compute_u(t) + storage_err(t));
        yc.backward(cpu_ref(dy));
        yg.backward(gpu(dy));
        // dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·w: the two means are sums of n terms
        // (|g·x̂| ≤ |g|·max|x̂|) with error s·max|g|·max|x̂|, times rstd (≤ 1); plus the forward
        // statistics' errors carried through x̂ (s·(max|x| + max|x̂|)). mean and rstd are kept
        // in f32 for bf16/f16 (issue #19 item 4), so no 16-bit rounding of them enters; dx's own
        // rounding to its dtype is the rtol's storage_err.
        const double gmax = max_abs(dy) * wmax;
        const double dx_atol = s * xh * gmax + s * (xmax + xh) * gmax;
        check_gpu(xg.grad(), xc.grad(), dx_atol, 8.0 * compute_u(t) + storage_err(t));
        if (affine >= 1) {
          // dweight = Σ_rows dy·x̂: the GPU sums in f64, the CPU in f32 blocks of 64 rows then f64:
          // (64 + 4)·u·Σ|dy·x̂| ≤ 68u·rows·max|dy|·max|x̂|, plus x̂'s forward error
          // s·(max|x| + max|x̂|) per term (the statistics are f32 for bf16/f16: no 16-bit
          // rounding of x̂), plus dweight's own rounding to its dtype.
          const double dw_atol = (68.0 * compute_u(t) + s) * double(rows) * max_abs(dy) * (xh + xmax) +
                                 storage_err(t) * max_abs(wc.grad());
          check_gpu(wg.grad(), wc.grad(), dw_atol, storage_err(t));
        }
        if (affine >= 2) {
          const double db_atol = 68.0 * compute_u(t) * double(rows) * max_abs(dy) + storage_err(t) * max_abs(bc.grad());
          check_gpu(bg.grad(), bc.grad(), db_atol, storage_err(t));
        }
      }
    }
  }
}

TEST_CASE("CUDA cross_entropy and nll_loss match the CPU forward and backward", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  struct Case {
    Shape logits;
    double smoothing;
  };
  const Case cases[] = {
      {{13, 7}, 0.0},           // short rows, a warp per row
      {{9, 3000}, 0.1},         // 128 threads per row, label smoothing
      {{3, 20011}, 0.0},        // longer than a block
      {{4, 5, 3, 7}, 0.2},      // [N, C, d1, d2]: a thread per position
      {{11}, 0.0},              // a single sample [C] with a 0-d target
  };
  for (DType t : {kF32, kF64, kBF16, kF16}) {
    for (const Case& c : cases) {
      const int64_t C = c.logits.size() == 1 ? c.logits[0] : c.logits[1];
      Shape tshape;
      if (c.logits.size() > 1) {
        tshape.push_back(c.logits[0]);
        for (size_t d = 2; d < c.logits.size(); ++d) tshape.push_back(c.logits[d]);
      }
      for (DType it : {kI64, kI32}) {
        for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
          INFO(dtype_name(t) << " logits " << test::str(c.logits) << " target " << dtype_name(it) << " reduction "
                             << int(red) << " smoothing " << c.smoothing);
          Tensor x = random_tensor(c.logits, t, 8, 2.0);
          Generator g(9);
          // Targets in [0, C) with every fifth one ignore_index (−100) when there are several.
          Tensor target = mul(rand(tshape, TensorOptions(kF64), &g), double(C) - 1e-9).to(kI64);
          if (target.numel() > 1) {
            std::vector<int64_t> tv = target.to_vector<int64_t>();
            for (size_t i = 0; i < tv.size(); i += 5) tv[i] = -100;
            target = tensor(tv, tshape);
          }
          target = target.to(it);
          CrossEntropyOptions o;
          o.label_smoothing = c.smoothing;
          o.reduction = red;
          Tensor xc = cpu_ref(x).requires_grad_(true), xg = gpu(x).requires_grad_(true);
          Tensor lc = cross_entropy(xc, target, o), lg = cross_entropy(xg, gpu(target), o);
          // Per element: lse = m + log Σ exp(x − m) off by 2·sum_err(C) + exp's 2 ulp on each
          // side; the smoothing term ε/C·Σx off by 2·sum_err(C)·ε·max|x|; the rest is f64.
          // Sum over the M = N·K elements multiplies by M; mean divides again.
          const int64_t M = std::max<int64_t>(target.numel(), 1);
          const bool columns = c.logits.size() > 2;  // K > 1: a thread walks the classes in order
          const double e = 2.0 * sum_err(C, t, columns) * (1.0 + c.smoothing * max_abs(x)) + 8.0 * compute_u(t);
          const double l_atol = (red == Reduction::Sum ? double(M) : 1.0) * e;
          check_gpu(lg, lc.detach(), l_atol + storage_err(t) * max_abs(lc), 2.0 * compute_u(t) + storage_err(t));
          Tensor dl = red == Reduction::None ? random_tensor(lc.shape(), t, 10) : full({}, 1.5, TensorOptions(t));
          lc.backward(cpu_ref(dl));
          lg.backward(gpu(dl));
          // dx = g·(softmax − target distribution): softmax off by e relative, a few roundings.
          // g = scale·dloss, scale = 1/(number of counted targets) for Mean.
          const int64_t counted = sum(ne(target, -100.0)).item<int64_t>();
          const double g_max = max_abs(dl) * (red == Reduction::Mean ? 1.0 / double(std::max<int64_t>(counted, 1)) : 1.0);
          check_gpu(xg.grad(), xc.grad(), g_max * (e + 4.0 * compute_u(t)) + storage_err(t) * max_abs(xc.grad()),
                    storage_err(t));

          // nll_loss on log-probabilities: a gather and a sign (exact), sums in f64.
          NllLossOptions no;
          no.reduction = red;
          Tensor pc = log_softmax(cpu_ref(x), c.logits.size() == 1 ? 0 : 1).detach().requires_grad_(true);
          Tensor pg = gpu(pc.detach().to(t)).requires_grad_(true);
          Tensor pcr = cpu_ref(pc.detach().to(t)).requires_grad_(true);
          Tensor nc = nll_loss(pcr, target, no), ng = nll_loss(pg, gpu(target), no);
          const double n_atol = (red == Reduction::Sum ? double(M) : 1.0) * 2.0 * compute_u(t) * max_abs(pcr);
          check_gpu(ng, nc.detach(), n_atol + storage_err(t) * max_abs(nc), 2.0 * compute_u(t) + storage_err(t));
          nc.backward(cpu_ref(dl));
          ng.backward(gpu(dl));
          check_gpu(pg.grad(), pcr.grad(), 0.0, 2.0 * compute_u(t) + storage_err(t));
        }
      }
    }
  }
}

TEST_CASE("CUDA cross_entropy: every element ignored, and bad targets", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Tensor x = gpu(random_tensor({4, 6}, kF32, 11));
  Tensor ignored = gpu(tensor(std::vector<int64_t>{-100, -100, -100, -100}, {4}));
  CHECK(std::isnan(cross_entropy(x, ignored).to(kCPU).item<float>()));  // 0/0, as PyTorch
  CrossEntropyOptions sum_options;
  sum_options.reduction = Reduction::Sum;
  CHECK(cross_entropy(x, ignored, sum_options).to(kCPU).item<float>() == 0.0f);
  Tensor bad = gpu(tensor(std::vector<int64_t>{0, 6, 2, -3}, {4}));
  CHECK_THROWS_WITH(cross_entropy(x, bad), Catch::Contains("cross_entropy") && Catch::Contains("target 6") &&
                                               Catch::Contains("out of bounds"));
  CHECK_THROWS_WITH(nll_loss(x, bad), Catch::Contains("nll_loss") && Catch::Contains("target 6"));
}
