// View ops (ops/view.cpp) and contiguous/clone (ops/copy.cpp): shapes, strides, offsets and
// storage sharing, values, float64 gradient checks of each op composed with a later op, and
// bad input. Expected geometry follows PyTorch's rules (computeStride for view, Python slice
// bounds, expand's zero strides); values are copies, so they must match exactly.
#include "helpers.h"

using namespace lsf;

namespace {

Tensor constant(const Shape& shape, uint64_t seed) { return test::grad_input(shape, seed).detach(); }

// 0, 1, ..., n-1 as f64 in the given shape.
Tensor iota(const Shape& shape) { return arange(0.0, double(shape_numel(shape)), 1.0, kF64).view(shape); }

// gradcheck of x ↦ view(x) · w, with w of the view's shape, so every Jacobian entry is
// distinct and a wrong routing of the gradient shows.
void check_view_grad(const std::function<Tensor(const Tensor&)>& view, const Shape& input_shape, uint64_t seed) {
  Tensor x = test::grad_input(input_shape, seed);
  Tensor w = constant(view(x.detach()).shape(), seed + 1);
  // PyTorch's float64 defaults (eps 1e-6, atol 1e-5, rtol 1e-3): view ∘ mul is linear, so the
  // central difference is exact up to rounding (~1e-10).
  auto r = testing::gradcheck([&](const TensorList& in) { return mul(view(in[0]), w); }, {x});
  INFO(r.message);
  CHECK(r.ok);
}

}  // namespace

TEST_CASE("view shares storage, infers -1 and follows PyTorch's stride rule", "[view]") {
  Tensor x = iota({2, 3, 4});
  Tensor v = x.view({6, -1});
  CHECK(v.shape() == Shape{6, 4});
  CHECK(v.strides() == Strides{4, 1});
  CHECK(v.storage() == x.storage());
  test::check_equal<double>(v.view({-1}), {24}, x.to_vector<double>());
  // Splitting and merging within a contiguous chunk of a non-contiguous tensor is a view.
  Tensor p = x.permute({1, 0, 2});  // [3, 2, 4], strides {4, 12, 1}
  Tensor q = p.view({3, 2, 2, 2});
  CHECK(q.strides() == Strides{4, 12, 2, 1});
  CHECK(q.storage() == x.storage());
  test::check_equal<double>(q.contiguous().view({-1}), {24}, p.contiguous().view({-1}).to_vector<double>());
  // Size-1 dims may be inserted anywhere.
  CHECK(x.view({1, 2, 1, 12}).strides()[3] == 1);
  CHECK(x.view({2, 12}).offset() == 0);
  CHECK(x.narrow(0, 1, 1).view({3, 4}).offset() == 12);
  CHECK(scalar_tensor(5.0).view({1, 1}).shape() == Shape{1, 1});
  CHECK(ones({1, 1}).view({}).shape() == Shape{});
  CHECK(zeros({0, 3}).view({-1, 3}).shape() == Shape{0, 3});
}

TEST_CASE("reshape is a view when possible and copies otherwise", "[view]") {
  Tensor x = iota({2, 3});
  Tensor r = x.reshape({3, -1});
  CHECK(r.storage() == x.storage());
  test::check_equal<double>(r, {3, 2}, {0, 1, 2, 3, 4, 5});
  Tensor t = x.t();  // [3, 2], not contiguous
  Tensor c = t.reshape({-1});
  CHECK_FALSE(c.storage() == x.storage());
  CHECK(c.is_contiguous());
  test::check_equal<double>(c, {6}, {0, 3, 1, 4, 2, 5});
  CHECK(t.reshape({3, 2}).storage() == x.storage());  // same shape: a view even if strided
}

