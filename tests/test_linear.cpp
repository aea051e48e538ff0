// linear (ops/matmul.h): x · weightᵀ + bias with the bias in the product's store, against its
// composition add(matmul(x, weight.t()), bias). On the skinny kernel's products the forward is
// bit for bit the composition's; on OpenBLAS's (K or N > 256, fewer than 16 rows) it is within
// the bound of two roundings of the same sum; the gradients are the composition's GEMMs and sum,
// bit for bit, on both. f64 gradient checks; strided, column-major and empty operands; the same
// bits on one thread and on all; bad input.
#include <cmath>
#include <string>

#include "helpers.h"
#include "lsformer/engine/parallel.h"
#include "lsformer/ops/cpu/skinny_gemm.h"
#include "lsformer/ops/kernels/matmul.h"

using namespace lsf;
using lsf::test::str;

namespace {

constexpr double kU32 = 0x1p-24;

struct Grads {
  Tensor y, dx, dw, db;
};

// y = f(x, w, b) and the gradients of Σ y·dy, on fresh leaves.
template <typename F>
Grads run(F f, const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& dy) {
  Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true);
  Tensor b = b0.detach().requires_grad_(true);
  Tensor y = f(x, w, b);
  y.backward(dy);
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

Tensor composed(const Tensor& x, const Tensor& w, const Tensor& b) { return add(matmul(x, w.t()), b); }
Tensor fused(const Tensor& x, const Tensor& w, const Tensor& b) { return linear(x, w, b); }

// x [*, K] and weight [N, K] (optionally stored column-major, as the view of a [K, N] tensor).
struct Operands {
  Tensor x, w, b, dy;
};
Operands operands(const Shape& x_shape, int64_t n, bool column_major_weight, uint64_t seed) {
  Generator g(seed);
  const int64_t k = x_shape.back();
  Operands o;
  o.x = randn(x_shape, TensorOptions(kF32), &g);
  o.w = column_major_weight ? randn({k, n}, TensorOptions(kF32), &g).t() : randn({n, k}, TensorOptions(kF32), &g);
  o.b = randn({n}, TensorOptions(kF32), &g);
  Shape y_shape = x_shape;
  y_shape.back() = n;
  o.dy = randn(y_shape, TensorOptions(kF32), &g);
  return o;
}

void check_gradients_equal(const Grads& a, const Grads& b) {
  CHECK(a.dx.shape() == b.dx.shape());
  CHECK(a.dx.to_vector<float>() == b.dx.to_vector<float>());
  CHECK(a.dw.to_vector<float>() == b.dw.to_vector<float>());
  CHECK(a.db.to_vector<float>() == b.db.to_vector<float>());
}

}  // namespace

TEST_CASE("linear equals add(matmul(x, weight.t()), bias) bit for bit on the skinny kernel's products",
          "[matmul][linear]") {
  // K, N ≤ 256 and at least 16 rows: the skinny kernel, bias in its store. Column counts with
  // partial vectors, a 3-D x, rows that leave remainder tiles, a column-major weight.
  struct Case {
    Shape x;
    int64_t n;
    bool column_major;
  };
  const std::vector<Case> cases = {{{200, 64}, 48, false}, {{3, 40, 33}, 17, false}, {{16, 1}, 5, false},
                                   {{97, 256}, 256, false}, {{50, 20}, 100, true}, {{2, 2, 9, 7}, 3, false}};
  for (const Case& c : cases) {
    INFO("x " << str(c.x) << ", N " << c.n << (c.column_major ? ", column-major weight" : ""));
    const Operands o = operands(c.x, c.n, c.column_major, 51);
    const Grads f = run(fused, o.x, o.w, o.b, o.dy), r = run(composed, o.x, o.w, o.b, o.dy);
    CHECK(f.y.shape() == r.y.shape());
    CHECK(f.y.to_vector<float>() == r.y.to_vector<float>());
    check_gradients_equal(f, r);
  }
}

