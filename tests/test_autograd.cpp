// Autograd semantics: accumulation, shared subgraphs, retained non-leaf gradients, grad mode,
// detach, retain_graph, saved tensor versions, and a very deep graph.
#include "helpers.h"

#include "lsformer/engine/autograd.h"
#include "lsformer/engine/profiler.h"

using namespace lsf;

TEST_CASE("leaf gradients accumulate across backward calls", "[autograd]") {
  Tensor x = tensor(std::vector<double>{1, 2, 3}).requires_grad_(true);
  sum(mul(x, x)).backward();
  test::check_equal<double>(x.grad(), {3}, {2, 4, 6});
  sum(mul(x, 3.0)).backward();
  test::check_equal<double>(x.grad(), {3}, {5, 7, 9});
}

TEST_CASE("a tensor used several times gets the sum of its gradients", "[autograd]") {
  Tensor x = tensor(std::vector<double>{2}).requires_grad_(true);
  Tensor y = mul(x, x);              // x used twice in one op
  Tensor z = add(mul(y, x), y);      // y used twice: z = x³ + x²
  sum(z).backward();
  test::check_equal<double>(x.grad(), {1}, {3 * 4 + 2 * 2});
}

TEST_CASE("shared subgraph with two outputs backpropagates once per path", "[autograd]") {
  Tensor x = tensor(std::vector<double>{1, -2}).requires_grad_(true);
  Tensor h = mul(x, 2.0);
  Tensor a = mul(h, h), b = mul(h, 3.0);
  sum(add(a, b)).backward();  // d/dx (4x² + 6x) = 8x + 6
  test::check_equal<double>(x.grad(), {2}, {14, -10});
}

TEST_CASE("retain_grad keeps a non-leaf's summed gradient, across backward calls as a leaf's", "[autograd]") {
  Tensor x = tensor(std::vector<double>{1, -2}).requires_grad_(true);
  Tensor h = mul(x, 2.0);
  h.retain_grad();
  CHECK(h.retains_grad());
  CHECK_FALSE(h.grad().defined());  // retained, but no backward has reached it yet
  Tensor loss = sum(add(mul(h, h), mul(h, 3.0)));  // h used twice: dloss/dh = 2h + 3
  loss.retain_grad();                              // a root keeps its seed gradient
  loss.backward(Tensor(), /*retain_graph=*/true);
  test::check_equal<double>(h.grad(), {2}, {7, -5});
  test::check_equal<double>(loss.grad(), {}, {1});
  test::check_equal<double>(x.grad(), {2}, {14, -10});  // the leaf's gradient is unchanged by retaining
  loss.backward();
  test::check_equal<double>(h.grad(), {2}, {14, -10});
  // A backward that does not pass through h leaves its gradient as it was.
  sum(mul(x, 3.0)).backward();
  test::check_equal<double>(h.grad(), {2}, {14, -10});
}

TEST_CASE("grad of a non-leaf that does not retain it is an error, retain_grad needs a graph", "[autograd]") {
  Tensor x = tensor(std::vector<double>{1, 2}).requires_grad_(true);
  Tensor y = mul(x, x);
  sum(y).backward();
  CHECK_THROWS_WITH(y.grad(), Catch::Contains("not a leaf") && Catch::Contains("mul") &&
                                  Catch::Contains("retain_grad()"));
  Tensor c = tensor(std::vector<double>{1, 2});
  CHECK_THROWS_WITH(c.retain_grad(), Catch::Contains("does not require grad"));
  CHECK_FALSE(c.grad().defined());  // a leaf that never required grad: no gradient, no error
  x.retain_grad();                  // a leaf keeps its gradient anyway: nothing changes
  CHECK_FALSE(x.retains_grad());
  test::check_equal<double>(x.grad(), {2}, {2, 4});
}

