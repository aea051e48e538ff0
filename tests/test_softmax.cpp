// softmax and log_softmax: values and input gradients against PyTorch (fixtures from
// tests/fixtures/gen_norm_loss.py), f64 gradient checks over every dim, the column-tiled
// kernel (softmax over a non-last dim) against the row kernel, invariants (rows sum to 1,
// huge logits stay finite, −inf masks give exact zeros) and bad-input errors; masked_softmax
// against its composition (bit for bit), its f64 gradient check and its errors.
#include <limits>

#include "helpers.h"

using namespace lsf;

namespace {

// Tolerances. An f32 softmax row of n terms is summed in f32 (ours and PyTorch's), each term
// from an exp with relative error ≤ 2^-23: both results are within about (n + 2)·2^-24
// relative of the exact value, so they agree within 4·n·2^-24 (atol covers entries near 0
// and log_softmax's absolute error from log Σ). f64: the same argument with 2^-53, and a
// factor 16 for the exps and the magnitude (≤ 20) of log-probabilities.
double f32_tol(int64_t n) { return 4.0 * double(n) * 0x1p-24; }
double f64_tol(int64_t n) { return 16.0 * double(n + 2) * 0x1p-52; }

double tol_for(const Tensor& x, int64_t n) { return x.dtype() == kF32 ? f32_tol(n) : f64_tol(n); }

Tensor softmax_op(bool log, const Tensor& x, int64_t dim) { return log ? log_softmax(x, dim) : softmax(x, dim); }

}  // namespace

TEST_CASE("softmax and log_softmax match PyTorch, forward and backward", "[softmax]") {
  const auto fixtures = test::load_fixture("norm_loss");
  for (const char* name : {"softmax_2d_last", "softmax_2d_dim0", "softmax_3d_middle", "softmax_3d_first",
                           "softmax_f32_rows", "softmax_f32_columns"}) {
    const auto& c = fixtures.at(name);
    const int64_t dim = c.at("inputs").at("dim").get<int64_t>();
    for (bool log : {false, true}) {
      const std::string op = log ? "log_softmax" : "softmax";
      INFO(name << " " << op << " dim " << dim);
      Tensor x = test::fixture_tensor(c.at("inputs").at("x")).requires_grad_(true);
      Tensor dy = test::fixture_tensor(c.at("inputs").at("dy"));
      const int64_t n = x.size(dim);
      const double tol = tol_for(x, n);
      Tensor y = softmax_op(log, x, dim);
      CHECK(y.dtype() == x.dtype());
      test::check_close(y, test::fixture_tensor(c.at("expected").at(op)), tol, tol);
      y.backward(dy);
      test::check_close(x.grad(), test::fixture_tensor(c.at("expected").at(op + "_dx")), tol, tol);
    }
  }
}

TEST_CASE("softmax gradients pass f64 gradient checks along every dim", "[softmax]") {
  Tensor x = test::grad_input({3, 4, 5}, 11);
  for (bool log : {false, true}) {
    for (int64_t dim : {0, 1, 2, -1, -2}) {
      INFO((log ? "log_softmax" : "softmax") << " dim " << dim);
      auto r = testing::gradcheck([&](const TensorList& in) { return softmax_op(log, in[0], dim); }, {x});
      INFO(r.message);
      CHECK(r.ok);
    }
  }
  // A 0-d tensor: softmax is 1, log_softmax 0, both with zero gradient.
  Tensor s = test::grad_input({}, 3);
  CHECK(softmax(s, 0).item<double>() == 1.0);
  CHECK(log_softmax(s, -1).item<double>() == 0.0);
  CHECK(testing::gradcheck([](const TensorList& in) { return log_softmax(in[0], 0); }, {s}).ok);
  // Larger: more than one column tile (70 positions) and random projections of the Jacobian.
  Tensor big = test::grad_input({4, 30, 70}, 12);
  for (bool log : {false, true})
    for (int64_t dim : {1, 2}) {
      auto r = testing::gradcheck([&](const TensorList& in) { return softmax_op(log, in[0], dim); }, {big});
      INFO((log ? "log_softmax" : "softmax") << " dim " << dim << ": " << r.message);
      CHECK(r.ok);
    }
}

