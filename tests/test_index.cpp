// masked_fill, where, gather, index_select: values and gradients against PyTorch
// (tests/fixtures/shape_index.json, from gen_shape_index.py), float64 gradient checks, the
// parallel accumulation paths against a serial reference, and bad input.
#include <cmath>

#include "helpers.h"

using namespace lsf;
using test::fixture_tensor;

namespace {

const nlohmann::json& fixtures() { return test::cached_fixture("shape_index"); }

constexpr auto& leaf = test::fixture_leaf;

// Backpropagates sum(out · w) with the case's w and compares every input's gradient. Each
// gradient element is a sum of at most `terms` products w·1 (repeated indices, broadcast
// dims), added in an order that may differ from PyTorch's: f64 rounding of such a sum is
// below terms · 2^-53 · Σ|w|, and |w| < 5 for these standard-normal draws, so
// atol = 5 · terms² · 2^-53.
void check_grads(const nlohmann::json& c, const Tensor& out, const std::vector<std::pair<std::string, Tensor>>& inputs,
                 int terms) {
  sum(mul(out, fixture_tensor(c.at("w")))).backward();
  const double atol = 5.0 * terms * terms * std::ldexp(1.0, -53);
  for (const auto& [name, t] : inputs) {
    INFO("gradient of " << name);
    REQUIRE(t.grad().defined());
    test::check_close(t.grad(), fixture_tensor(c.at("grad_" + name)), atol, 0.0);
  }
}

void check_gradcheck(const testing::SingleFn& fn, const TensorList& inputs) {
  // PyTorch's float64 defaults (eps 1e-6, atol 1e-5, rtol 1e-3): these ops are linear in the
  // inputs that require grad, so the central difference is exact up to rounding (~1e-10).
  auto r = testing::gradcheck(fn, inputs);
  INFO(r.message);
  CHECK(r.ok);
}

Tensor constant(const Shape& shape, uint64_t seed) { return test::grad_input(shape, seed).detach(); }

// Random i64 indices in [0, high).
Tensor random_index(const Shape& shape, int64_t high, uint64_t seed) {
  Generator g(seed);
  Tensor u = rand(shape, TensorOptions(kF64), &g);
  std::vector<int64_t> v;
  for (double x : u.to_vector<double>()) v.push_back(std::min<int64_t>(int64_t(x * double(high)), high - 1));
  return tensor(v, shape);
}

}  // namespace

TEST_CASE("masked_fill matches PyTorch with a broadcast mask", "[index]") {
  const auto& c = fixtures().at("masked_fill_broadcast");
  Tensor x = leaf(c, "x");
  Tensor mask = fixture_tensor(c.at("mask"));
  REQUIRE(mask.dtype() == kBool);
  Tensor out = masked_fill(x, mask, -1.25);
  test::check_close(out, fixture_tensor(c.at("out")), 0.0, 0.0);  // copies and the fill value: exact
  check_grads(c, out, {{"x", x}}, 1);

  const auto& inf = fixtures().at("masked_fill_inf");
  test::check_close(masked_fill(fixture_tensor(inf.at("x")), fixture_tensor(inf.at("mask")), -INFINITY),
                    fixture_tensor(inf.at("out")), 0.0, 0.0);
}

TEST_CASE("where matches PyTorch with three-way broadcasting", "[index]") {
  const auto& c = fixtures().at("where_broadcast");
  Tensor a = leaf(c, "a"), b = leaf(c, "b");
  Tensor cond = fixture_tensor(c.at("cond"));
  Tensor out = where(cond, a, b);
  CHECK(out.shape() == Shape{2, 3, 4});
  test::check_close(out, fixture_tensor(c.at("out")), 0.0, 0.0);
  check_grads(c, out, {{"a", a}, {"b", b}}, 2 * 4);  // a [3, 1] sums over 2 · 4 positions
}

