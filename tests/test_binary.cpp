// Binary elementwise ops: values against PyTorch (tests/fixtures/core.json), broadcasting,
// float64 gradient checks, comparisons and argument errors.
#include "helpers.h"
#include "lsformer/engine/core_kernels.h"

using namespace lsf;
using testing::gradcheck;

// f64 elementwise results are one correctly rounded operation away from PyTorch's:
// atol = rtol = 4·2⁻⁵³ would do; 1e-14 leaves room for printing/parsing round trips.
constexpr double kF64Tol = 1e-14;

TEST_CASE("binary ops match PyTorch with broadcasting", "[binary]") {
  auto f = test::load_fixture("core")["binary"];
  Tensor a = test::fixture_tensor(f["a"]), b = test::fixture_tensor(f["b"]), c = test::fixture_tensor(f["c"]);
  test::check_close(add(a, b), test::fixture_tensor(f["add"]), kF64Tol, kF64Tol);
  test::check_close(a - b, test::fixture_tensor(f["sub"]), kF64Tol, kF64Tol);
  test::check_close(a * c, test::fixture_tensor(f["mul"]), kF64Tol, kF64Tol);
  test::check_close(a / c, test::fixture_tensor(f["div"]), kF64Tol, kF64Tol);
  test::check_close(a + 2.5, test::fixture_tensor(f["add_scalar"]), kF64Tol, kF64Tol);
  test::check_close(2.5 - a, test::fixture_tensor(f["rsub_scalar"]), kF64Tol, kF64Tol);
  test::check_close(2.0 / c, test::fixture_tensor(f["rdiv_scalar"]), kF64Tol, kF64Tol);
  Tensor less = lt(a, b);
  CHECK(less.dtype() == kBool);
  test::check_close(less, test::fixture_tensor(f["lt"]), 0, 0);
  test::check_close(eq(a, a), test::fixture_tensor(f["eq_self"]), 0, 0);
}

TEST_CASE("binary ops work on integer tensors and on non-contiguous views", "[binary]") {
  Tensor i = arange(6).view({2, 3});
  test::check_equal<int64_t>(add(i, 1.0), {2, 3}, {1, 2, 3, 4, 5, 6});
  test::check_equal<int64_t>(mul(i.t(), 2.0), {3, 2}, {0, 6, 2, 8, 4, 10});
  Tensor x = arange(0.0, 12.0, 1.0, kF32).view({3, 4});
  Tensor col = x.slice(1, 1, 4, 2);  // columns 1 and 3: strided
  test::check_equal<float>(add(col, col), {3, 2}, {2, 6, 10, 14, 18, 22});
  CHECK_THROWS_WITH(add(i, 0.5), Catch::Contains("add") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(div(i, i), Catch::Contains("div") && Catch::Contains("floating"));
}

TEST_CASE("elementwise kernels write permuted and strided outputs element for element", "[binary]") {
  // The CPU loops walk the output's memory order (ops/cpu/loops.h); every element must still
  // get its own inputs. Outputs: a head-split view ([B, n, h, e] memory seen as [B, h, n, e]), a
  // transpose and a strided slice; inputs in other layouts and broadcast.
  const Tensor src = arange(0.0, 120.0, 1.0, TensorOptions(kF64)).view({2, 3, 5, 4});  // logical [B, h, n, e]
  const std::vector<double> want = src.to_vector<double>();
  const std::vector<Tensor> outputs = {
      zeros({2, 5, 3, 4}, TensorOptions(kF64)).permute({0, 2, 1, 3}),
      zeros({4, 5, 3, 2}, TensorOptions(kF64)).permute({3, 2, 1, 0}),
      zeros({2, 3, 5, 8}, TensorOptions(kF64)).slice(3, 0, 8, 2),
  };
  for (const Tensor& out : outputs) {
    INFO("output strides " << out.stride(0) << ", " << out.stride(1) << ", " << out.stride(2) << ", " << out.stride(3));
    REQUIRE(out.shape() == src.shape());
    out.copy_(src);  // contiguous source
    CHECK(out.to_vector<double>() == want);
    out.copy_(src.permute({0, 2, 1, 3}).contiguous().permute({0, 2, 1, 3}));  // head-split source
    CHECK(out.to_vector<double>() == want);
    out.copy_(src.to(kF32));  // converting copy (the map path)
    CHECK(out.to_vector<double>() == want);
    add_inplace_kernel(kCPU, out, src.permute({3, 2, 1, 0}).contiguous().permute({3, 2, 1, 0}));
    std::vector<double> twice(want);
    for (double& v : twice) v *= 2;
    CHECK(out.to_vector<double>() == twice);
    const Tensor row = arange(0.0, 4.0, 1.0, TensorOptions(kF64));  // broadcast along B, h, n
    add_inplace_kernel(kCPU, out, row.expand(src.shape()));
    for (size_t i = 0; i < twice.size(); ++i) twice[i] += double(i % 4);
    CHECK(out.to_vector<double>() == twice);
    out.fill_(3.0);
    CHECK(out.to_vector<double>() == std::vector<double>(want.size(), 3.0));
  }
}

TEST_CASE("elementwise loops over short runs split over threads visit every row once", "[binary]") {
  // dst: a head-split permute of a [B, n, h, e] buffer; src: a narrowed [B, h, n, 2e] one. The
  // loop then runs e = 16 elements at a time over B·h·n = 15465 rows, enough for the parallel
  // path; an odd count, so the threads' shares differ by one, and each share carries its row
  // odometer through two outer dims (ops/cpu/loops.h). Small integers: every sum is exact.
  const int64_t B = 5, n = 1031, h = 3, e = 16;
  const TensorOptions f32(kF32);
  const Tensor src = arange(0.0, double(B * h * n * 2 * e), 1.0, f32).view({B, h, n, 2 * e}).narrow(3, 0, e);
  std::vector<float> want(size_t(B * n * h * e));  // in the [B, n, h, e] buffer's order
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t k = 0; k < h; ++k)
        for (int64_t i = 0; i < e; ++i) {
          const int64_t at = ((b * n + t) * h + k) * e + i;
          want[size_t(at)] = float(at + ((b * h + k) * n + t) * 2 * e + i);
        }
  for (int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    test::ThreadCount scope(threads);
    const Tensor buffer = arange(0.0, double(B * n * h * e), 1.0, f32).view({B, n, h, e});
    add_inplace_kernel(kCPU, buffer.permute({0, 2, 1, 3}), src);
    CHECK(buffer.to_vector<float>() == want);
    // Out of place: the result takes the first input's layout, the same loop.
    const Tensor sum = add(arange(0.0, double(B * n * h * e), 1.0, f32).view({B, n, h, e}).permute({0, 2, 1, 3}), src);
    CHECK(sum.permute({0, 2, 1, 3}).contiguous().to_vector<float>() == want);
  }
}