TEST_CASE("permute, transpose and t move strides, never data", "[view]") {
  Tensor x = iota({2, 3, 4});
  Tensor p = x.permute({2, 0, -2});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.strides() == Strides{1, 12, 4});
  CHECK(p.storage() == x.storage());
  CHECK_FALSE(p.is_contiguous());
  test::check_equal<double>(p.select(0, 1), {2, 3}, {1, 5, 9, 13, 17, 21});
  Tensor tr = x.transpose(-1, 0);
  CHECK(tr.shape() == Shape{4, 3, 2});
  CHECK(tr.strides() == Strides{1, 4, 12});
  Tensor m = iota({2, 3});
  test::check_equal<double>(m.t().contiguous(), {3, 2}, {0, 3, 1, 4, 2, 5});
  CHECK(iota({5}).t().shape() == Shape{5});
  CHECK(scalar_tensor(1.0).t().shape() == Shape{});
}

TEST_CASE("narrow, slice and select pick sub-ranges with Python bounds", "[view]") {
  Tensor x = iota({4, 6});
  Tensor n = x.narrow(1, 2, 3);
  CHECK(n.shape() == Shape{4, 3});
  CHECK(n.offset() == 2);
  CHECK(n.storage() == x.storage());
  test::check_equal<double>(x.narrow(0, -1, 1), {1, 6}, {18, 19, 20, 21, 22, 23});  // negative start
  CHECK(x.narrow(1, 6, 0).shape() == Shape{4, 0});

  Tensor s = x.slice(1, 1, -1, 2);  // columns 1, 3
  CHECK(s.shape() == Shape{4, 2});
  CHECK(s.strides() == Strides{6, 2});
  CHECK(s.offset() == 1);
  test::check_equal<double>(s.select(0, 0), {2}, {1, 3});
  test::check_equal<double>(x.slice(1, -100, 100, 4).select(0, 1), {2}, {6, 10});  // bounds clamp
  test::check_equal<double>(x.slice(1, -2, 6).select(0, 0), {2}, {4, 5});
  CHECK(x.slice(1, 4, 2).shape() == Shape{4, 0});  // end before start: empty
  CHECK(x.slice(0, 1, 4, 2).shape() == Shape{2, 6});
  CHECK(x.slice(0, 0, 4, 3).shape() == Shape{2, 6});  // rows 0 and 3

  Tensor row = x.select(0, -2);
  CHECK(row.shape() == Shape{6});
  CHECK(row.offset() == 12);
  test::check_equal<double>(x.select(1, 5), {4}, {5, 11, 17, 23});
}

TEST_CASE("expand broadcasts with zero strides", "[view]") {
  Tensor x = iota({3, 1});
  Tensor e = x.expand({2, 3, 4});
  CHECK(e.shape() == Shape{2, 3, 4});
  CHECK(e.strides() == Strides{0, 1, 0});
  CHECK(e.storage() == x.storage());
  test::check_equal<double>(e.select(0, 1).select(0, 2), {4}, {2, 2, 2, 2});
  CHECK(x.expand({-1, 5}).shape() == Shape{3, 5});
  CHECK(x.expand({3, 0}).shape() == Shape{3, 0});
  CHECK(x.expand_as(zeros({3, 7})).shape() == Shape{3, 7});
  CHECK(scalar_tensor(2.0).expand({2, 2}).strides() == Strides{0, 0});
}