TEST_CASE("gather matches PyTorch, with repeated indices", "[index]") {
  for (const char* name : {"gather_1", "gather_m1"}) {
    INFO(name);
    const auto& c = fixtures().at(name);
    Tensor x = leaf(c, "x");
    Tensor index = fixture_tensor(c.at("index"));
    REQUIRE(index.dtype() == kI64);
    Tensor out = gather(x, std::string(name) == "gather_1" ? 1 : -1, index);
    test::check_close(out, fixture_tensor(c.at("out")), 0.0, 0.0);
    check_grads(c, out, {{"x", x}}, int(index.size(std::string(name) == "gather_1" ? 1 : -1)));
  }
}

TEST_CASE("index_select matches PyTorch, with repeated indices and i32 indices", "[index]") {
  for (const char* name : {"index_select_0", "index_select_1"}) {
    INFO(name);
    const auto& c = fixtures().at(name);
    const int64_t dim = std::string(name) == "index_select_0" ? 0 : 1;
    Tensor x = leaf(c, "x");
    Tensor index = fixture_tensor(c.at("index"));
    Tensor out = index_select(x, dim, index);
    test::check_close(out, fixture_tensor(c.at("out")), 0.0, 0.0);
    check_grads(c, out, {{"x", x}}, int(index.numel()));
    test::check_close(index_select(x.detach(), dim, index.to(kI32)), fixture_tensor(c.at("out")), 0.0, 0.0);
  }
}

TEST_CASE("selection ops on integer and bool tensors, 0-d inputs and empty indices", "[index]") {
  Tensor x = arange(6).view({2, 3});
  Tensor mask = tensor(std::vector<bool>{true, false, true}, {3});
  test::check_equal<int64_t>(masked_fill(x, mask, -7.0), {2, 3}, {-7, 1, -7, -7, 4, -7});
  test::check_equal<int64_t>(where(mask, x, zeros({1}, kI64)), {2, 3}, {0, 0, 2, 3, 0, 5});
  test::check_equal<int64_t>(gather(x, 1, tensor(std::vector<int64_t>{2, 2, 0}, {1, 3})), {1, 3}, {2, 2, 0});
  test::check_equal<int64_t>(index_select(x, 1, tensor(std::vector<int64_t>{2, 0})), {2, 2}, {2, 0, 5, 3});
  test::check_equal<bool>(index_select(mask, 0, tensor(std::vector<int64_t>{1, 0})), {2}, {false, true});

  // where selects bits, so every element size works: bool (1 byte), f16 (2), i32 (4), and a
  // transposed operand takes the strided path.
  Tensor t2 = tensor(std::vector<bool>{false, true, true}, {3});
  test::check_equal<bool>(where(mask, t2, zeros({3}, kBool)), {3}, {false, false, true});
  test::check_equal<float>(where(mask, ones({3}, kF16), full({3}, -2.5, kF16)).to(kF32), {3}, {1.0f, -2.5f, 1.0f});
  Tensor xi = x.to(kI32);
  test::check_equal<int32_t>(where(tensor(std::vector<bool>{true, false}, {2, 1}), xi.t().contiguous().t(), -xi), {2, 3},
                             {0, 1, 2, -3, -4, -5});
  test::check_equal<int32_t>(where(mask, xi.t().t(), scalar_tensor(9, kI32)), {2, 3}, {0, 9, 2, 3, 9, 5});
  Tensor nan_filled = masked_fill(ones({2}), tensor(std::vector<bool>{false, true}), NAN);
  CHECK(nan_filled.to_vector<float>()[0] == 1.0f);
  CHECK(std::isnan(nan_filled.to_vector<float>()[1]));

  // A 0-d input behaves as one element; a 0-d index of index_select keeps the dim's size 1.
  Tensor s = scalar_tensor(2.5, kF64);
  test::check_equal<double>(gather(s, 0, scalar_tensor(0, kI64)), {}, {2.5});
  test::check_equal<double>(index_select(s, -1, scalar_tensor(0, kI64)), {}, {2.5});
  test::check_equal<int64_t>(index_select(x, 0, scalar_tensor(1, kI64)), {1, 3}, {3, 4, 5});
  CHECK(index_select(x, 1, zeros({0}, kI64)).shape() == Shape{2, 0});
  CHECK(gather(x, 0, zeros({0, 3}, kI64)).shape() == Shape{0, 3});
}

