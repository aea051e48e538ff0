// cat, stack, split, pad: values and gradients against PyTorch (tests/fixtures/shape_index.json,
// from gen_shape_index.py), float64 gradient checks of every op and variant, and bad input.
//
// Forward values are pure copies (or the pad value), so they must match exactly; so must the
// gradients, which are copies of slices of the upstream gradient.
#include "helpers.h"

using namespace lsf;
using test::fixture_tensor;

namespace {

const nlohmann::json& fixtures() { return test::cached_fixture("shape_index"); }

constexpr auto& leaf = test::fixture_leaf;

// Backpropagates sum(out · w) with the case's w and checks every input's gradient exactly.
void check_grads(const nlohmann::json& c, const Tensor& out, const std::vector<std::pair<std::string, Tensor>>& inputs) {
  sum(mul(out, fixture_tensor(c.at("w")))).backward();
  for (const auto& [name, t] : inputs) {
    INFO("gradient of " << name);
    REQUIRE(t.grad().defined());
    test::check_close(t.grad(), fixture_tensor(c.at("grad_" + name)), 0.0, 0.0);
  }
}

void check_gradcheck(const testing::SingleFn& fn, const TensorList& inputs) {
  // PyTorch's float64 defaults (eps 1e-6, atol 1e-5, rtol 1e-3): these ops are linear, so the
  // central difference is exact up to rounding (~1e-16 / 1e-6 = 1e-10).
  auto r = testing::gradcheck(fn, inputs);
  INFO(r.message);
  CHECK(r.ok);
}

Tensor constant(const Shape& shape, uint64_t seed) { return test::grad_input(shape, seed).detach(); }

std::string str(const std::vector<int64_t>& v) {
  std::ostringstream os;
  lsf::operator<<(os, v);
  return os.str();
}

}  // namespace

TEST_CASE("cat matches PyTorch, forward and backward", "[shape]") {
  SECTION("last dim, with an empty input") {
    const auto& c = fixtures().at("cat_last");
    Tensor a = leaf(c, "a"), b = leaf(c, "b"), e = leaf(c, "c");
    Tensor out = cat({a, b, e}, -1);
    test::check_close(out, fixture_tensor(c.at("out")), 0.0, 0.0);
    check_grads(c, out, {{"a", a}, {"b", b}, {"c", e}});
  }
  SECTION("middle dim, one input repeated as a constant") {
    const auto& c = fixtures().at("cat_middle");
    Tensor a = leaf(c, "a"), b = leaf(c, "b");
    Tensor out = cat({a, b, a.detach()}, 1);
    test::check_close(out, fixture_tensor(c.at("out")), 0.0, 0.0);
    check_grads(c, out, {{"a", a}, {"b", b}});
  }
}

TEST_CASE("stack matches PyTorch, forward and backward", "[shape]") {
  const auto& c = fixtures().at("stack_1");
  Tensor a = leaf(c, "a"), b = leaf(c, "b"), d = leaf(c, "c");
  Tensor out = stack({a, b, d}, 1);
  CHECK(out.shape() == Shape{2, 3, 3});
  test::check_close(out, fixture_tensor(c.at("out")), 0.0, 0.0);
  check_grads(c, out, {{"a", a}, {"b", b}, {"c", d}});
  const auto& m = fixtures().at("stack_m1");
  test::check_close(stack({fixture_tensor(m.at("a")), fixture_tensor(m.at("b")), fixture_tensor(m.at("c"))}, -1),
                    fixture_tensor(m.at("out")), 0.0, 0.0);
}