TEST_CASE("linear on OpenBLAS's products: the forward within two roundings of the sum, gradients bit for bit",
          "[matmul][linear]") {
  // K > 256 or N > 256 (OpenBLAS), and fewer rows than the skinny kernel takes (1 row: a
  // matrix-vector product). The fused forward sums the product onto the bias, the composition
  // adds the bias to the rounded sum: each is within γ_{K+1}·(Σ_k |x_k·w_k| + |b|) of the exact
  // value (Higham §3.1), so they differ by at most twice that.
  struct Case {
    Shape x;
    int64_t n;
  };
  const std::vector<Case> cases = {{{40, 300}, 24}, {{2, 20, 64}, 300}, {{5, 33}, 7}, {{1, 70}, 9}};
  for (const Case& c : cases) {
    INFO("x " << str(c.x) << ", N " << c.n);
    const Operands o = operands(c.x, c.n, false, 52);
    const Grads f = run(fused, o.x, o.w, o.b, o.dy), r = run(composed, o.x, o.w, o.b, o.dy);
    const int64_t k = c.x.back();
    const double gamma = double(k + 1) * kU32 / (1.0 - double(k + 1) * kU32);
    Tensor magnitude = add(matmul(abs(o.x.to(kF64)), abs(o.w.to(kF64)).t()), abs(o.b.to(kF64)));
    const std::vector<double> bound = magnitude.to_vector<double>();
    const std::vector<float> a = f.y.to_vector<float>(), b = r.y.to_vector<float>();
    REQUIRE(a.size() == bound.size());
    int64_t outside = 0;
    for (size_t i = 0; i < a.size(); ++i) outside += std::fabs(double(a[i]) - double(b[i])) > 2 * gamma * bound[i];
    CHECK(outside == 0);
    check_gradients_equal(f, r);
  }
}

TEST_CASE("linear passes f64 gradient checks in x, weight and bias", "[matmul][linear]") {
  Generator g(53);
  // 17 rows (the skinny kernel) and 4 rows (OpenBLAS), a 3-D x.
  for (const Shape& x_shape : std::vector<Shape>{{17, 5}, {4, 5}, {2, 9, 5}}) {
    INFO("x " << str(x_shape));
    Tensor x = randn(x_shape, TensorOptions(kF64), &g).requires_grad_(true);
    Tensor w = randn({3, 5}, TensorOptions(kF64), &g).requires_grad_(true);
    Tensor b = randn({3}, TensorOptions(kF64), &g).requires_grad_(true);
    auto r = testing::gradcheck([](const TensorList& in) { return linear(in[0], in[1], in[2]); }, {x, w, b});
    INFO(r.message);
    CHECK(r.ok);
  }
}

TEST_CASE("linear reads strided and expanded inputs like the composition", "[matmul][linear]") {
  Generator g(54);
  Tensor w = randn({12, 30}, TensorOptions(kF32), &g), b = randn({12}, TensorOptions(kF32), &g);
  // Columns 3 … 32 of a wider matrix: a row stride of 40, read in place.
  Tensor narrowed = randn({20, 40}, TensorOptions(kF32), &g).narrow(1, 3, 30);
  // A permuted 3-D x (its leading dims do not fold into rows) and an expanded row: the composition.
  Tensor permuted = randn({30, 5, 4}, TensorOptions(kF32), &g).permute({1, 2, 0});
  Tensor expanded = randn({1, 30}, TensorOptions(kF32), &g).expand({18, 30});
  for (const Tensor& x : {narrowed, permuted, expanded}) {
    INFO("x " << str(x.shape()) << " strides " << str(Shape(x.strides().begin(), x.strides().end())));
    Shape y_shape = x.shape();
    y_shape.back() = 12;
    Tensor dy = randn(y_shape, TensorOptions(kF32), &g);
    const Grads f = run(fused, x, w, b, dy), r = run(composed, x, w, b, dy);
    CHECK(f.y.to_vector<float>() == r.y.to_vector<float>());
    check_gradients_equal(f, r);
  }
}