TEST_CASE("gather and its backward accept strided inputs and indices", "[index]") {
  // x^T and a transposed index: compare with the same op on contiguous copies.
  Tensor x = test::grad_input({5, 4}, 21);
  Tensor idx = random_index({3, 4}, 4, 22);  // gathers x.t() [4, 5] along dim 1 with index^T [4, 3]
  Tensor out = gather(x.t(), 1, idx.t());
  Tensor ref = gather(x.detach().t().contiguous(), 1, idx.t().contiguous());
  test::check_close(out, ref, 0.0, 0.0);
  Tensor w = constant({4, 3}, 23);
  sum(mul(out, w)).backward();
  // Serial reference of the scatter: dx^T[i][idx^T[i][j]] += w[i][j].
  std::vector<double> dx(20, 0.0), wv = w.to_vector<double>();
  std::vector<int64_t> iv = idx.t().contiguous().to_vector<int64_t>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) dx[iv[i * 3 + j] * 4 + i] += wv[i * 3 + j];
  test::check_close(x.grad(), dx, 0.0, 0.0);  // same summation order: exact
}

TEST_CASE("gradcheck: masked_fill with a broadcast mask", "[index]") {
  Tensor x = test::grad_input({2, 3, 4}, 31);
  Tensor w = constant({2, 3, 4}, 32);
  for (const Shape& mshape : {Shape{3, 1}, Shape{2, 3, 4}, Shape{4}, Shape{}}) {
    Tensor mask = gt(constant(mshape, 33), 0.0);
    check_gradcheck([&](const TensorList& in) { return mul(masked_fill(in[0], mask, 3.0), w); }, {x});
  }
}

TEST_CASE("gradcheck: where with broadcasting, both or one operand requiring grad", "[index]") {
  Tensor cond = gt(constant({2, 1, 4}, 41), 0.0);
  Tensor a = test::grad_input({3, 1}, 42), b = test::grad_input({2, 3, 4}, 43);
  Tensor w = constant({2, 3, 4}, 44);
  check_gradcheck([&](const TensorList& in) { return mul(where(cond, in[0], in[1]), w); }, {a, b});
  Tensor bc = b.detach();
  check_gradcheck([&](const TensorList& in) { return mul(where(cond, in[0], bc), w); }, {a});
  Tensor ac = a.detach();
  check_gradcheck([&](const TensorList& in) { return mul(where(cond, ac, in[0]), w); }, {b});
  Tensor s = test::grad_input({}, 45);  // a 0-d operand: its gradient sums everything it filled
  check_gradcheck([&](const TensorList& in) { return mul(where(cond, in[0], in[1]), w); }, {s, b});
}

TEST_CASE("gradcheck: gather along every dim with repeated indices", "[index]") {
  Tensor x = test::grad_input({3, 4, 5}, 51);
  for (int64_t dim : {0, 1, 2, -1}) {
    INFO("dim " << dim);
    int64_t d = dim < 0 ? dim + 3 : dim;
    Shape ishape{2, 3, 4};
    ishape[d] = 7;  // longer than x along dim: indices must repeat
    Tensor index = random_index(ishape, x.size(d), 52 + uint64_t(d));
    Tensor w = constant(ishape, 53);
    check_gradcheck([&](const TensorList& in) { return mul(gather(in[0], dim, index), w); }, {x});
  }
}