TEST_CASE("split matches PyTorch and returns views", "[shape]") {
  const auto& c = fixtures().at("split_size");
  Tensor x = fixture_tensor(c.at("x"));
  TensorList pieces = split(x, 2, 0);
  REQUIRE(pieces.size() == c.at("pieces").size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    test::check_close(pieces[i], fixture_tensor(c.at("pieces")[i]), 0.0, 0.0);
    CHECK(pieces[i].storage() == x.storage());
  }
  CHECK(pieces.back().shape() == Shape{1, 4});
  CHECK(pieces[1].offset() == 2 * 4);

  const auto& s = fixtures().at("split_sizes");
  TensorList parts = split(fixture_tensor(s.at("x")), std::vector<int64_t>{1, 0, 3}, -1);
  REQUIRE(parts.size() == 3);
  for (size_t i = 0; i < parts.size(); ++i) test::check_close(parts[i], fixture_tensor(s.at("pieces")[i]), 0.0, 0.0);

  // An empty dimension gives one empty piece; split_size 0 is allowed only there.
  TensorList empty_pieces = split(zeros({0, 3}), 0, 0);
  REQUIRE(empty_pieces.size() == 1);
  CHECK(empty_pieces[0].shape() == Shape{0, 3});
}

TEST_CASE("pad matches PyTorch, including negative amounts", "[shape]") {
  for (const char* name : {"pad_last", "pad_two_value", "pad_negative"}) {
    INFO(name);
    const auto& c = fixtures().at(name);
    Tensor x = leaf(c, "x");
    std::vector<int64_t> padding = std::string(name) == "pad_last"        ? std::vector<int64_t>{1, 2}
                                   : std::string(name) == "pad_two_value" ? std::vector<int64_t>{1, 0, 2, 1}
                                                                          : std::vector<int64_t>{-1, 2, 0, -2, 1, 0};
    double value = std::string(name) == "pad_two_value" ? 1.5 : 0.0;
    Tensor out = pad(x, padding, value);
    test::check_close(out, fixture_tensor(c.at("out")), 0.0, 0.0);
    check_grads(c, out, {{"x", x}});
  }
}

TEST_CASE("pad edge cases: crop to nothing, no padding, integer tensors", "[shape]") {
  Tensor x = arange(6).view({2, 3});
  CHECK(pad(x, {-3, 0}).shape() == Shape{2, 0});  // a size-0 result is allowed, as in PyTorch
  Tensor same = pad(x, {});
  test::check_equal<int64_t>(same, {2, 3}, {0, 1, 2, 3, 4, 5});
  CHECK_FALSE(same.storage() == x.storage());  // always a new tensor
  test::check_equal<int64_t>(pad(x, {1, -1}, 7.0), {2, 3}, {7, 0, 1, 7, 3, 4});
  test::check_equal<int64_t>(pad(x, {0, 0, 1, 0}, -1.0), {3, 3}, {-1, -1, -1, 0, 1, 2, 3, 4, 5});
  Tensor f = ones({1, 1});
  test::check_equal<float>(pad(f, {1, 1}, -INFINITY), {1, 3}, {-INFINITY, 1.0f, -INFINITY});
}

TEST_CASE("cat and stack handle strided inputs, integer dtypes and repeated inputs", "[shape]") {
  Tensor a = arange(6).view({2, 3});
  Tensor at = a.t();  // [3, 2], not contiguous
  test::check_equal<int64_t>(cat({at, at}, 0), {6, 2}, {0, 3, 1, 4, 2, 5, 0, 3, 1, 4, 2, 5});
  test::check_equal<int64_t>(cat({at, at}, 1), {3, 4}, {0, 3, 0, 3, 1, 4, 1, 4, 2, 5, 2, 5});
  test::check_equal<int64_t>(stack({a, a}, 2), {2, 3, 2}, {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5});
  Tensor one = cat({a});
  CHECK_FALSE(one.storage() == a.storage());

  // The same leaf twice: its gradient is the sum of both slabs.
  Tensor x = tensor(std::vector<double>{1, 2}).requires_grad_(true);
  Tensor out = cat({x, x});
  sum(mul(out, tensor(std::vector<double>{1, 10, 100, 1000}))).backward();
  test::check_equal<double>(x.grad(), {2}, {101, 1010});

  // Nothing records when no input requires grad.
  CHECK_FALSE(cat({ones({2}), ones({3})}).requires_grad());
  NoGradGuard guard;
  CHECK_FALSE(cat({x, x}).requires_grad());
}