TEST_CASE("a retained tensor that dies before backward is skipped", "[autograd]") {
  Tensor x = tensor(std::vector<double>{3}).requires_grad_(true);
  Tensor loss;
  {
    Tensor y = mul(x, x);  // only the graph keeps its node alive after this scope
    y.retain_grad();
    loss = mul(y, 2.0);
  }
  loss.backward();
  test::check_equal<double>(x.grad(), {1}, {12});
}

TEST_CASE("NoGradGuard stops recording and detach cuts the graph", "[autograd]") {
  Tensor x = tensor(std::vector<double>{1, 2}).requires_grad_(true);
  {
    NoGradGuard guard;
    Tensor y = mul(x, x);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
  }
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.storage() == x.storage());  // shares data
  Tensor y = mul(mul(x, d), 1.0);     // only the x path carries gradient: d(x·d)/dx = d
  sum(y).backward();
  test::check_equal<double>(x.grad(), {2}, {1, 2});
}

TEST_CASE("only the gradients that are needed are computed", "[autograd]") {
  Tensor a = tensor(std::vector<double>{1, 2}).requires_grad_(true);
  Tensor b = tensor(std::vector<double>{3, 4});  // constant
  sum(mul(a, b)).backward();
  test::check_equal<double>(a.grad(), {2}, {3, 4});
  CHECK_FALSE(b.grad().defined());
}

TEST_CASE("a second backward through a freed graph is an error, retain_graph allows it", "[autograd]") {
  Tensor x = tensor(std::vector<double>{1, 2}).requires_grad_(true);
  Tensor loss = sum(mul(x, x));
  loss.backward(Tensor(), /*retain_graph=*/true);
  loss.backward();  // allowed: the first kept the graph
  test::check_equal<double>(x.grad(), {2}, {4, 8});
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("second time"));
}

TEST_CASE("backward needs a gradient for non-scalar outputs and a graph", "[autograd]") {
  Tensor x = tensor(std::vector<double>{1, 2}).requires_grad_(true);
  Tensor y = mul(x, 2.0);
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("one-element") && Catch::Contains("{2}"));
  CHECK_THROWS_WITH(y.backward(ones({3}, kF64)), Catch::Contains("does not match"));
  Tensor c = tensor(std::vector<double>{1});
  CHECK_THROWS_WITH(c.backward(), Catch::Contains("does not require grad"));
  y.backward(tensor(std::vector<double>{1, 10}));
  test::check_equal<double>(x.grad(), {2}, {2, 20});
}

TEST_CASE("an in-place write to a saved tensor is detected", "[autograd]") {
  Tensor x = tensor(std::vector<double>{1, 2}).requires_grad_(true);
  Tensor w = tensor(std::vector<double>{3, 4});
  Tensor y = sum(mul(x, w));
  w.fill_(0.0);
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("modified by an in-place operation"));
}

TEST_CASE("in-place writes to tensors that require grad are refused outside NoGradGuard", "[autograd]") {
  Tensor x = zeros({2}, TensorOptions(kF64).requires_grad(true));
  CHECK_THROWS_WITH(x.fill_(1.0), Catch::Contains("NoGradGuard"));
  NoGradGuard g;
  x.fill_(1.0);
  test::check_equal<double>(x, {2}, {1, 1});
}

TEST_CASE("only floating-point tensors can require grad", "[autograd]") {
  Tensor i = arange(3);
  CHECK_THROWS_WITH(i.requires_grad_(true), Catch::Contains("floating-point"));
}

TEST_CASE("a chain of 100000 ops backpropagates and is freed without recursion", "[autograd]") {
  Tensor x = tensor(std::vector<double>{1.0}).requires_grad_(true);
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = add(y, 1e-6);
  sum(y).backward();
  test::check_equal<double>(x.grad(), {1}, {1.0});
  y = Tensor();  // drops the whole chain: must not overflow the stack
  SUCCEED();
}