TEST_CASE("gradcheck: index_select along every dim with repeated indices", "[index]") {
  Tensor x = test::grad_input({3, 4, 5}, 61);
  for (int64_t dim : {0, 1, 2, -2}) {
    INFO("dim " << dim);
    Tensor index = tensor(std::vector<int64_t>{2, 0, 2, 1, 2});
    Shape oshape = x.shape();
    oshape[dim < 0 ? dim + 3 : dim] = 5;
    Tensor w = constant(oshape, 62);
    check_gradcheck([&](const TensorList& in) { return mul(index_select(in[0], dim, index), w); }, {x});
    check_gradcheck([&](const TensorList& in) { return mul(index_select(in[0], dim, index.to(kI32)), w); }, {x});
  }
}

TEST_CASE("parallel gather/scatter_add and index_select/index_add match a serial reference exactly", "[index]") {
  // Large enough (≥ kParallelGrain = 32768 elements) to take the OpenMP paths; each output
  // element is still summed in index order, so the result equals the serial loop bit for bit.
  SECTION("index_select / index_add: embedding-like rows") {
    const int64_t V = 300, C = 96, N = 1000;
    Tensor x = test::grad_input({V, C}, 71);
    Tensor index = random_index({N}, V, 72);
    Tensor w = constant({N, C}, 73);
    Tensor out = index_select(x, 0, index);
    sum(mul(out, w)).backward();
    std::vector<double> xv = x.detach().to_vector<double>(), wv = w.to_vector<double>(), ref(V * C, 0.0);
    std::vector<int64_t> iv = index.to_vector<int64_t>();
    std::vector<double> out_ref;
    for (int64_t j = 0; j < N; ++j)
      for (int64_t c = 0; c < C; ++c) {
        out_ref.push_back(xv[iv[j] * C + c]);
        ref[iv[j] * C + c] += wv[j * C + c];
      }
    test::check_close(out, out_ref, 0.0, 0.0);
    test::check_close(x.grad(), ref, 0.0, 0.0);
  }
  SECTION("gather / scatter_add along the last dim") {
    const int64_t R = 400, K = 50, M = 120;
    Tensor x = test::grad_input({R, K}, 74);
    Tensor index = random_index({R, M}, K, 75);
    Tensor w = constant({R, M}, 76);
    Tensor out = gather(x, 1, index);
    sum(mul(out, w)).backward();
    std::vector<double> xv = x.detach().to_vector<double>(), wv = w.to_vector<double>(), ref(R * K, 0.0);
    std::vector<int64_t> iv = index.to_vector<int64_t>();
    std::vector<double> out_ref;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t m = 0; m < M; ++m) {
        out_ref.push_back(xv[r * K + iv[r * M + m]]);
        ref[r * K + iv[r * M + m]] += wv[r * M + m];
      }
    test::check_close(out, out_ref, 0.0, 0.0);
    test::check_close(x.grad(), ref, 0.0, 0.0);
  }
}

TEST_CASE("gradcheck with random projections on larger gather and index_select", "[index]") {
  Tensor x = test::grad_input({40, 30}, 81);
  Tensor gi = random_index({40, 50}, 30, 82);
  Tensor wg = constant({40, 50}, 83);
  check_gradcheck([&](const TensorList& in) { return mul(gather(in[0], 1, gi), wg); }, {x});
  Tensor si = random_index({70}, 40, 84);
  Tensor ws = constant({70, 30}, 85);
  check_gradcheck([&](const TensorList& in) { return mul(index_select(in[0], 0, si), ws); }, {x});
}