TEST_CASE("gradcheck: cat along every dim with only some inputs requiring grad", "[shape]") {
  Tensor a = test::grad_input({2, 3, 4}, 1), b = test::grad_input({2, 3, 4}, 2);
  Tensor k = constant({2, 3, 4}, 3);
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    INFO("dim " << dim);
    Tensor w = constant(cat({a, k, b}, dim).shape(), 4);
    check_gradcheck([&](const TensorList& in) { return mul(cat({in[0], k, in[1]}, dim), w); }, {a, b});
  }
  // Different sizes along the dim, an empty input, and a constant first.
  Tensor c = test::grad_input({2, 1}, 5), e = test::grad_input({2, 0}, 6);
  check_gradcheck([&](const TensorList& in) { return cat({k.select(1, 0), in[0], in[1], in[0]}, 1); }, {c, e});
}

TEST_CASE("gradcheck: stack along every dim", "[shape]") {
  Tensor a = test::grad_input({3, 2}, 7), b = test::grad_input({3, 2}, 8), k = constant({3, 2}, 9);
  for (int64_t dim : {0, 1, 2, -1}) {
    INFO("dim " << dim);
    Tensor w = constant(stack({a, b, k}, dim).shape(), 10);
    check_gradcheck([&](const TensorList& in) { return mul(stack({in[0], k, in[1]}, dim), w); }, {a, b});
  }
}

TEST_CASE("gradcheck: split by size and by sizes", "[shape]") {
  Tensor x = test::grad_input({5, 4}, 11);
  Tensor w = constant({5, 4}, 12);
  // Reassemble the pieces in another order with different weights: every piece's view
  // backward must route its gradient to the right rows.
  check_gradcheck([&](const TensorList& in) {
    TensorList p = split(mul(in[0], w), 2, 0);
    return cat({mul(p[2], 3.0), p[0], mul(p[1], -2.0)}, 0);
  }, {x});
  check_gradcheck([&](const TensorList& in) {
    TensorList p = split(in[0], std::vector<int64_t>{1, 0, 3}, -1);
    return cat({mul(p[2], w.narrow(1, 0, 3)), p[1], p[0]}, 1);
  }, {x});
  // Only one piece used: the others get no gradient.
  check_gradcheck([&](const TensorList& in) { return mul(split(in[0], 3, 1)[1], 2.0); }, {x});
}

TEST_CASE("gradcheck: pad, positive, negative and mixed", "[shape]") {
  Tensor x = test::grad_input({2, 3, 4}, 13);
  for (const auto& padding : std::vector<std::vector<int64_t>>{{1, 2}, {0, 0, 2, 1}, {-1, 2, 0, -2, 1, 0}, {-2, -1}, {3, -4}}) {
    INFO("padding " << str(padding));
    Tensor w = constant(pad(x, padding).shape(), 14);
    check_gradcheck([&](const TensorList& in) { return mul(pad(in[0], padding, 0.5), w); }, {x});
  }
}

TEST_CASE("gradcheck with random projections on a larger cat and pad", "[shape]") {
  Tensor a = test::grad_input({16, 40}, 15), b = test::grad_input({16, 24}, 16);
  Tensor w = constant({16, 64}, 17);
  check_gradcheck([&](const TensorList& in) { return mul(cat({in[0], in[1]}, -1), w); }, {a, b});
  Tensor x = test::grad_input({8, 30, 20}, 18);
  Tensor wp = constant({8, 33, 17}, 19);
  check_gradcheck([&](const TensorList& in) { return mul(pad(in[0], {-1, -2, 2, 1}), wp); }, {x});
}