TEST_CASE("softmax over a non-last dim agrees with the row kernel on the transposed tensor", "[softmax]") {
  // [2, 37, 150] over dim 1: 150 positions = three column tiles (64, 64, 22); large enough
  // (11100 elements per sample) to run on several threads.
  Generator g(5);
  for (DType dt : {kF32, kF64}) {
    Tensor x = mul(randn({2, 37, 150}, TensorOptions(kF64), &g), 3.0).to(dt).requires_grad_(true);
    Tensor dy = randn({2, 37, 150}, TensorOptions(kF64), &g).to(dt);
    const double tol = tol_for(x, 37);
    for (bool log : {false, true}) {
      INFO(dt << (log ? " log_softmax" : " softmax"));
      x.set_grad(Tensor());
      Tensor y = softmax_op(log, x, 1);
      y.backward(dy);
      Tensor dx = x.grad();
      // Reference: rows of the transposed copy, transposed back.
      Tensor xr = x.detach().transpose(1, 2).contiguous().requires_grad_(true);
      Tensor yr = softmax_op(log, xr, -1);
      yr.backward(dy.transpose(1, 2).contiguous());
      test::check_close(y, yr.transpose(1, 2).contiguous(), tol, tol);
      test::check_close(dx, xr.grad().transpose(1, 2).contiguous(), tol, tol);
      // A non-contiguous input (a transposed view) gives the same values.
      test::check_close(softmax_op(log, xr.detach().transpose(1, 2), 1), y, 0.0, 0.0);
    }
  }
}

TEST_CASE("softmax invariants: rows sum to one, extreme logits stay finite, masks give zeros", "[softmax]") {
  Generator g(9);
  // 512 rows of 100: parallel over rows. Each row sums to 1 within the f32 sum bound.
  Tensor x = mul(randn({512, 100}, TensorOptions(kF32), &g), 10.0);
  std::vector<double> sums = sum(softmax(x, -1).to(kF64), {1}).to_vector<double>();
  for (double s : sums) CHECK(std::fabs(s - 1.0) <= f32_tol(100));
  // Along dim 0 of a 3-D tensor (column tiles).
  Tensor x3 = randn({6, 5, 200}, TensorOptions(kF32), &g);
  for (double s : sum(softmax(x3, 0).to(kF64), {0}).to_vector<double>()) CHECK(std::fabs(s - 1.0) <= f32_tol(6));

  // Logits far outside exp's range: the max is subtracted first, so nothing overflows.
  // log_softmax = x − (max + log Σ) is then exact up to a few roundings at the magnitude of
  // the largest |value| (2e4), hence atol = tol·2e4.
  for (DType dt : {kF32, kF64}) {
    Tensor huge = tensor(std::vector<double>{1e4, 0.0, -1e4, 1e4 - 1.0}, {4}).to(dt);
    test::check_close(log_softmax(huge, 0), {-std::log1p(std::exp(-1.0)), -1e4 - std::log1p(std::exp(-1.0)),
                                             -2e4 - std::log1p(std::exp(-1.0)), -1.0 - std::log1p(std::exp(-1.0))},
                      tol_for(huge, 4) * 2e4, tol_for(huge, 4));
    std::vector<double> p = softmax(huge, 0).to_vector<double>();
    for (double v : p) CHECK(std::isfinite(v));
    CHECK(p[2] == 0.0);
  }
  // −inf entries (masked attention scores) get probability exactly 0, and no NaN.
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : {kF32, kF64}) {
    Tensor masked = tensor(std::vector<double>{0.5, -inf, 1.5, -inf}, {1, 4}).to(dt);
    std::vector<double> p = softmax(masked, 1).to_vector<double>();
    CHECK(p[1] == 0.0);
    CHECK(p[3] == 0.0);
    CHECK(std::fabs(p[0] + p[2] - 1.0) <= tol_for(masked, 4));
    std::vector<double> lp = log_softmax(masked, 1).to_vector<double>();
    CHECK(lp[1] == -inf);
    CHECK(std::isfinite(lp[0]));
  }
  // NaN poisons its row only, as in PyTorch.
  Tensor with_nan = tensor(std::vector<double>{1.0, NAN, 2.0, 1.0, 2.0, 3.0}, {2, 3});
  std::vector<double> p = softmax(with_nan, 1).to_vector<double>();
  for (int i = 0; i < 3; ++i) CHECK(std::isnan(p[i]));
  for (int i = 3; i < 6; ++i) CHECK(std::isfinite(p[i]));
  // Empty tensors pass through.
  CHECK(softmax(zeros({0, 3}), 1).shape() == Shape{0, 3});
}

namespace {

// The composition masked_softmax replaces: −∞ where keep is false, softmax, and the rows that
// keep nothing zeroed (they would be NaN).
Tensor masked_softmax_reference(const Tensor& x, const Tensor& keep) {
  NoGradGuard no_grad;
  const Tensor drop = eq(keep, 0.0);
  Tensor y = softmax(masked_fill(x, drop, -std::numeric_limits<double>::infinity()), -1);
  const Tensor none_kept = eq(sum(keep.expand(x.shape()).to(kF64), {x.dim() - 1}, true), 0.0);
  return masked_fill(y, none_kept, 0.0);
}

// A bool tensor with about a third false, from a seed.
Tensor random_keep(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return gt(rand(shape, TensorOptions(kF64), &g), 1.0 / 3.0);
}

}  // namespace