TEST_CASE("linear without a bias is matmul(x, weight.t())", "[matmul][linear]") {
  const Operands o = operands({30, 20}, 10, false, 55);
  CHECK(linear(o.x, o.w, Tensor()).to_vector<float>() == matmul(o.x, o.w.t()).to_vector<float>());
}

TEST_CASE("linear with no rows or an empty contraction", "[matmul][linear]") {
  SECTION("zero rows: an empty output, zero weight and bias gradients") {
    Tensor x = zeros({0, 4}).requires_grad_(true), w = ones({3, 4}).requires_grad_(true);
    Tensor b = ones({3}).requires_grad_(true);
    Tensor y = linear(x, w, b);
    CHECK(y.shape() == Shape{0, 3});
    sum(y).backward();
    CHECK(w.grad().to_vector<float>() == std::vector<float>(12, 0.0f));
    CHECK(b.grad().to_vector<float>() == std::vector<float>(3, 0.0f));
  }
  SECTION("K = 0: every row is the bias") {
    Tensor x = zeros({20, 0}), w = zeros({3, 0}), b = arange(0.0, 3.0, 1.0, TensorOptions(kF32)).requires_grad_(true);
    Tensor y = linear(x, w, b);
    CHECK(y.shape() == Shape{20, 3});
    CHECK(y.to_vector<float>() == b.detach().view({1, 3}).expand({20, 3}).contiguous().to_vector<float>());
    sum(y).backward();
    CHECK(b.grad().to_vector<float>() == std::vector<float>(3, 20.0f));
  }
}

TEST_CASE("linear gives the same bits on one thread and on all on the skinny kernel's products", "[matmul][linear]") {
  // (OpenBLAS's own products, with or without the bias, may round differently on other thread
  // counts: its column split changes which edge kernels run.)
  for (const Shape& x_shape : std::vector<Shape>{{512, 64}, {3, 100, 40}}) {
    INFO("x " << str(x_shape));
    const Operands o = operands(x_shape, 96, false, 56);
    const Grads all = run(fused, o.x, o.w, o.b, o.dy);
    const Grads one = [&] {
      const test::ThreadCount one_thread(1);
      return run(fused, o.x, o.w, o.b, o.dy);
    }();
    CHECK(all.y.to_vector<float>() == one.y.to_vector<float>());
    check_gradients_equal(all, one);
  }
}

TEST_CASE("linear rejects bad input with the op name and the shapes", "[matmul][linear]") {
  Tensor x = zeros({3, 4});
  REQUIRE_THROWS_WITH(linear(x, zeros({4}), Tensor()), Catch::Contains("linear") && Catch::Contains("weight must be [N, K]"));
  REQUIRE_THROWS_WITH(linear(x, zeros({2, 5}), Tensor()), Catch::Contains("{2, 5}"));
  REQUIRE_THROWS_WITH(linear(x, zeros({2, 4}), zeros({3})), Catch::Contains("bias must be [N]") && Catch::Contains("{3}"));
  REQUIRE_THROWS_WITH(linear(x, zeros({2, 4}), zeros({2}, TensorOptions(kF64))), Catch::Contains("dtype"));
  REQUIRE_THROWS_WITH(linear(zeros({3, 4}, TensorOptions(kI64)), zeros({2, 4}, TensorOptions(kI64)), Tensor()),
                      Catch::Contains("integer"));
  REQUIRE_THROWS_WITH(linear(Tensor(), zeros({2, 4}), zeros({2})), Catch::Contains("linear"));
}

