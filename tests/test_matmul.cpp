// matmul and bmm: values and gradients against PyTorch (tests/fixtures/matmul_embedding.json)
// in every rank combination, with broadcast batch dims, transposed and strided inputs, in f64
// and f32; every gemm_kernel plan (batch folded into M / N / K, column-major output, reduced
// batch dims, the batch-parallel and partial-sum paths, beta) against a naive product; f64
// gradient checks of every case; and the argument errors.
#include <functional>

#include "helpers.h"
#include "lsformer/ops/kernels/matmul.h"

using namespace lsf;
using testing::gradcheck;

namespace {

const nlohmann::json& fixtures() {
  static const nlohmann::json j = test::load_fixture("matmul_embedding");
  return j;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::fabs(v));
  return m;
}

// Error bound of a product with reduction length L whose inputs are at most m in magnitude:
// a dot product of length L in precision u errs by at most γ_L·Σ|a||b| ≤ L·u/(1 − L·u)·L·m²
// (Higham, Accuracy and Stability, §3.1); inputs first rounded to the working precision (the
// f32 runs of f64 fixtures) add 2u·L·m². With L·u ≪ 1 the sum is below 2·(L + 2)·L·u·m².
double gemm_atol(int64_t L, double m, double u) { return 2.0 * double(L + 2) * double(L) * u * m * m; }
double unit_roundoff(DType t) { return t == kF64 ? 0x1p-53 : 0x1p-24; }

// A leaf holding given values, and a view of it with the same values in a chosen memory layout.
enum class Layout { Contiguous, Transposed, Strided };
const char* layout_name(Layout l) {
  return l == Layout::Contiguous ? "contiguous" : l == Layout::Transposed ? "transposed" : "strided";
}
struct Input {
  Tensor leaf;                                  // requires grad
  Tensor view;                                  // what the op gets
  std::function<Tensor(const Tensor&)> view_of;  // leaf-shaped tensor → view geometry
};
Input make_input(const Tensor& values, Layout layout, DType dtype) {
  Tensor v = values.to(dtype);
  if (layout == Layout::Transposed && v.dim() >= 2) {
    // Column-major storage: the leaf holds the transpose, the view transposes it back.
    Tensor leaf = v.transpose(-1, -2).contiguous().requires_grad_(true);
    auto view_of = [](const Tensor& t) { return t.transpose(-1, -2); };
    return {leaf, view_of(leaf), view_of};
  }
  if (layout == Layout::Strided) {
    // Every other element of a twice-as-wide last dim: unit stride in no dim.
    Shape wide = v.shape();
    const int64_t n = wide.back();
    wide.back() = 2 * n;
    Tensor leaf = zeros(wide, dtype);
    auto view_of = [n](const Tensor& t) { return t.slice(-1, 0, 2 * n, 2); };
    view_of(leaf).copy_(v);
    leaf.requires_grad_(true);
    return {leaf, view_of(leaf), view_of};
  }
  Tensor leaf = v.clone().requires_grad_(true);
  return {leaf, leaf, [](const Tensor& t) { return t; }};
}

// Checks op(a, b), dA and dB against a fixture case in every layout pair and both dtypes.
void check_product_case(const std::string& name, const std::function<Tensor(const Tensor&, const Tensor&)>& op) {
  const auto& f = fixtures()[name];
  const Tensor a = test::fixture_tensor(f["a"]), b = test::fixture_tensor(f["b"]);
  const Tensor g = test::fixture_tensor(f["g"]);
  const double m = std::max({max_abs(a), max_abs(b), max_abs(g)});
  // Reduction lengths: K for the output; for dA and dB every g element that meets one element.
  const int64_t K = a.shape().back();
  const int64_t L_out = K, L_da = g.numel() * K / a.numel(), L_db = g.numel() * K / b.numel();
  for (DType dtype : {kF64, kF32}) {
    const double u = unit_roundoff(dtype);
    for (Layout la : {Layout::Contiguous, Layout::Transposed, Layout::Strided}) {
      for (Layout lb : {Layout::Contiguous, Layout::Transposed, Layout::Strided}) {
        INFO(name << " " << dtype << " a " << layout_name(la) << ", b " << layout_name(lb));
        Input ia = make_input(a, la, dtype), ib = make_input(b, lb, dtype);
        Tensor out = op(ia.view, ib.view);
        CHECK(out.dtype() == dtype);
        test::check_close(out, test::fixture_tensor(f["out"]), gemm_atol(L_out, m, u), 0);
        out.backward(g.to(dtype));
        test::check_close(ia.view_of(ia.leaf.grad()), test::fixture_tensor(f["da"]), gemm_atol(L_da, m, u), 0);
        test::check_close(ib.view_of(ib.leaf.grad()), test::fixture_tensor(f["db"]), gemm_atol(L_db, m, u), 0);
      }
    }
  }
}