TEST_CASE("masked_softmax equals softmax of the −inf-masked logits bit for bit, for every keep layout",
          "[softmax]") {
  // keep broadcast every way the attention layers use it: per (query, key) shared over heads,
  // per key only, per row only (a whole row dropped), and a full mask; rows of 1, 7 and 300 (the
  // vectorised loops' tails), rows that keep nothing.
  struct Case {
    Shape x, keep;
  };
  const Case cases[] = {
      {{2, 3, 5, 7}, {2, 1, 5, 7}}, {{2, 3, 5, 7}, {2, 1, 1, 7}}, {{2, 3, 5, 7}, {2, 1, 5, 1}},
      {{4, 300}, {4, 300}},         {{6, 1}, {6, 1}},             {{3, 9}, {9}},
  };
  Generator g(21);
  for (DType dt : {kF32, kF64}) {
    for (const Case& c : cases) {
      INFO(dtype_name(dt) << " x " << test::str(c.x) << " keep " << test::str(c.keep));
      Tensor x = mul(randn(c.x, TensorOptions(dt), &g), 4.0);
      Tensor keep = random_keep(c.keep, 7 + uint64_t(c.x.back()));
      Tensor y = masked_softmax(x, keep), ref = masked_softmax_reference(x, keep);
      REQUIRE(y.shape() == c.x);
      // Dropped entries enter the same loops as −∞ and 0: the same max, the same sum, the same
      // roundings, so the results are identical, not merely close.
      CHECK(y.to(kF64).to_vector<double>() == ref.to(kF64).to_vector<double>());
      // Every kept row sums to 1 (f32 sum bound); dropped entries are exactly 0.
      std::vector<double> yv = y.to(kF64).to_vector<double>();
      std::vector<double> kv = keep.expand(c.x).to(kF64).contiguous().to_vector<double>();
      const int64_t n = c.x.back();
      for (size_t r = 0; r < yv.size() / size_t(n); ++r) {
        double s = 0, kept = 0;
        for (int64_t i = 0; i < n; ++i) {
          const size_t k = r * size_t(n) + size_t(i);
          if (kv[k] == 0.0) CHECK(yv[k] == 0.0);
          s += yv[k];
          kept += kv[k];
        }
        CHECK(std::fabs(s - (kept > 0 ? 1.0 : 0.0)) <= tol_for(x, n));
      }
    }
  }
}

TEST_CASE("masked_softmax gradients pass f64 gradient checks, and dropped entries get none", "[softmax]") {
  Generator g(22);
  Tensor x = randn({2, 3, 4, 6}, TensorOptions(kF64), &g).requires_grad_(true);
  Tensor keep = random_keep({2, 1, 4, 6}, 5);
  // Row (0, ·, 1) keeps nothing: a zero row whose gradient is zero.
  keep = masked_fill(keep, tensor(std::vector<double>{0, 1, 0, 0}, {1, 1, 4, 1}).to(kBool), 0.0);
  auto r = testing::gradcheck([&](const TensorList& in) { return masked_softmax(in[0], keep); }, {x});
  INFO(r.message);
  CHECK(r.ok);
  Tensor dy = randn({2, 3, 4, 6}, TensorOptions(kF64), &g);
  masked_softmax(x, keep).backward(dy);
  std::vector<double> dx = x.grad().to_vector<double>();
  std::vector<double> kv = keep.expand({2, 3, 4, 6}).to(kF64).contiguous().to_vector<double>();
  for (size_t i = 0; i < dx.size(); ++i)
    if (kv[i] == 0.0) CHECK(dx[i] == 0.0);
}

TEST_CASE("masked_softmax rejects bad input with the op name and shape", "[softmax]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(masked_softmax(x, zeros({2, 3})), Catch::Contains("masked_softmax") && Catch::Contains("bool"));
  CHECK_THROWS_WITH(masked_softmax(x, random_keep({3, 3}, 1)),
                    Catch::Contains("masked_softmax") && Catch::Contains("{3, 3}") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(masked_softmax(tensor(std::vector<int64_t>{1, 2}, {2}), random_keep({2}, 1)),
                    Catch::Contains("masked_softmax") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(masked_softmax(Tensor(), random_keep({2}, 1)), Catch::Contains("masked_softmax"));
}

TEST_CASE("softmax rejects bad input with the op name and shape", "[softmax]") {
  Tensor ints = tensor(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK_THROWS_WITH(softmax(ints, 1), Catch::Contains("softmax") && Catch::Contains("i64") && Catch::Contains("{2, 3}"));
  CHECK_THROWS_WITH(log_softmax(ints, 1), Catch::Contains("log_softmax") && Catch::Contains("{2, 3}"));
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(softmax(x, 2), Catch::Contains("softmax") && Catch::Contains("dimension 2"));
  CHECK_THROWS_WITH(log_softmax(x, -3), Catch::Contains("log_softmax") && Catch::Contains("dimension -3"));
  CHECK_THROWS_WITH(softmax(Tensor(), 0), Catch::Contains("softmax") && Catch::Contains("undefined"));
  CHECK_THROWS_WITH(softmax(zeros({2, 3}, kBF16), 1), Catch::Contains("softmax") && Catch::Contains("bf16"));
}