TEST_CASE("squeeze, unsqueeze and flatten", "[view]") {
  Tensor x = iota({1, 3, 1, 2});
  CHECK(x.squeeze().shape() == Shape{3, 2});
  CHECK(x.squeeze().storage() == x.storage());
  CHECK(x.squeeze(2).shape() == Shape{1, 3, 2});
  CHECK(x.squeeze(-4).shape() == Shape{3, 1, 2});
  CHECK(x.squeeze(1).shape() == x.shape());  // size 3: unchanged
  CHECK(ones({1, 1}).squeeze().shape() == Shape{});

  Tensor y = iota({2, 3});
  CHECK(y.unsqueeze(0).shape() == Shape{1, 2, 3});
  CHECK(y.unsqueeze(-1).shape() == Shape{2, 3, 1});
  CHECK(y.unsqueeze(-1).strides() == Strides{3, 1, 1});
  CHECK(y.unsqueeze(1).strides() == Strides{3, 3, 1});
  CHECK(y.t().unsqueeze(1).strides() == Strides{1, 6, 3});  // as PyTorch: size·stride of the next dim
  CHECK(scalar_tensor(1.0).unsqueeze(0).shape() == Shape{1});

  Tensor z = iota({2, 3, 4, 5});
  CHECK(z.flatten().shape() == Shape{120});
  CHECK(z.flatten(1, 2).shape() == Shape{2, 12, 5});
  CHECK(z.flatten(-2).shape() == Shape{2, 3, 20});
  CHECK(z.flatten(1, 2).storage() == z.storage());
  Tensor zt = z.transpose(1, 2);
  Tensor f = zt.flatten(1, 2);  // not viewable: a copy with the permuted order
  CHECK_FALSE(f.storage() == z.storage());
  test::check_equal<double>(f.select(0, 0).select(1, 0), {12},
                            {0, 20, 40, 5, 25, 45, 10, 30, 50, 15, 35, 55});
  CHECK(scalar_tensor(3.0).flatten().shape() == Shape{1});
}

TEST_CASE("contiguous copies only when needed, clone always copies", "[view]") {
  Tensor x = iota({2, 3});
  CHECK(x.contiguous().is_same(x));
  Tensor t = x.t();
  Tensor c = t.contiguous();
  CHECK_FALSE(c.storage() == x.storage());
  CHECK(c.is_contiguous());
  CHECK(c.strides() == Strides{2, 1});
  test::check_equal<double>(c, {3, 2}, {0, 3, 1, 4, 2, 5});
  Tensor e = iota({3}).expand({2, 3}).contiguous();
  test::check_equal<double>(e, {2, 3}, {0, 1, 2, 0, 1, 2});
  Tensor k = x.clone();
  CHECK_FALSE(k.storage() == x.storage());
  test::check_equal<double>(k, {2, 3}, {0, 1, 2, 3, 4, 5});
  // Size-1 dims with any stride still count as contiguous (as in PyTorch).
  CHECK(x.narrow(0, 1, 1).is_contiguous());
  // A tensor without elements is contiguous whatever its strides, as in PyTorch; a freshly
  // allocated one certainly is.
  CHECK(empty({2, 0, 3}).is_contiguous());
  CHECK(zeros({0, 4}).t().is_contiguous());
}

TEST_CASE("writes through a view reach the base and the other views", "[view]") {
  Tensor x = zeros({3, 4}, kF64);
  x.narrow(1, 1, 2).fill_(1.0);
  x.select(0, 2).slice(0, 0, 4, 3).fill_(5.0);
  x.t().select(0, 3).narrow(0, 0, 1).fill_(7.0);
  test::check_equal<double>(x, {3, 4}, {0, 1, 1, 7, 0, 1, 1, 0, 5, 1, 1, 5});
  Tensor b = zeros({2}, kF64);
  b.view({1, 2}).expand({3, 2}).select(0, 1).fill_(2.0);
  test::check_equal<double>(b, {2}, {2, 2});
}