TEST_CASE("linear's weight and bias gradients in one pass over dy: the GEMM's bits, sum_to's within one rounding",
          "[matmul][linear]") {
  // More rows than one K chunk of the skinny kernel (256), so the CPU takes dW and db together
  // (linear_weight_grad_kernel); 2100 rows split over two threads (chunks of ≥ 1024 rows), a
  // 3-D x, and a row count that leaves a partial chunk.
  struct Case {
    Shape x;
    int64_t n;
  };
  const std::vector<Case> cases = {{{3, 700, 64}, 48}, {{2100, 40}, 64}, {{300, 7}, 5}, {{1, 1500, 256}, 256}};
  for (const Case& c : cases) {
    INFO("x " << str(c.x) << ", N " << c.n);
    const Operands o = operands(c.x, c.n, false, 57);
    const Grads f = run(fused, o.x, o.w, o.b, o.dy), r = run(composed, o.x, o.w, o.b, o.dy);
    CHECK(f.dx.to_vector<float>() == r.dx.to_vector<float>());
    CHECK(f.dw.to_vector<float>() == r.dw.to_vector<float>());
    // Both bias gradients are f64 sums of the same terms rounded once to f32: they differ by at
    // most one rounding each (2^-24 of Σ|dy|) plus the f64 sums' own difference (rows · 2^-53 each).
    const int64_t rows = shape_numel(c.x) / c.x.back();
    const std::vector<double> magnitude = sum_to(abs(o.dy.to(kF64)), {c.n}).to_vector<double>();
    const std::vector<float> a = f.db.to_vector<float>(), b = r.db.to_vector<float>();
    for (size_t j = 0; j < a.size(); ++j)
      CHECK(std::fabs(double(a[j]) - double(b[j])) <= (2 * kU32 + 2 * double(rows) * 0x1p-53) * magnitude[j]);
  }
}

TEST_CASE("linear_weight_grad_kernel fuses the long contractions it takes and declines the rest", "[matmul][linear]") {
  Generator g(58);
  auto attempt = [&](int64_t rows, int64_t k, int64_t n) {
    Tensor x = randn({rows, k}, TensorOptions(kF32), &g), dy = randn({rows, n}, TensorOptions(kF32), &g);
    Tensor dw = full({n, k}, -1.0), db = full({n}, -1.0);
    const bool fused = linear_weight_grad_kernel(kCPU, dw, db, x, dy);
    if (fused) {
      CHECK(dw.to_vector<float>() == matmul(dy.t(), x).to_vector<float>());
      const std::vector<double> ref = sum(dy.to(kF64), {0}).to_vector<double>();
      const std::vector<float> got = db.to_vector<float>();
      for (size_t j = 0; j < got.size(); ++j) CHECK(std::fabs(got[j] - ref[j]) <= 2 * kU32 * std::fabs(ref[j]) + 1e-9);
    } else {  // declined: nothing written
      CHECK(dw.to_vector<float>() == std::vector<float>(size_t(n * k), -1.0f));
      CHECK(db.to_vector<float>() == std::vector<float>(size_t(n), -1.0f));
    }
    return fused;
  };
  const bool skinny = lsf::cpu::skinny_gemm_applies(64, 64, 4096);  // false on a CPU without AVX2
  CHECK(attempt(4096, 64, 64) == skinny);
  CHECK(attempt(3000, 256, 200) == skinny);
  CHECK_FALSE(attempt(256, 64, 64));    // one K chunk: the GEMM's own path
  CHECK_FALSE(attempt(4096, 64, 300));  // N > 256: OpenBLAS
  CHECK_FALSE(attempt(4096, 300, 64));  // K > 256: OpenBLAS
}