TEST_CASE("gradients reduce broadcast dimensions back to the input's shape", "[autograd]") {
  Tensor a = ones({2, 3}, TensorOptions(kF64).requires_grad(true));
  Tensor b = tensor(std::vector<double>{1, 2, 3}, {1, 3}).requires_grad_(true);
  Tensor c = tensor(std::vector<double>{5}).requires_grad_(true);  // shape {1}
  sum(mul(add(a, b), c)).backward();
  test::check_equal<double>(a.grad(), {2, 3}, {5, 5, 5, 5, 5, 5});
  test::check_equal<double>(b.grad(), {1, 3}, {10, 10, 10});
  test::check_equal<double>(c.grad(), {1}, {2 + 3 + 4 + 2 + 3 + 4});
}

TEST_CASE("saved tensors are freed by a backward without retain_graph", "[autograd]") {
  Tensor x = randn({1 << 20}).requires_grad_(true);  // 4 MiB
  Tensor loss = sum(mul(exp(x), x));                 // exp's output (4 MiB) lives only in the graph
  const int64_t before = memory_stats().current_bytes;
  loss.backward(Tensor(), /*retain_graph=*/true);
  x.set_grad(Tensor());
  CHECK(memory_stats().current_bytes == before);  // retained: the saved output is still held
  loss.backward();
  x.set_grad(Tensor());
  CHECK(before - memory_stats().current_bytes >= int64_t(4) << 20);
}

// Gradient sums (engine/autograd.cpp, exclusively_held): the first gradient of a slot is added to
// in place when the slot holds the only handle to it, and copied first when anyone else can still
// see it, so a sum never changes a tensor someone holds.
TEST_CASE("gradient sums never write into a gradient someone else holds", "[autograd]") {
  Tensor x = tensor(std::vector<double>{1, 2}).requires_grad_(true);
  Tensor y = mul(x, 1.0);
  // Two consumers of y whose backwards return tensors this test still holds: whichever reaches
  // y's gradient slot first is held elsewhere and must be copied before the other is added.
  Tensor held_a = tensor(std::vector<double>{10, 20}), held_b = tensor(std::vector<double>{1, 2});
  TensorList outs;
  for (const Tensor& held : {held_a, held_b}) {
    Tensor out = empty({2}, y.options());
    {
      NoGradGuard no_grad;
      out.copy_(y);
    }
    autograd::record("returns_held", {y}, {out},
                     [held](const TensorList&, const autograd::NeedsGrad&) -> TensorList { return {held}; });
    outs.push_back(out);
  }
  add(sum(outs[0]), sum(outs[1])).backward();
  test::check_equal<double>(held_a, {2}, {10, 20});  // neither changed by the sum
  test::check_equal<double>(held_b, {2}, {1, 2});
  test::check_equal<double>(x.grad(), {2}, {11, 22});
}

namespace {
int64_t copies_in_backward(const Tensor& loss) { return test::kernel_calls_in_backward(loss, "copy_kernel"); }
}  // namespace

TEST_CASE("a gradient nobody else holds is summed in place, without a copy", "[autograd]") {
  Tensor x = tensor(std::vector<double>{1, 2, 3}).requires_grad_(true);
  Tensor y = mul(x, 2.0);
  // y's slot gets two fresh gradients (from mul's backward): the sum adds into the first, so the
  // backward copies exactly as much as the same graph with one consumer of y (sum's backward).
  const int64_t two_consumers = copies_in_backward(sum(add(mul(y, 3.0), mul(y, 4.0))));
  test::check_equal<double>(x.grad(), {3}, {14, 14, 14});  // 2 · (3 + 4)
  Tensor x1 = tensor(std::vector<double>{1, 2, 3}).requires_grad_(true);
  const int64_t one_consumer = copies_in_backward(sum(add(mul(mul(x1, 2.0), 3.0), 1.0)));
  CHECK(two_consumers == one_consumer);
}