TEST_CASE("cat and stack reject bad input naming the op and shapes", "[shape]") {
  Tensor a = zeros({2, 3}), b = zeros({2, 4}), c = zeros({2, 3, 1});
  CHECK_THROWS_WITH(cat({}), Catch::Contains("cat") && Catch::Contains("non-empty"));
  CHECK_THROWS_WITH(cat({a, Tensor()}), Catch::Contains("cat") && Catch::Contains("tensor 1") && Catch::Contains("undefined"));
  CHECK_THROWS_WITH(cat({a, b}, 0), Catch::Contains("cat") && Catch::Contains("{2, 3}") && Catch::Contains("{2, 4}"));
  CHECK_THROWS_WITH(cat({a, c}, 0), Catch::Contains("cat") && Catch::Contains("{2, 3, 1}"));
  CHECK_THROWS_WITH(cat({a, zeros({2, 3}, kF64)}), Catch::Contains("cat") && Catch::Contains("f64") && Catch::Contains("f32"));
  CHECK_THROWS_WITH(cat({scalar_tensor(1.0)}), Catch::Contains("cat") && Catch::Contains("0-d"));
  CHECK_THROWS_WITH(cat({a, a}, 2), Catch::Contains("cat") && Catch::Contains("dimension 2"));
  CHECK_THROWS_WITH(cat({a, a}, -3), Catch::Contains("cat") && Catch::Contains("-3"));
  CHECK_THROWS_WITH(cat({zeros({0}), a}), Catch::Contains("cat") && Catch::Contains("{0}"));  // no legacy 1-D empty allowance

  CHECK_THROWS_WITH(stack({}), Catch::Contains("stack") && Catch::Contains("non-empty"));
  CHECK_THROWS_WITH(stack({a, b}), Catch::Contains("stack") && Catch::Contains("{2, 3}") && Catch::Contains("{2, 4}"));
  CHECK_THROWS_WITH(stack({a, a}, 3), Catch::Contains("stack") && Catch::Contains("dimension 3"));
  CHECK_THROWS_WITH(stack({a, zeros({2, 3}, kI64)}), Catch::Contains("stack") && Catch::Contains("i64"));
}

TEST_CASE("split's pieces share one backward: their gradients land in one buffer", "[shape]") {
  // One node for all pieces: x's gradient is one buffer each piece's gradient is copied into
  // (no zero-filled x-sized gradient per piece, no adds); a piece that gets no gradient is zero.
  Tensor x = randn({4, 9}, TensorOptions(kF64)).requires_grad_(true);
  TensorList p = split(x, 3, 1);
  Tensor loss = add(sum(mul(p[0], 2.0)), sum(mul(p[2], 3.0)));
  CHECK(test::kernel_calls_in_backward(loss, "add_inplace_kernel") == 0);
  std::vector<double> expect;
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 9; ++c) expect.push_back(c < 3 ? 2.0 : c < 6 ? 0.0 : 3.0);
  test::check_equal<double>(x.grad(), {4, 9}, expect);
}

TEST_CASE("split and pad reject bad input naming the op and shapes", "[shape]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(split(x, 0, 1), Catch::Contains("split") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(split(x, -1, 1), Catch::Contains("split") && Catch::Contains("-1"));
  CHECK_THROWS_WITH(split(x, std::vector<int64_t>{1, 1}, 1), Catch::Contains("split") && Catch::Contains("{2, 3}") && Catch::Contains("{1, 1}"));
  CHECK_THROWS_WITH(split(x, std::vector<int64_t>{4, -1}, 1), Catch::Contains("split") && Catch::Contains("negative"));
  CHECK_THROWS_WITH(split(x, 1, 2), Catch::Contains("split") && Catch::Contains("dimension 2"));
  CHECK_THROWS_WITH(split(scalar_tensor(1.0), 1), Catch::Contains("split") && Catch::Contains("0-d"));
  CHECK_THROWS_WITH(split(Tensor(), 1), Catch::Contains("split") && Catch::Contains("undefined"));

  CHECK_THROWS_WITH(pad(x, {1}), Catch::Contains("pad") && Catch::Contains("odd") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(pad(x, {1, 1, 1, 1, 1, 1}), Catch::Contains("pad") && Catch::Contains("3 pairs") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(pad(x, {-2, -2}), Catch::Contains("pad") && Catch::Contains("negative output size -1") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(pad(x, {-4, 2}), Catch::Contains("pad") && Catch::Contains("crops") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(pad(arange(3), {1, 1}, 0.5), Catch::Contains("pad") && Catch::Contains("0.5") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(pad(Tensor(), {1, 1}), Catch::Contains("pad") && Catch::Contains("undefined"));
}