const std::vector<std::pair<std::string, std::pair<Shape, Shape>>>& rank_cases() {
  static const std::vector<std::pair<std::string, std::pair<Shape, Shape>>> cases = {
      {"dot", {{5}, {5}}},
      {"matrix_vector", {{3, 4}, {4}}},
      {"vector_matrix", {{4}, {4, 3}}},
      {"matrix_matrix", {{3, 4}, {4, 5}}},
      {"batched_matrix", {{2, 3, 4}, {4, 5}}},
      {"matrix_batched", {{3, 4}, {2, 4, 5}}},
      {"vector_batched", {{4}, {2, 4, 5}}},
      {"batched_vector", {{2, 3, 4}, {4}}},
      {"batched_batched", {{2, 3, 4}, {2, 4, 5}}},
      {"broadcast_batch", {{2, 1, 3, 4}, {5, 4, 6}}},
      {"broadcast_both", {{1, 2, 3, 4}, {3, 1, 4, 2}}},
      {"broadcast_4d_vector", {{2, 1, 3, 4}, {4}}},
  };
  return cases;
}

// The composed reference: a and b (f64, any rank ≥ 1) expanded to their broadcast batch shape
// by the library's views, then multiplied by three loops per batch element.
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  Tensor am = a.dim() == 1 ? a.unsqueeze(0) : a, bm = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t M = am.size(-2), K = am.size(-1), N = bm.size(-1);
  Shape ba(am.shape().begin(), am.shape().end() - 2), bb(bm.shape().begin(), bm.shape().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "naive_matmul");
  Shape sa = batch, sb = batch, sc = batch;
  sa.insert(sa.end(), {M, K});
  sb.insert(sb.end(), {K, N});
  sc.insert(sc.end(), {M, N});
  std::vector<double> av = am.expand(sa).to_vector<double>(), bv = bm.expand(sb).to_vector<double>();
  std::vector<double> cv(size_t(shape_numel(sc)), 0.0);
  for (int64_t p = 0; p < shape_numel(batch); ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += av[size_t((p * M + i) * K + k)] * bv[size_t((p * K + k) * N + j)];
        cv[size_t((p * M + i) * N + j)] = s;
      }
  Shape out = batch;
  if (a.dim() > 1) out.push_back(M);
  if (b.dim() > 1) out.push_back(N);
  return tensor(cv, sc).reshape(out);
}