TEST_CASE("linears: each output is linear's, and x's gradient sums every layer's product", "[matmul][linear]") {
  // Layers of one x: widths with partial vectors, one without a bias, a 3-D x; 700 rows reach
  // the fused weight-gradient path, 40 rows do not, and 2100 rows split it over two threads in
  // K (the bias-less layer then has gemm_kernel's partial sums to match).
  Generator g(59);
  for (const Shape& x_shape : std::vector<Shape>{{2, 350, 64}, {40, 33}, {3, 700, 64}}) {
    INFO("x " << str(x_shape));
    const int64_t k = x_shape.back();
    const std::vector<int64_t> widths = {64, 17, 64, 48};
    Tensor x0 = randn(x_shape, TensorOptions(kF32), &g);
    TensorList w0, b0, dys;
    for (size_t i = 0; i < widths.size(); ++i) {
      w0.push_back(randn({widths[i], k}, TensorOptions(kF32), &g));
      b0.push_back(i == 1 ? Tensor() : randn({widths[i]}, TensorOptions(kF32), &g));
      Shape y_shape = x_shape;
      y_shape.back() = widths[i];
      dys.push_back(randn(y_shape, TensorOptions(kF32), &g));
    }
    auto leaves = [&](TensorList& x, TensorList& w, TensorList& b) {
      x = {x0.detach().requires_grad_(true)};
      for (size_t i = 0; i < widths.size(); ++i) {
        w.push_back(w0[i].detach().requires_grad_(true));
        b.push_back(b0[i].defined() ? b0[i].detach().requires_grad_(true) : Tensor());
      }
    };
    TensorList xf, wf, bf, xs, ws, bs;
    leaves(xf, wf, bf);
    leaves(xs, ws, bs);
    const TensorList fused_out = linears(xf[0], wf, bf);
    TensorList separate_out;
    for (size_t i = 0; i < widths.size(); ++i) separate_out.push_back(linear(xs[0], ws[i], bs[i]));
    autograd::run_backward(fused_out, dys, false);
    autograd::run_backward(separate_out, dys, false);
    for (size_t i = 0; i < widths.size(); ++i) {
      INFO("layer " << i);
      CHECK(fused_out[i].to_vector<float>() == separate_out[i].to_vector<float>());
      CHECK(wf[i].grad().to_vector<float>() == ws[i].grad().to_vector<float>());
      if (bf[i].defined()) CHECK(bf[i].grad().to_vector<float>() == bs[i].grad().to_vector<float>());
    }
    // x's gradient: the same four products pᵢ (each the separate layer's bits), added in layer
    // order here and in autograd's order there. Each order is within three roundings of the
    // exact sum (2^-24 · Σᵢ |pᵢ| each), so the two are within six of each other.
    Tensor magnitude = zeros(x_shape, TensorOptions(kF64));
    for (size_t i = 0; i < widths.size(); ++i) magnitude = add(magnitude, abs(matmul(dys[i].to(kF64), w0[i].to(kF64))));
    const std::vector<double> bound = magnitude.to_vector<double>();
    const std::vector<float> a = xf[0].grad().to_vector<float>(), b = xs[0].grad().to_vector<float>();
    REQUIRE(a.size() == bound.size());
    int64_t outside = 0;
    for (size_t e = 0; e < a.size(); ++e) outside += std::fabs(double(a[e]) - double(b[e])) > 6 * kU32 * bound[e];
    CHECK(outside == 0);
  }
}