TEST_CASE("gradcheck: every view op composed with a later op", "[view]") {
  check_view_grad([](const Tensor& x) { return x.view({6, -1}); }, {2, 3, 4}, 1);
  check_view_grad([](const Tensor& x) { return x.permute({1, 0, 2}).view({3, 2, 2, 2}); }, {2, 3, 4}, 3);
  check_view_grad([](const Tensor& x) { return x.reshape({4, -1}); }, {2, 3, 4}, 5);
  check_view_grad([](const Tensor& x) { return x.t().reshape({-1}); }, {3, 4}, 7);  // copy fallback
  check_view_grad([](const Tensor& x) { return x.permute({2, 0, 1}); }, {2, 3, 4}, 9);
  check_view_grad([](const Tensor& x) { return x.transpose(0, -1); }, {2, 3, 4}, 11);
  check_view_grad([](const Tensor& x) { return x.t(); }, {3, 5}, 13);
  check_view_grad([](const Tensor& x) { return x.narrow(1, 1, 2); }, {3, 4}, 15);
  check_view_grad([](const Tensor& x) { return x.narrow(-1, -3, 2); }, {3, 4}, 17);
  check_view_grad([](const Tensor& x) { return x.slice(1, 1, -1, 2); }, {3, 6}, 19);
  check_view_grad([](const Tensor& x) { return x.slice(0, -100, 100, 3); }, {7, 2}, 21);
  check_view_grad([](const Tensor& x) { return x.select(1, -1); }, {3, 4}, 23);
  check_view_grad([](const Tensor& x) { return x.select(0, 1); }, {3, 4}, 25);
  check_view_grad([](const Tensor& x) { return x.expand({2, 3, 4}); }, {3, 1}, 27);
  check_view_grad([](const Tensor& x) { return x.expand({5, -1}); }, {4}, 29);
  check_view_grad([](const Tensor& x) { return x.squeeze(); }, {1, 3, 1, 2}, 31);
  check_view_grad([](const Tensor& x) { return x.squeeze(-2); }, {1, 3, 1, 2}, 33);
  check_view_grad([](const Tensor& x) { return x.unsqueeze(1); }, {3, 2}, 35);
  check_view_grad([](const Tensor& x) { return x.unsqueeze(-1); }, {3, 2}, 37);
  check_view_grad([](const Tensor& x) { return x.flatten(1); }, {2, 3, 4}, 39);
  check_view_grad([](const Tensor& x) { return x.transpose(1, 2).flatten(1, 2); }, {2, 3, 4}, 41);
  check_view_grad([](const Tensor& x) { return x.t().contiguous(); }, {3, 4}, 43);
  check_view_grad([](const Tensor& x) { return x.clone(); }, {3, 4}, 45);
  // A chain of several views, with a view of an expanded tensor in it.
  check_view_grad([](const Tensor& x) {
    return x.unsqueeze(0).expand({2, 3, 4}).transpose(1, 2).slice(1, 1, 4, 2).reshape({2, -1});
  }, {3, 4}, 47);
}

TEST_CASE("a tensor used through several views gets the sum of their gradients", "[view]") {
  Tensor x = tensor(std::vector<double>{1, 2, 3, 4}).requires_grad_(true);
  Tensor y = add(mul(x.view({2, 2}).t().reshape({4}), tensor(std::vector<double>{1, 10, 100, 1000})),
                 x.slice(0, 0, 4, 2).expand({2, 2}).reshape({4}));
  sum(y).backward();
  // t() of [[1,2],[3,4]] flattens as x[0], x[2], x[1], x[3]: weights 1, 100, 10, 1000; the slice
  // picks x[0] and x[2], each used twice by the expand.
  test::check_equal<double>(x.grad(), {4}, {1 + 2, 100, 10 + 2, 1000});
}