// matmul(a, b) and its gradients against the composed reference: dA = Σ_broadcast g · Bᵀ and
// dB = Σ_broadcast Aᵀ · g (the naive product, then sum_to the operand's shape).
void check_against_naive(const Tensor& a_values, const Tensor& b_values) {
  Tensor a = a_values.clone().requires_grad_(true), b = b_values.clone().requires_grad_(true);
  Tensor out = matmul(a, b);
  Tensor want = naive_matmul(a_values, b_values);
  const int64_t K = a.shape().back();
  Generator gen(99);
  Tensor g = randn(out.shape(), kF64, &gen);
  const double m = std::max({max_abs(a_values), max_abs(b_values), max_abs(g)});
  const double u = unit_roundoff(kF64);
  test::check_close(out, want, gemm_atol(K, m, u), 0);
  out.backward(g);
  // The reference gradients with 1-D operands viewed as matrices, as in matmul's definition.
  Tensor am = a_values.dim() == 1 ? a_values.unsqueeze(0) : a_values;
  Tensor bm = b_values.dim() == 1 ? b_values.unsqueeze(1) : b_values;
  Shape gm_shape = out.shape();
  if (a_values.dim() == 1) gm_shape.insert(gm_shape.end() - (b_values.dim() == 1 ? 0 : 1), 1);
  if (b_values.dim() == 1) gm_shape.push_back(1);
  Tensor gm = g.reshape(gm_shape);
  Tensor da = sum_to(naive_matmul(gm, bm.transpose(-1, -2)), am.shape()).reshape(a.shape());
  Tensor db = sum_to(naive_matmul(am.transpose(-1, -2), gm), bm.shape()).reshape(b.shape());
  test::check_close(a.grad(), da, gemm_atol(g.numel() * K / a.numel(), m, u), 0);
  test::check_close(b.grad(), db, gemm_atol(g.numel() * K / b.numel(), m, u), 0);
}

// Runs body with the CPU thread count set to n, restoring it afterwards.
void with_threads(int n, const std::function<void()>& body) {
  const test::ThreadCount scoped(n);
  body();
}

}  // namespace

TEST_CASE("matmul matches PyTorch in every rank combination and layout", "[matmul]") {
  for (const auto& [name, shapes] : rank_cases()) check_product_case("matmul_" + name, matmul);
}

TEST_CASE("bmm matches PyTorch in every layout", "[matmul]") { check_product_case("bmm", bmm); }

TEST_CASE("matmul result shapes follow torch.matmul", "[matmul]") {
  auto shape_of = [](Shape sa, Shape sb) { return matmul(zeros(sa, kF64), zeros(sb, kF64)).shape(); };
  CHECK(shape_of({3}, {3}) == Shape{});
  CHECK(shape_of({2, 3}, {3}) == Shape{2});
  CHECK(shape_of({3}, {3, 4}) == Shape{4});
  CHECK(shape_of({2, 1, 3, 4}, {5, 4, 6}) == Shape{2, 5, 3, 6});
  CHECK(shape_of({7, 1, 2, 3}, {3}) == Shape{7, 1, 2});
  CHECK(shape_of({3}, {6, 3, 2}) == Shape{6, 2});
  CHECK(bmm(zeros({4, 2, 3}), zeros({4, 3, 5})).shape() == Shape{4, 2, 5});
}

TEST_CASE("gemm plans agree with a naive product", "[matmul]") {
  Generator gen(7);
  auto r = [&](Shape s) { return randn(s, kF64, &gen); };
  for (int threads : {1, 2}) {
    INFO("threads " << threads);
    with_threads(threads, [&] {
      // Batch folded into M (forward, dA) and into K (dB summed over the batch).
      check_against_naive(r({4, 5, 6}), r({6, 3}));
      check_against_naive(r({2, 3, 5, 6}), r({6, 3}));
      // A broadcast left operand: dA sums small products (the partial-sum path with threads).
      check_against_naive(r({3, 4}), r({64, 4, 5}));
      check_against_naive(r({4}), r({3, 17, 4, 5}));
      // Many small independent products (the batch-parallel path), and a broadcast mix.
      check_against_naive(r({64, 8, 8}), r({64, 8, 8}));
      check_against_naive(r({3, 1, 8, 8}), r({1, 5, 8, 8}));
      // A weight gradient with a long contraction (split over K with threads): K = 4096.
      check_against_naive(r({4, 1024, 16}), r({16, 8}));
      // Larger products: threaded BLAS one after the other.
      check_against_naive(r({2, 96, 80}), r({2, 80, 72}));
      check_against_naive(r({130, 70}), r({70, 90}));
    });
  }
}

