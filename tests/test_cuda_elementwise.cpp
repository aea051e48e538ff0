// CUDA elementwise kernels against the CPU kernels: binary ops with broadcasting (every op, every
// dtype, contiguous / scalar / strided paths) and every unary op forward and backward (f32,
// f64, bf16, f16; integer neg/abs/clamp), on random inputs including non-contiguous views and
// odd sizes. [cuda] cases skip without a device. The offset calculator and launch-shape rules
// the kernels share (cuda/offset_calc.h) are checked on the CPU ([cuda_host]).
#include <cmath>
#include <limits>
#include <string>

#include "lsformer/cuda/offset_calc.h"
#include "lsformer/ops/kernels/binary.h"
#include "cuda_compare.h"

using namespace lsf;
using test::check_gpu;
using test::check_gpu_equal;
using test::cpu_ref;
using test::gpu;
using test::random_tensor;
using test::unit_roundoff;

namespace {

// ---- host-side index math ----

// The element offset of linear index i in a tensor of `shape` and `strides`, the slow way.
int64_t brute_offset(const Shape& shape, const Strides& strides, int64_t i) {
  int64_t off = 0;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    off += (i % shape[d]) * strides[d];
    i /= shape[d];
  }
  return off;
}

Tensor apply_binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::Add: return add(a, b);
    case BinaryOp::Sub: return sub(a, b);
    case BinaryOp::Mul: return mul(a, b);
    case BinaryOp::Div: return div(a, b);
    case BinaryOp::Eq: return eq(a, b);
    case BinaryOp::Ne: return ne(a, b);
    case BinaryOp::Lt: return lt(a, b);
    case BinaryOp::Le: return le(a, b);
    case BinaryOp::Gt: return gt(a, b);
    case BinaryOp::Ge: return ge(a, b);
  }
  return Tensor();
}

// Small integers in dtype t (exact in every dtype, so arithmetic and comparisons are exact).
Tensor small_ints(const Shape& shape, DType t, uint64_t seed, double lo, double hi) {
  Generator g(seed);
  return add(mul(rand(shape, TensorOptions(kF64), &g), hi - lo), lo).to(kI64).to(t);
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> fn;
  bool positive;  // the op needs x > 0 (log, sqrt, rsqrt, fractional pow)
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, false},
      {"pow 2", [](const Tensor& x) { return pow(x, 2.0); }, false},
      {"pow 3", [](const Tensor& x) { return pow(x, 3.0); }, false},
      {"pow 0", [](const Tensor& x) { return pow(x, 0.0); }, false},
      {"pow -1", [](const Tensor& x) { return pow(x, -1.0); }, true},
      {"pow 0.5", [](const Tensor& x) { return pow(x, 0.5); }, true},
      {"pow -0.5", [](const Tensor& x) { return pow(x, -0.5); }, true},
      {"pow 1.7", [](const Tensor& x) { return pow(x, 1.7); }, true},
      {"exp", [](const Tensor& x) { return exp(x); }, false},
      {"log", [](const Tensor& x) { return log(x); }, true},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, true},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, true},
      {"abs", [](const Tensor& x) { return abs(x); }, false},
      {"tanh", [](const Tensor& x) { return tanh(x); }, false},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, false},
      {"relu", [](const Tensor& x) { return relu(x); }, false},
      {"gelu", [](const Tensor& x) { return gelu(x); }, false},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, GeluApproximation::Tanh); }, false},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.75); }, false},
      {"clamp min", [](const Tensor& x) { return clamp(x, -0.5, std::nullopt); }, false},
  };
}

// Unary tolerances. f32: the CPU's polynomials are within 8 ulp of the exact function
// (ops/cpu/unary_math.h), CUDA's libdevice within 4; the backward multiplies by dy and
// forms 1 − y², y(1 − y) or Φ + xφ from them, each step at most doubling the relative
// error plus one rounding: 64·2^-24 relative, and the same absolute where the result passes
// through 0 (inputs are O(1)). f64: libm and libdevice are within 2 ulp: 64·2^-53.
// bf16/f16: the GPU rounds a float result once (½ ulp = u of the format), the CPU reference
// is f32 on the same inputs: 2u relative, and 2u·max|ref| absolute for results near 0.
double unary_tol(DType t) { return t == kBF16 || t == kF16 ? 2.0 * unit_roundoff(t) : 64.0 * unit_roundoff(t); }

}  // namespace