TEST_CASE("view ops reject bad input naming the op and shapes", "[view]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(x.t().view({6}), Catch::Contains("view") && Catch::Contains("{3, 2}") && Catch::Contains("reshape"));
  CHECK_THROWS_WITH(x.view({4, -1}), Catch::Contains("view") && Catch::Contains("{4, -1}") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(x.view({-1, -1}), Catch::Contains("view") && Catch::Contains("-1"));
  CHECK_THROWS_WITH(x.view({7}), Catch::Contains("view") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(x.reshape({-2, 3}), Catch::Contains("reshape") && Catch::Contains("-2"));
  CHECK_THROWS_WITH(x.permute({0}), Catch::Contains("permute") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(x.permute({1, 1}), Catch::Contains("permute") && Catch::Contains("repeats"));
  CHECK_THROWS_WITH(x.permute({0, 2}), Catch::Contains("permute") && Catch::Contains("dimension 2"));
  CHECK_THROWS_WITH(x.transpose(0, 2), Catch::Contains("transpose") && Catch::Contains("dimension 2"));
  CHECK_THROWS_WITH(zeros({2, 3, 4}).t(), Catch::Contains("t:") && Catch::Contains("{2, 3, 4}"));
  CHECK_THROWS_WITH(x.narrow(1, 2, 2), Catch::Contains("narrow") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(x.narrow(1, -4, 1), Catch::Contains("narrow"));
  CHECK_THROWS_WITH(x.narrow(0, 0, -1), Catch::Contains("narrow") && Catch::Contains("length -1"));
  CHECK_THROWS_WITH(x.narrow(2, 0, 1), Catch::Contains("narrow") && Catch::Contains("dimension 2"));
  CHECK_THROWS_WITH(x.slice(1, 0, 2, 0), Catch::Contains("slice") && Catch::Contains("step"));
  CHECK_THROWS_WITH(x.slice(1, 0, 2, -1), Catch::Contains("slice") && Catch::Contains("step"));
  CHECK_THROWS_WITH(scalar_tensor(1.0).slice(0, 0, 1), Catch::Contains("slice") && Catch::Contains("0-d"));
  CHECK_THROWS_WITH(x.select(1, 3), Catch::Contains("select") && Catch::Contains("index 3") && Catch::Contains("size 3"));
  CHECK_THROWS_WITH(x.select(0, -3), Catch::Contains("select") && Catch::Contains("-3"));
  CHECK_THROWS_WITH(x.expand({2, 4}), Catch::Contains("expand") && Catch::Contains("{2, 3}") && Catch::Contains("{2, 4}"));
  CHECK_THROWS_WITH(x.expand({3}), Catch::Contains("expand") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(x.expand({-1, 2, 3}), Catch::Contains("expand") && Catch::Contains("-1"));
  CHECK_THROWS_WITH(x.squeeze(2), Catch::Contains("squeeze") && Catch::Contains("dimension 2"));
  CHECK_THROWS_WITH(x.unsqueeze(3), Catch::Contains("unsqueeze") && Catch::Contains("dimension 3"));
  CHECK_THROWS_WITH(x.unsqueeze(-4), Catch::Contains("unsqueeze") && Catch::Contains("-4"));
  CHECK_THROWS_WITH(zeros({2, 3, 4}).flatten(2, 1), Catch::Contains("flatten"));
  CHECK_THROWS_WITH(x.flatten(0, 5), Catch::Contains("flatten") && Catch::Contains("dimension 5"));
  CHECK_THROWS_WITH(Tensor().view({1}), Catch::Contains("undefined"));
  CHECK_THROWS_WITH(Tensor().contiguous(), Catch::Contains("contiguous") && Catch::Contains("undefined"));
}

TEST_CASE("expand rejects negative sizes other than -1 (PyTorch: negative dimension error)", "[view]") {
  // A size-1 dim passes the "have == 1" test for any requested size, so {-2} must be rejected
  // explicitly; otherwise a tensor with a negative size (and a negative numel) is created.
  CHECK_THROWS_WITH(ones({1}).expand({-2}), Catch::Contains("expand") && Catch::Contains("-2"));
  CHECK_THROWS_WITH(ones({2, 1}).expand({2, -3}), Catch::Contains("expand") && Catch::Contains("-3"));
}

TEST_CASE("0-d tensors accept only dims 0 and -1 in transpose, squeeze and flatten (as PyTorch)", "[view]") {
  Tensor s = scalar_tensor(1.0);
  CHECK(s.transpose(0, -1).shape() == Shape{});
  CHECK(s.squeeze(0).shape() == Shape{});
  CHECK(s.flatten(0, -1).shape() == Shape{1});
  CHECK_THROWS_WITH(s.transpose(0, 3), Catch::Contains("transpose") && Catch::Contains("3"));
  CHECK_THROWS_WITH(s.squeeze(2), Catch::Contains("squeeze") && Catch::Contains("2"));
  CHECK_THROWS_WITH(s.flatten(0, 4), Catch::Contains("flatten") && Catch::Contains("4"));
}