TEST_CASE("gemm_kernel: folding into N, a column-major output, alpha and beta", "[matmul]") {
  Generator gen(11);
  // a [3, 1, 4] broadcast over the batch · b [3, 4, 5] stored as [4, 3, 5] (b.permute): the batch
  // dim continues b's columns and c's (c [3, 1, 5] has one row), so the kernel folds it into N.
  Tensor a = randn({1, 4}, kF64, &gen).expand({3, 1, 4});
  Tensor b = randn({4, 3, 5}, kF64, &gen).permute({1, 0, 2});
  Tensor c = full({3, 1, 5}, 2.0, kF64);
  gemm_kernel(kCPU, c, a, b, /*alpha=*/0.5, /*beta=*/3.0);
  Tensor want = add(mul(naive_matmul(a, b), 0.5), 6.0);
  test::check_close(c, want, 1e-14, 0);  // L = 4, |values| < 5: error ≪ 1e-14
  // A column-major c: the kernel computes cᵀ = bᵀ·aᵀ.
  Tensor a2 = randn({2, 6, 7}, kF64, &gen), b2 = randn({2, 7, 5}, kF64, &gen);
  Tensor c_storage = zeros({2, 5, 6}, kF64);
  Tensor c2 = c_storage.transpose(-1, -2);
  gemm_kernel(kCPU, c2, a2, b2, /*alpha=*/1.0, /*beta=*/0.0);
  test::check_close(c2, naive_matmul(a2, b2), 1e-13, 0);  // L = 7, |values| < 5
  // beta = 1 accumulates; a c with stride 0 over the batch sums the products into one matrix.
  Tensor acc = ones({6, 5}, kF64);
  gemm_kernel(kCPU, acc.expand({2, 6, 5}), a2, b2, /*alpha=*/1.0, /*beta=*/1.0);
  test::check_close(acc, add(sum(naive_matmul(a2, b2), {0}), 1.0), 1e-13, 0);
  // K = 0: an empty sum, c = beta · c, whatever the (unread) operands' strides.
  Tensor c0 = full({3, 2}, 5.0, kF64);
  gemm_kernel(kCPU, c0, zeros({1, 0}, kF64).expand({3, 0}), zeros({0, 2}, kF64), /*alpha=*/1.0, /*beta=*/2.0);
  test::check_equal<double>(c0, {3, 2}, std::vector<double>(6, 10.0));
  // Strides BLAS cannot read are refused, not misread.
  Tensor strided = zeros({6, 14}, kF64).slice(-1, 0, 14, 2);
  CHECK_THROWS_WITH(gemm_kernel(kCPU, zeros({6, 5}, kF64), strided, zeros({7, 5}, kF64), 1.0, 0.0),
                    Catch::Contains("gemm") && Catch::Contains("gemm_operand"));
}

TEST_CASE("matmul with empty dimensions gives zeros and zero gradients", "[matmul]") {
  Tensor a = zeros({2, 0}, TensorOptions(kF64).requires_grad(true));
  Tensor b = zeros({0, 3}, TensorOptions(kF64).requires_grad(true));
  Tensor c = matmul(a, b);
  test::check_equal<double>(c, {2, 3}, std::vector<double>(6, 0.0));
  Tensor x = ones({1, 2, 3}, TensorOptions(kF64).requires_grad(true));
  Tensor w = ones({0, 3, 4}, TensorOptions(kF64).requires_grad(true));
  Tensor y = matmul(x, w);
  CHECK(y.shape() == Shape{0, 2, 4});
  sum(y).backward();
  test::check_equal<double>(x.grad(), {1, 2, 3}, std::vector<double>(6, 0.0));
  CHECK(w.grad().shape() == Shape{0, 3, 4});
}

TEST_CASE("matmul gradients pass f64 gradcheck in every rank case", "[matmul]") {
  uint64_t seed = 1;
  for (const auto& [name, shapes] : rank_cases()) {
    INFO(name);
    Tensor a = test::grad_input(shapes.first, seed++), b = test::grad_input(shapes.second, seed++);
    auto r = gradcheck([](const TensorList& in) { return matmul(in[0], in[1]); }, {a, b});
    INFO(r.message);
    CHECK(r.ok);
  }
  // Transposed and strided views handed to BLAS as they are (or copied), gradients through them.
  Tensor a = test::grad_input({4, 3}, 50), b = test::grad_input({2, 5, 8}, 51);
  auto r = gradcheck([](const TensorList& in) {
    return matmul(in[0].t(), in[1].transpose(1, 2).slice(1, 0, 8, 2));
  }, {a, b});
  INFO(r.message);
  CHECK(r.ok);
  // Larger: random projections of the Jacobian.
  Tensor x = test::grad_input({4, 16, 24}, 60), w = test::grad_input({24, 20}, 61);
  auto big = gradcheck([](const TensorList& in) { return matmul(in[0], in[1]); }, {x, w});
  INFO(big.message);
  CHECK(big.ok);
}