TEST_CASE("offset calculator matches brute-force strided indexing", "[cuda_host]") {
  using lsf::cuda::make_offset_calc;
  // A transposed, sliced, expanded mix: shape [3, 1, 4, 5] with one operand contiguous, one
  // permuted, one broadcast along two dims.
  const Shape shape{3, 1, 4, 5};
  const Strides contiguous{20, 20, 5, 1};
  const Strides permuted{1, 7, 15, 3};
  const Strides broadcast{0, 0, 1, 0};
  auto calc = make_offset_calc<3>(shape, {&contiguous, &permuted, &broadcast}, "test");
  CHECK(calc.ndim == 3);  // the size-1 dim is dropped, nothing else merges
  for (int64_t i = 0; i < 60; ++i) {
    auto o = calc.get(i);
    CHECK(o.v[0] == i);
    CHECK(o.v[1] == brute_offset(shape, permuted, i));
    CHECK(o.v[2] == brute_offset(shape, broadcast, i));
  }
  // A contiguous tensor merges into one dim: offset = i with no division.
  auto one = make_offset_calc<1>(shape, {&contiguous}, "test");
  CHECK(one.ndim == 1);
  CHECK(one.get(37).v[0] == 37);
  // A sliced inner dim (row stride 8 for rows of 5) does not merge.
  const Shape rows{6, 5};
  const Strides sliced{8, 1};
  auto two = make_offset_calc<1>(rows, {&sliced}, "test");
  CHECK(two.ndim == 2);
  for (int64_t i = 0; i < 30; ++i) CHECK(two.get(i).v[0] == brute_offset(rows, sliced, i));
  // A single element (every dim 1) has no dims: offset 0.
  const Shape ones{1, 1};
  const Strides ones_strides{1, 1};
  auto single = make_offset_calc<1>(ones, {&ones_strides}, "test");
  CHECK(single.ndim == 0);
  CHECK(single.get(0).v[0] == 0);
}