TEST_CASE("masked_fill and where reject bad input naming the op and shapes", "[index]") {
  Tensor x = zeros({2, 3});
  Tensor mask = tensor(std::vector<bool>{true, false, true}, {3});
  CHECK_THROWS_WITH(masked_fill(x, ones({3}), 1.0), Catch::Contains("masked_fill") && Catch::Contains("bool") && Catch::Contains("f32"));
  CHECK_THROWS_WITH(masked_fill(x, tensor(std::vector<bool>{true, false}, {2}), 1.0),
                    Catch::Contains("masked_fill") && Catch::Contains("{2, 3}") && Catch::Contains("{2}"));
  CHECK_THROWS_WITH(masked_fill(zeros({3}), tensor(std::vector<bool>{true, false, true, true, false, true}, {2, 3}), 1.0),
                    Catch::Contains("masked_fill") && Catch::Contains("{2, 3}") && Catch::Contains("does not broadcast"));
  CHECK_THROWS_WITH(masked_fill(arange(3), mask, 0.5), Catch::Contains("masked_fill") && Catch::Contains("0.5") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(masked_fill(Tensor(), mask, 0.0), Catch::Contains("masked_fill") && Catch::Contains("undefined"));

  CHECK_THROWS_WITH(where(ones({3}), x, x), Catch::Contains("where") && Catch::Contains("bool"));
  CHECK_THROWS_WITH(where(mask, x, zeros({2, 3}, kF64)), Catch::Contains("where") && Catch::Contains("f64") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(where(mask, x, zeros({4, 1, 2})), Catch::Contains("where") && Catch::Contains("{4, 1, 2}"));
  CHECK_THROWS_WITH(where(tensor(std::vector<bool>{true, false}, {2}), x, x), Catch::Contains("where") && Catch::Contains("{2}"));
}

TEST_CASE("gather and index_select reject bad input naming the op, shapes and indices", "[index]") {
  Tensor x = zeros({2, 3});
  Tensor idx = tensor(std::vector<int64_t>{0, 2, 1, 0}, {2, 2});
  CHECK_THROWS_WITH(gather(x, 1, idx.to(kI32)), Catch::Contains("gather") && Catch::Contains("i64") && Catch::Contains("i32"));
  CHECK_THROWS_WITH(gather(x, 1, tensor(std::vector<int64_t>{0, 1})), Catch::Contains("gather") && Catch::Contains("{2}") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(gather(x, 1, zeros({3, 1}, kI64)), Catch::Contains("gather") && Catch::Contains("{3, 1}") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(gather(x, 2, idx), Catch::Contains("gather") && Catch::Contains("dimension 2"));
  CHECK_THROWS_WITH(gather(x, 0, idx), Catch::Contains("gather") && Catch::Contains("index 2") && Catch::Contains("size 2"));
  CHECK_THROWS_WITH(gather(x, 1, tensor(std::vector<int64_t>{0, -1}, {1, 2})),
                    Catch::Contains("gather") && Catch::Contains("index -1") && Catch::Contains("size 3"));
  CHECK_THROWS_WITH(gather(x, 1, tensor(std::vector<int64_t>{0, 3}, {1, 2})),
                    Catch::Contains("gather") && Catch::Contains("index 3") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(gather(Tensor(), 0, idx), Catch::Contains("gather") && Catch::Contains("undefined"));

  CHECK_THROWS_WITH(index_select(x, 0, idx), Catch::Contains("index_select") && Catch::Contains("1-D") && Catch::Contains("{2, 2}"));
  CHECK_THROWS_WITH(index_select(x, 0, ones({2})), Catch::Contains("index_select") && Catch::Contains("f32"));
  CHECK_THROWS_WITH(index_select(x, 1, tensor(std::vector<int64_t>{0, 3})),
                    Catch::Contains("index_select") && Catch::Contains("index 3") && Catch::Contains("size 3"));
  CHECK_THROWS_WITH(index_select(x, 0, tensor(std::vector<int32_t>{-1})),
                    Catch::Contains("index_select") && Catch::Contains("index -1") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(index_select(x, -3, tensor(std::vector<int64_t>{0})), Catch::Contains("index_select") && Catch::Contains("-3"));

  // A large out-of-range index in a parallel-sized index tensor still throws, not crashes.
  std::vector<int64_t> big(40000, 1);
  big[39999] = 99;
  CHECK_THROWS_WITH(index_select(zeros({4, 2}), 0, tensor(big)),
                    Catch::Contains("index_select") && Catch::Contains("index 99") && Catch::Contains("size 4"));
}