TEST_CASE("a held gradient meeting a fresh one is added into the fresh one, without a copy", "[autograd]") {
  // Two consumers of y: one returns a tensor this test holds (as a slice of a larger gradient is
  // seen by others), the other a fresh one. Whichever reaches y's slot first, the sum goes into
  // the fresh one: no more copies than with two fresh gradients, the held one unchanged.
  auto consumers = [](const Tensor& y, const Tensor& held, bool held_first) {
    TensorList outs;
    for (int i = 0; i < 2; ++i) {
      const bool returns_held = held.defined() && (i == 0) == held_first;
      Tensor out = empty({3}, y.options());
      {
        NoGradGuard no_grad;
        out.copy_(y);
      }
      autograd::record("consumer", {y}, {out}, [=](const TensorList&, const autograd::NeedsGrad&) -> TensorList {
        return {returns_held ? held : tensor(std::vector<double>{1, 2, 3})};
      });
      outs.push_back(out);
    }
    return add(sum(outs[0]), sum(outs[1]));
  };
  Tensor x0 = zeros({3}, TensorOptions(kF64)).requires_grad_(true);
  const int64_t both_fresh = copies_in_backward(consumers(mul(x0, 1.0), Tensor(), false));
  test::check_equal<double>(x0.grad(), {3}, {2, 4, 6});
  for (bool held_first : {true, false}) {
    INFO("the held gradient is the first consumer's: " << held_first);
    Tensor held = tensor(std::vector<double>{10, 20, 30});
    Tensor x = zeros({3}, TensorOptions(kF64)).requires_grad_(true);
    CHECK(copies_in_backward(consumers(mul(x, 1.0), held, held_first)) == both_fresh);
    test::check_equal<double>(x.grad(), {3}, {11, 22, 33});
    test::check_equal<double>(held, {3}, {10, 20, 30});
  }
}

TEST_CASE("a gradient in a permuted dense layout is summed in place, a leaf's .grad stays contiguous", "[autograd]") {
  // Two consumers of y whose backwards return fresh [2, 3] gradients, laid out column-major (as
  // a kernel writes the gradient of a head-split view in that view's layout) or row-major: the
  // sum adds into the first without copying it whatever its layout, so both backwards make the
  // same number of copies.
  auto fresh = [](std::vector<double> values, bool column_major) {  // logical [2, 3] row-major values
    Tensor t = column_major ? empty({3, 2}, TensorOptions(kF64)).t() : empty({2, 3}, TensorOptions(kF64));
    NoGradGuard no_grad;
    t.copy_(tensor(values, {2, 3}));
    return t;
  };
  auto consumers = [&](const Tensor& y, bool column_major) {
    TensorList outs;
    for (double scale : {1.0, 10.0}) {
      Tensor out = empty({2, 3}, y.options());
      {
        NoGradGuard no_grad;
        out.copy_(y);
      }
      autograd::record("returns_fresh", {y}, {out}, [=](const TensorList&, const autograd::NeedsGrad&) -> TensorList {
        return {fresh({scale, 2 * scale, 3 * scale, 4 * scale, 5 * scale, 6 * scale}, column_major)};
      });
      outs.push_back(out);
    }
    return add(sum(outs[0]), sum(outs[1]));
  };
  int64_t copies[2];
  for (bool column_major : {false, true}) {
    INFO("column-major gradients " << column_major);
    Tensor x = zeros({2, 3}, TensorOptions(kF64)).requires_grad_(true);
    copies[column_major] = copies_in_backward(consumers(mul(x, 1.0), column_major));
    test::check_equal<double>(x.grad(), {2, 3}, {11, 22, 33, 44, 55, 66});
    // A leaf fed the same gradients directly: its .grad is contiguous (a user-visible layout).
    Tensor leaf = zeros({2, 3}, TensorOptions(kF64)).requires_grad_(true);
    consumers(leaf, column_major).backward();
    CHECK(leaf.grad().is_contiguous());
    test::check_equal<double>(leaf.grad(), {2, 3}, {11, 22, 33, 44, 55, 66});
  }
  CHECK(copies[true] == copies[false]);
}