TEST_CASE("offset calculator on real tensor views", "[cuda_host]") {
  Generator gen(3);
  const Tensor x = randn({4, 5, 6}, TensorOptions(kF32), &gen);
  const Tensor row = randn({1, 5, 1}, TensorOptions(kF32), &gen);
  struct View {
    const char* name;
    Tensor t;
    int merged_dims;  // dims left after merging (with a contiguous partner)
  };
  const View views[] = {
      {"contiguous", x, 1},
      {"permuted", x.permute({2, 0, 1}), 2},  // dims 1 and 2 stay contiguous with each other
      {"sliced with step", x.slice(1, 1, 5, 2), 3},
      {"transposed inner", x.transpose(1, 2), 3},
      {"broadcast", row.expand({4, 5, 6}), 3},
      {"0-d", x.select(0, 1).select(0, 2).select(0, 3), 0},
      {"size-1 dims", x.narrow(0, 2, 1).narrow(2, 0, 1), 1},
  };
  for (const View& v : views) {
    INFO(v.name);
    const Tensor& src = v.t;
    const Strides dense = contiguous_strides(src.shape());
    const auto geo = cuda::make_offset_calc<2>(src.shape(), {&dense, &src.strides()}, "test");
    CHECK(geo.ndim == v.merged_dims);
    int bad = 0;
    for (int64_t i = 0; i < src.numel(); ++i) {
      const cuda::Offsets<2> off = geo.get(i);
      int64_t rest = i, want_dst = 0, want_src = 0;  // row-major decomposition over the full shape
      for (size_t d = src.shape().size(); d-- > 0;) {
        const int64_t idx = rest % src.shape()[d];
        rest /= src.shape()[d];
        want_dst += idx * dense[d];
        want_src += idx * src.strides()[d];
      }
      bad += off.v[0] != want_dst || off.v[1] != want_src;
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("offset calculator refuses more dims than the kernels take", "[cuda_host]") {
  // 17 dims of size 2 with strides that never merge (each twice the contiguous stride).
  Shape shape(17, 2);
  Strides strides(17);
  int64_t s = 1;
  for (int64_t d = 16; d >= 0; --d) {
    strides[d] = s;
    s *= 4;
  }
  CHECK_THROWS_WITH((lsf::cuda::make_offset_calc<1>(shape, {&strides}, "binary_kernel")),
                    Catch::Contains("binary_kernel") && Catch::Contains("17 dimensions"));
}

TEST_CASE("row group size and reduction splits", "[cuda_host]") {
  using lsf::cuda::reduction_splits;
  using lsf::cuda::row_group_size;
  CHECK(row_group_size(1) == 32);
  CHECK(row_group_size(1024) == 32);
  CHECK(row_group_size(1025) == 128);
  CHECK(row_group_size(16384) == 256);
  CHECK(row_group_size(50257) == 1024);
  // Enough outputs: no split. Few outputs and a long reduction: split, each split long enough.
  CHECK(reduction_splits(4096, 1 << 20) == 1);
  CHECK(reduction_splits(1, 100) == 1);
  const int64_t s = reduction_splits(1, int64_t(1) << 24);
  CHECK(s > 1);
  CHECK(s <= 1024);
  CHECK((int64_t(1) << 24) / s >= 4096);
}

TEST_CASE("CUDA binary ops match the CPU for every op and dtype, with broadcasting", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  const BinaryOp ops[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Eq,
                          BinaryOp::Ne,  BinaryOp::Lt,  BinaryOp::Le,  BinaryOp::Gt,  BinaryOp::Ge};
  // Shapes exercising: equal contiguous (odd size, not a multiple of the vector width),
  // a row broadcast, a column broadcast with leading dims, and a scalar.
  const std::pair<Shape, Shape> shapes[] = {{{1003}, {1003}}, {{37, 65}, {65}}, {{2, 3, 17, 1}, {1, 9}}, {{513}, {}}};
  for (DType t : {kF32, kF64, kBF16, kF16}) {
    for (const auto& [sa, sb] : shapes) {
      Tensor a = random_tensor(sa, t, 1);
      // b away from 0 so that div stays well conditioned.
      Tensor b = add(abs(random_tensor(sb, kF64, 2)), 0.5).to(t);
      for (BinaryOp op : ops) {
        INFO("dtype " << dtype_name(t) << " op " << int(op) << " shapes " << test::str(sa) << " " << test::str(sb));
        Tensor ref = apply_binary(op, cpu_ref(a), cpu_ref(b));
        Tensor out = apply_binary(op, gpu(a), gpu(b));
        if (op >= BinaryOp::Eq) {
          check_gpu_equal(out, ref);  // comparisons of the same values are exact
        } else {
          // One rounding of the exact result on both sides: u relative (the CPU's f32 result
          // for bf16/f16 is rounded once more when compared, hence 2u). Below the smallest
          // normal the rounding is absolute: half the subnormal spacing (f16: 2^-24, bf16: 2^-133,
          // f32: 2^-149, f64: 2^-1074).
          const double tol = t == kBF16 || t == kF16 ? 2.0 * unit_roundoff(t) : unit_roundoff(t);
          const double subnormal_half_step = t == kF16    ? 0x1p-25
                                             : t == kBF16 ? 0x1p-134
                                             : t == kF32  ? 0x1p-150
                                                          : 0.0;  // f64: below any tolerance here
          check_gpu(out, ref, subnormal_half_step, tol);
        }
      }
    }
  }
}

TEST_CASE("CUDA binary ops on integers and bool are exact", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (DType t : {kI32, kI64, kU8}) {
    Tensor a = small_ints({7, 33}, t, 3, 0, 100);
    Tensor b = small_ints({33}, t, 4, 0, 100);
    for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Eq, BinaryOp::Lt, BinaryOp::Ge}) {
      INFO("dtype " << dtype_name(t) << " op " << int(op));
      check_gpu_equal(apply_binary(op, gpu(a), gpu(b)), apply_binary(op, a, b));  // u8 wraps on both
    }
  }
  Tensor p = small_ints({50}, kI64, 5, 0, 2).to(kBool), q = small_ints({50}, kI64, 6, 0, 2).to(kBool);
  check_gpu_equal(eq(gpu(p), gpu(q)), eq(p, q));
  check_gpu_equal(lt(gpu(p), gpu(q)), lt(p, q));
}

TEST_CASE("CUDA binary ops on non-contiguous views and large tensors", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  // Transposed and sliced views: the strided path with an OffsetCalc.
  Tensor base_a = random_tensor({64, 48}, kF32, 7), base_b = random_tensor({48, 130}, kF32, 8);
  Tensor a_cpu = base_a.t();                     // [48, 64], strides {1, 48}
  Tensor b_cpu = base_b.slice(1, 3, 131, 2);     // [48, 64], strides {130, 2}
  Tensor a = gpu(base_a).t(), b = gpu(base_b).slice(1, 3, 131, 2);
  REQUIRE(!a.is_contiguous());
  REQUIRE(!b.is_contiguous());
  // One rounding each side: 2^-24 relative.
  check_gpu(mul(a, b), mul(a_cpu, b_cpu), 0.0, 0x1p-24);
  check_gpu(sub(a, b), sub(a_cpu, b_cpu), 0.0, 0x1p-24);
  check_gpu_equal(gt(a, b), gt(a_cpu, b_cpu));
  // A large odd-sized tensor (grid-stride loop, vector tail) and a misaligned view (vector
  // loads off): start one element into the buffer.
  Tensor big = random_tensor({(1 << 20) + 3}, kF32, 9);
  Tensor big_b = random_tensor({(1 << 20) + 3}, kF32, 10);
  check_gpu(add(gpu(big), gpu(big_b)), add(big, big_b), 0.0, 0x1p-24);
  Tensor off_cpu = big.slice(0, 1, (1 << 20) + 3), off_b_cpu = big_b.slice(0, 1, (1 << 20) + 3);
  Tensor off = gpu(big).slice(0, 1, (1 << 20) + 3), off_b = gpu(big_b).slice(0, 1, (1 << 20) + 3);
  check_gpu(div(off, off_b), div(off_cpu, off_b_cpu), 0.0, 0x1p-24);
}

TEST_CASE("CUDA binary backward (broadcast gradients) matches the CPU", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Tensor a_cpu = random_tensor({9, 1, 33}, kF32, 11).requires_grad_(true);
  Tensor b_cpu = add(abs(random_tensor({7, 1}, kF64, 12)), 0.5).to(kF32).requires_grad_(true);
  Tensor dy = random_tensor({9, 7, 33}, kF32, 13);
  Tensor a = gpu(a_cpu.detach()).requires_grad_(true), b = gpu(b_cpu.detach()).requires_grad_(true);
  div(mul(a_cpu, b_cpu), b_cpu).backward(dy);
  div(mul(a, b), b).backward(gpu(dy));
  // Gradients are sums over up to 9·33 = 297 broadcast terms, each a product of ≤ 3 roundings,
  // summed in different orders: the error is ≤ 4·297·2^-24 times the sum of the terms'
  // magnitudes, not of the result. b's two terms, dy·a/b and −dy·a·b/b², cancel exactly (its
  // gradient is 0 up to rounding), so the bound must be Σ|dy|·|a|/|b| per element of b, and
  // likewise Σ|dy|·|b|/|b| for a.
  NoGradGuard no_grad;
  const Tensor term = mul(abs(dy), div(abs(a_cpu), abs(b_cpu)));           // [9, 7, 33]
  const double a_terms = test::max_abs(sum(abs(dy), {1}));                   // Σ over the 7 rows
  const double b_terms = 2.0 * test::max_abs(sum(term, {0, 2}));             // both terms, Σ over 9·33
  const double rel = 4.0 * 297 * 0x1p-24;
  test::check_gpu(a.grad(), a_cpu.grad(), rel * a_terms, rel);
  test::check_gpu(b.grad(), b_cpu.grad(), rel * b_terms, rel);
}

TEST_CASE("CUDA unary ops match the CPU forward and backward in every float dtype", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (DType t : {kF32, kF64, kBF16, kF16}) {
    const double tol = unary_tol(t);
    for (const UnaryCase& c : unary_cases()) {
      INFO(c.name << " " << dtype_name(t));
      // 1001 elements (odd) in [-3, 3] or, for ops that need it, (0.25, 3.25].
      Tensor x = c.positive ? add(abs(random_tensor({7, 143}, kF64, 21)), 0.25).to(t) : random_tensor({7, 143}, t, 21);
      Tensor dy = random_tensor({7, 143}, t, 22);
      Tensor xr = cpu_ref(x).requires_grad_(true);
      Tensor ref = c.fn(xr);
      ref.backward(cpu_ref(dy));
      Tensor xg = gpu(x).requires_grad_(true);
      Tensor out = c.fn(xg);
      CHECK(out.dtype() == t);
      test::check_gpu(out, ref.detach(), tol, tol);
      out.backward(gpu(dy));
      test::check_gpu(xg.grad(), xr.grad(), tol * std::max(test::max_abs(xr.grad()), 1.0), tol);
    }
  }
}

TEST_CASE("CUDA bias_gelu (its composition) matches the CPU's fused kernel forward and backward", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (DType t : {kF32, kF64}) {
    INFO(dtype_name(t));
    const double tol = unary_tol(t);
    Tensor x = random_tensor({37, 143}, t, 23), bias = random_tensor({143}, t, 24), dy = random_tensor({37, 143}, t, 25);
    Tensor xc = cpu_ref(x).requires_grad_(true), bc = cpu_ref(bias).requires_grad_(true);
    Tensor xg = gpu(x).requires_grad_(true), bg = gpu(bias).requires_grad_(true);
    Tensor yc = bias_gelu(xc, bc), yg = bias_gelu(xg, bg);
    // The sum x + bias is one rounding on both sides; then gelu as in the unary test above.
    test::check_gpu(yg, yc.detach(), tol, tol);
    yc.backward(cpu_ref(dy));
    yg.backward(gpu(dy));
    test::check_gpu(xg.grad(), xc.grad(), tol * std::max(test::max_abs(xc.grad()), 1.0), tol);
    // dbias: 37 rows summed in different orders on the two sides, each within 36·u·Σ|dx| of
    // the exact sum.
    const double sum_tol = 2.0 * 36.0 * unit_roundoff(t) * 37.0 * std::max(test::max_abs(xc.grad()), 1.0);
    test::check_gpu(bg.grad(), bc.grad(), sum_tol + tol * 37.0 * std::max(test::max_abs(xc.grad()), 1.0), tol);
  }
}

TEST_CASE("CUDA unary ops on strided views and special values", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  // x is a transposed, stepped slice of a leaf: [12, 40], neither contiguous nor dense.
  Tensor base = random_tensor({40, 37}, kF32, 31);
  REQUIRE(!gpu(base).t().slice(0, 1, 37, 3).is_contiguous());
  const double tol = unary_tol(kF32);
  for (const UnaryCase& c : unary_cases()) {
    if (c.positive) continue;
    INFO(c.name);
    Tensor leaf_cpu = base.clone().requires_grad_(true);
    Tensor leaf = gpu(base).requires_grad_(true);
    Tensor ref = c.fn(leaf_cpu.t().slice(0, 1, 37, 3));
    Tensor out = c.fn(leaf.t().slice(0, 1, 37, 3));
    check_gpu(out, ref.detach(), tol, tol);
    // A strided dy too: the backward kernel's offset path.
    Tensor dy_base = random_tensor({40, 12}, kF32, 32);
    ref.backward(dy_base.t());
    out.backward(gpu(dy_base).t());
    check_gpu(leaf.grad(), leaf_cpu.grad(), tol, tol);
  }
  // Contiguous but one element into the buffer: the unaligned (non-vector) dense path.
  Tensor odd = random_tensor({2051}, kBF16, 33);
  check_gpu(gelu(gpu(odd).slice(0, 1, 2051)), gelu(cpu_ref(odd).slice(0, 1, 2051)), unary_tol(kBF16),
            unary_tol(kBF16));
  // Special values: inf, -inf, NaN, ±0 through every op that is defined for them.
  const double inf = std::numeric_limits<double>::infinity();
  Tensor sv = tensor(std::vector<double>{inf, -inf, NAN, 0.0, -0.0, 30.0, -30.0, 1e-30}, {8});
  for (DType t : {kF32, kF64}) {
    Tensor x = sv.to(t);
    for (const UnaryCase& c : unary_cases()) {
      if (c.positive) continue;
      INFO(c.name << " special values " << dtype_name(t));
      check_gpu(c.fn(gpu(x)), c.fn(x), unary_tol(t), unary_tol(t));
    }
    for (auto fn : {+[](const Tensor& v) { return exp(v); }, +[](const Tensor& v) { return log(v); },
                    +[](const Tensor& v) { return sqrt(v); }, +[](const Tensor& v) { return rsqrt(v); }}) {
      check_gpu(fn(gpu(x)), fn(x), unary_tol(t), unary_tol(t));
    }
  }
}

TEST_CASE("CUDA neg, abs and clamp on integers are exact", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (DType t : {kI32, kI64, kU8}) {
    INFO(dtype_name(t));
    Tensor x = small_ints({3, 101}, t, 41, t == kU8 ? 0 : -100, 100);
    check_gpu_equal(neg(gpu(x)), neg(x));
    check_gpu_equal(abs(gpu(x)), abs(x));
    check_gpu_equal(clamp(gpu(x), 5.0, 60.0), clamp(x, 5.0, 60.0));
    check_gpu_equal(clamp(gpu(x).t(), std::nullopt, 20.0), clamp(x.t(), std::nullopt, 20.0));
  }
}

TEST_CASE("CUDA elementwise kernels refuse what they do not support", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Tensor p = gpu(tensor(std::vector<double>{1, 0}, {2}).to(kBool));
  CHECK_THROWS_WITH(add(p, p), Catch::Contains("binary_kernel") && Catch::Contains("bool"));
}