TEST_CASE("binary ops reject incompatible shapes, dtypes and undefined tensors", "[binary]") {
  Tensor a = zeros({2, 3}), b = zeros({4, 3});
  CHECK_THROWS_WITH(add(a, b), Catch::Contains("add") && Catch::Contains("{2, 3}") && Catch::Contains("{4, 3}"));
  CHECK_THROWS_WITH(mul(a, zeros({2, 3}, kF64)), Catch::Contains("mul") && Catch::Contains("dtype mismatch"));
  CHECK_THROWS_WITH(sub(a, Tensor()), Catch::Contains("sub") && Catch::Contains("undefined"));
  CHECK_THROWS_WITH(add(zeros({2}, kBF16), zeros({2}, kBF16)), Catch::Contains("bf16") && Catch::Contains("to(kF32)"));
}

TEST_CASE("binary ops pass float64 gradient checks, including broadcast inputs", "[binary][gradcheck]") {
  Tensor a = test::grad_input({2, 3, 4}, 1), b = test::grad_input({3, 1}, 2);
  Tensor c = test::grad_input({4}, 3);
  {
    NoGradGuard g;
    c.copy_(add(mul(c, c), 0.5));  // keep the divisor away from 0
  }
  CHECK(gradcheck([](const TensorList& in) { return add(in[0], in[1]); }, {a, b}));
  CHECK(gradcheck([](const TensorList& in) { return sub(in[0], in[1]); }, {a, b}));
  CHECK(gradcheck([](const TensorList& in) { return mul(in[0], in[1]); }, {a, b}));
  CHECK(gradcheck([](const TensorList& in) { return div(in[0], in[1]); }, {a, c}));
  CHECK(gradcheck([](const TensorList& in) { return add(in[0], in[1], -0.5); }, {a, b}));
  CHECK(gradcheck([](const TensorList& in) { return 3.0 / in[0]; }, {c}));
  CHECK(gradcheck([](const TensorList& in) { return -in[0] * 2.0 - 1.0; }, {a}));
}

TEST_CASE("comparisons do not carry gradients", "[binary]") {
  Tensor a = test::grad_input({3}, 4);
  Tensor m = gt(a, 0.0);
  CHECK_FALSE(m.requires_grad());
  CHECK(m.dtype() == kBool);
}