TEST_CASE("linears: two layers give x's gradient bit for bit, f64 gradient checks, bad input", "[matmul][linear]") {
  Generator g(60);
  SECTION("two layers: one addition either way") {
    const Operands o = operands({300, 64}, 40, false, 61);
    Tensor w2 = randn({24, 64}, TensorOptions(kF32), &g), dy2 = randn({300, 24}, TensorOptions(kF32), &g);
    Tensor xf = o.x.detach().requires_grad_(true), xs = o.x.detach().requires_grad_(true);
    autograd::run_backward(linears(xf, {o.w, w2}, {o.b, Tensor()}), {o.dy, dy2}, false);
    autograd::run_backward({linear(xs, o.w, o.b), linear(xs, w2, Tensor())}, {o.dy, dy2}, false);
    CHECK(xf.grad().to_vector<float>() == xs.grad().to_vector<float>());
  }
  SECTION("f64 gradient checks in x, every weight and bias") {
    Tensor x = randn({2, 17, 5}, TensorOptions(kF64), &g).requires_grad_(true);
    Tensor w1 = randn({3, 5}, TensorOptions(kF64), &g).requires_grad_(true);
    Tensor b1 = randn({3}, TensorOptions(kF64), &g).requires_grad_(true);
    Tensor w2 = randn({4, 5}, TensorOptions(kF64), &g).requires_grad_(true);
    auto r = testing::gradcheck(
        [](const TensorList& in) {
          const TensorList y = linears(in[0], {in[1], in[3]}, {in[2], Tensor()});
          return add(sum(mul(y[0], y[0])), sum(y[1]));
        },
        {x, w1, b1, w2});
    INFO(r.message);
    CHECK(r.ok);
  }
  SECTION("bad input names the op and what is wrong") {
    Tensor x = zeros({3, 4});
    REQUIRE_THROWS_WITH(linears(x, {}, {}), Catch::Contains("linears") && Catch::Contains("at least one weight"));
    REQUIRE_THROWS_WITH(linears(x, {zeros({2, 4})}, {}), Catch::Contains("one bias"));
    REQUIRE_THROWS_WITH(linears(zeros({4}), {zeros({2, 4})}, {Tensor()}), Catch::Contains("at least 2-D") && Catch::Contains("{4}"));
    REQUIRE_THROWS_WITH(linears(Tensor(), {zeros({2, 4})}, {Tensor()}), Catch::Contains("linears") && Catch::Contains("undefined"));
    REQUIRE_THROWS_WITH(linears(x, {zeros({2, 4}), zeros({2, 5})}, {Tensor(), Tensor()}),
                        Catch::Contains("weight must be [N, K]") && Catch::Contains("{2, 5}"));
  }
}

TEST_CASE("linears groups its layers' products on the CPU: one kernel call for all layers each way", "[matmul][linear]") {
  // The grouped kernels read x (and x's gradient) once for all layers; the test above holds
  // their results to the separate layers' bits. Here: that they are the ones that run, and that
  // a layer they do not take (more than 256 features: OpenBLAS's product) sends all layers back
  // to the per-layer kernels.
  const bool skinny = lsf::cpu::skinny_gemm_applies(700, 64, 64);  // false on a CPU without AVX2
  Generator g(62);
  for (int64_t wide : {int64_t(48), int64_t(300)}) {
    INFO("last layer's width " << wide);
    const bool grouped = skinny && wide <= lsf::cpu::kSkinnyMaxN;
    Tensor x = randn({2, 350, 64}, TensorOptions(kF32), &g).requires_grad_(true);
    TensorList ws, bs;
    for (int64_t n : {int64_t(64), int64_t(17), wide}) {
      ws.push_back(randn({n, 64}, TensorOptions(kF32), &g).requires_grad_(true));
      bs.push_back(n == 17 ? Tensor() : randn({n}, TensorOptions(kF32), &g).requires_grad_(true));
    }
    TensorList ys;
    auto forward = test::kernel_calls([&] { ys = linears(x, ws, bs); });
    CHECK(forward["linears_forward_kernel"] == 1);  // tried either way; declines the wide layer
    CHECK(forward["linear_forward_kernel"] == (grouped ? 0 : 2));
    Tensor loss = add(add(sum(mul(ys[0], ys[0])), sum(ys[1])), sum(ys[2]));
    auto backward = test::kernel_calls([&] { loss.backward(); });
    CHECK(backward["linears_input_grad_kernel"] == 1);
    CHECK(backward["linears_weight_grad_kernel"] == 1);
    if (grouped) CHECK(backward["gemm_kernel"] == 0);
    else CHECK(backward["gemm_kernel"] >= 3);  // at least dx per layer
    if (skinny && !grouped) CHECK(backward["gemm_kernel"] == 5);  // and dW for the 17-wide and the wide layer
  }
}