TEST_CASE("bmm gradients pass f64 gradcheck", "[matmul]") {
  Tensor a = test::grad_input({3, 2, 4}, 70), b = test::grad_input({3, 4, 5}, 71);
  auto r = gradcheck([](const TensorList& in) { return bmm(in[0], in[1]); }, {a, b});
  INFO(r.message);
  CHECK(r.ok);
  auto rt = gradcheck([](const TensorList& in) { return bmm(in[0], in[1].transpose(1, 2)); },
                      {test::grad_input({2, 3, 4}, 72), test::grad_input({2, 5, 4}, 73)});
  INFO(rt.message);
  CHECK(rt.ok);
}

TEST_CASE("matmul computes only the gradients asked for", "[matmul]") {
  Tensor a = test::grad_input({3, 4}, 80);
  Tensor b = randn({4, 2}, kF64);
  sum(matmul(a, b)).backward();
  CHECK(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
  Tensor c = randn({3, 4}, kF64);
  Tensor d = test::grad_input({4, 2}, 81);
  sum(bmm(c.unsqueeze(0), d.unsqueeze(0))).backward();
  CHECK(d.grad().defined());
  CHECK_FALSE(c.grad().defined());
}

TEST_CASE("matmul and bmm reject bad arguments with the shapes", "[matmul]") {
  CHECK_THROWS_WITH(matmul(zeros({2, 3}), zeros({4, 5})),
                    Catch::StartsWith("matmul: shapes {2, 3} and {4, 5} cannot be multiplied (3 != 4)"));
  CHECK_THROWS_WITH(matmul(zeros({3}), zeros({4})), Catch::Contains("matmul") && Catch::Contains("(3 != 4)"));
  CHECK_THROWS_WITH(matmul(scalar_tensor(2.0), zeros({3})),
                    Catch::Contains("matmul") && Catch::Contains("at least 1 dimension") && Catch::Contains("{3}"));
  CHECK_THROWS_WITH(matmul(zeros({2, 3, 4}), zeros({3, 4, 5})),
                    Catch::Contains("matmul") && Catch::Contains("{2, 3, 4}") && Catch::Contains("broadcast"));
  CHECK_THROWS_WITH(matmul(zeros({2, 3}), zeros({3, 2}, kF64)),
                    Catch::Contains("matmul") && Catch::Contains("dtype"));
  CHECK_THROWS_WITH(matmul(zeros({2, 3}, kI64), zeros({3, 2}, kI64)),
                    Catch::Contains("matmul") && Catch::Contains("i64") && Catch::Contains("not supported") &&
                        Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(matmul(Tensor(), zeros({2})), Catch::Contains("matmul") && Catch::Contains("undefined"));
  CHECK_THROWS_WITH(matmul(zeros({2, 3}, kBF16), zeros({3, 2}, kBF16)),
                    Catch::Contains("matmul") && Catch::Contains("bf16"));
  CHECK_THROWS_WITH(bmm(zeros({2, 3}), zeros({3, 2})),
                    Catch::Contains("bmm") && Catch::Contains("3-D") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(bmm(zeros({2, 2, 3}), zeros({3, 3, 2})),
                    Catch::Contains("bmm") && Catch::Contains("batch") && Catch::Contains("{3, 3, 2}"));
  CHECK_THROWS_WITH(bmm(zeros({2, 2, 3}), zeros({2, 4, 2})),
                    Catch::StartsWith("bmm: shapes {2, 2, 3} and {2, 4, 2} cannot be multiplied (3 != 4)"));
}
