// conv2d: forward and backward against PyTorch for stride / padding / dilation / groups /
// depthwise / pointwise configs (tests/fixtures/layers.json, exact dyadic values), against a
// naive double-precision convolution on larger random inputs under both CPU schedules,
// f64 gradient checks of every config, unbatched and empty inputs, and the argument errors.
// Also the nn::Conv2d layer: names, shapes, default initialisation and printing.
#include <algorithm>
#include <sstream>

#include "helpers.h"
#include "lsformer/models/nn/conv2d.h"
#include "lsformer/ops/conv.h"

using namespace lsf;
using testing::gradcheck;

namespace {

const nlohmann::json& fixture() {
  static const nlohmann::json j = test::load_fixture("layers");
  return j;
}

const char* const kConfigs[] = {"conv_basic",          "conv_stride_pad", "conv_dilation_rect",
                                "conv_groups",         "conv_depthwise",  "conv_depthwise_mult",
                                "conv_pointwise",      "conv_pointwise_stride", "conv_kernel_fills_input",
                                "conv_wide_padding"};

Conv2dOptions options_of(const nlohmann::json& c) {
  return {.stride = {c["stride"][0].get<int64_t>(), c["stride"][1].get<int64_t>()},
          .padding = {c["padding"][0].get<int64_t>(), c["padding"][1].get<int64_t>()},
          .dilation = {c["dilation"][0].get<int64_t>(), c["dilation"][1].get<int64_t>()},
          .groups = c["groups"].get<int64_t>()};
}

// Plain loops in double: y, and the convolution of |x| with |w| (for rounding-error bounds).
struct Reference {
  std::vector<double> y, y_abs, dx, dw, db;
};
Reference naive_conv(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy, const Conv2dOptions& o) {
  const Shape xs = x.shape(), ws = w.shape(), ys = dy.shape();
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ws[0], Cg = ws[1], kH = ws[2], kW = ws[3];
  const int64_t Ho = ys[2], Wo = ys[3], Og = O / o.groups;
  const auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), gv = dy.to_vector<double>();
  const auto bv = b.defined() ? b.to_vector<double>() : std::vector<double>(size_t(O), 0.0);
  Reference r;
  r.y.assign(gv.size(), 0.0);
  r.y_abs.assign(gv.size(), 0.0);
  r.dx.assign(xv.size(), 0.0);
  r.dw.assign(wv.size(), 0.0);
  r.db.assign(size_t(O), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < O; ++oc)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const size_t yi = size_t(((n * O + oc) * Ho + oh) * Wo + ow);
          double s = bv[size_t(oc)], sa = std::fabs(bv[size_t(oc)]);
          r.db[size_t(oc)] += gv[yi];
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < kH; ++kh)
              for (int64_t kw = 0; kw < kW; ++kw) {
                const int64_t ih = oh * o.stride.h - o.padding.h + kh * o.dilation.h;
                const int64_t iw = ow * o.stride.w - o.padding.w + kw * o.dilation.w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t c = (oc / Og) * Cg + ci;
                const size_t xi = size_t(((n * C + c) * H + ih) * W + iw);
                const size_t wi = size_t(((oc * Cg + ci) * kH + kh) * kW + kw);
                s += xv[xi] * wv[wi];
                sa += std::fabs(xv[xi] * wv[wi]);
                r.dx[xi] += wv[wi] * gv[yi];
                r.dw[wi] += xv[xi] * gv[yi];
              }
          r.y[yi] = s;
          r.y_abs[yi] = sa;
        }
  return r;
}

std::string str(const Shape& shape) {
  std::ostringstream os;
  os << shape;
  return os.str();
}

// |actual − expected| ≤ bound[i] for every element.
void check_within(const Tensor& actual, const std::vector<double>& expected, const std::vector<double>& bound) {
  const auto a = actual.to_vector<double>();
  REQUIRE(a.size() == expected.size());
  int bad = 0;
  std::ostringstream msg;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - expected[i]) <= bound[i]) && bad++ < 5)
      msg << "  [" << i << "] got " << a[i] << ", expected " << expected[i] << " ± " << bound[i] << "\n";
  INFO("mismatches: " << bad << " of " << a.size() << "\n" << msg.str());
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("conv2d matches PyTorch exactly for every config", "[conv]") {
  // Inputs are dyadic (x, dy: k/4; weight: k/8; bias: k/2; |k| ≤ 4), so every product is a
  // multiple of 2⁻⁵ and every partial sum a multiple of 2⁻⁵ below 2¹⁰ in magnitude: exactly
  // representable in f32 (24-bit significand) and f64, whatever the summation order. Forward
  // and backward are therefore exact: tolerance 0 in both dtypes (these small cases run on one
  // thread whatever the thread count; the next test covers the parallel schedules).
  for (const char* name : kConfigs) {
    const auto& c = fixture()[name];
    const Conv2dOptions o = options_of(c);
    for (int threads : {1, 2}) {
      const test::ThreadCount scoped(threads);
      for (DType dtype : {kF64, kF32}) {
        INFO(name << " " << dtype << " threads " << threads);
        Tensor x = test::fixture_tensor(c["x"]).to(dtype).requires_grad_(true);
        Tensor w = test::fixture_tensor(c["weight"]).to(dtype).requires_grad_(true);
        Tensor b = c.contains("bias") ? test::fixture_tensor(c["bias"]).to(dtype).requires_grad_(true) : Tensor();
        Tensor y = conv2d(x, w, b, o);
        test::check_close(y, test::fixture_tensor(c["y"]), 0, 0);
        y.backward(test::fixture_tensor(c["g"]).to(dtype));
        test::check_close(x.grad(), test::fixture_tensor(c["dx"]), 0, 0);
        test::check_close(w.grad(), test::fixture_tensor(c["dweight"]), 0, 0);
        if (b.defined()) test::check_close(b.grad(), test::fixture_tensor(c["dbias"]), 0, 0);
      }
    }
  }
}

TEST_CASE("conv2d matches a naive convolution on larger inputs under both schedules", "[conv]") {
  struct Case {
    Shape x, w;
    Conv2dOptions o;
  };
  // Few large images (sequential schedule with parallel im2col / col2im when threads > 1), many
  // small ones, a grouped strided dilated one, a depthwise one and a pointwise one (items
  // schedule when threads > 1); every case also runs on one thread (sequential schedule).
  // Cases 1, 6, 7 and 9 (stride 1, padding ≤ dilation·(k − 1)) compute dx as a convolution of
  // dy; the others add dcol back with col2im. Cases 1, 7 and 9 ("same" padding, and so their
  // convolutions of dy) build col with block copies. Cases 7 and 8 have col matrices of several
  // column tiles (K·Wo·4 bytes per output row against the 256 KB tile: 2 and 7 rows per tile,
  // the last tile partial), case 1 too on one thread (14 rows per tile). Case 10 has one input
  // channel per group but 12 outputs each: the GEMM path, not the depthwise loops. Depthwise
  // with stride 1 runs on padded planes in wide rows (cases 4, 11 with a multiplier of 3,
  // dilation and padding larger than the kernel reach, 12 without padding), with stride 2 on
  // the per-row loops (case 13).
  const Case cases[] = {
      {{1, 16, 32, 32}, {32, 16, 3, 3}, {.padding = 1}},
      {{8, 6, 9, 11}, {10, 6, 3, 2}, {.stride = {2, 1}, .padding = {1, 2}}},
      {{6, 8, 24, 20}, {12, 2, 3, 3}, {.stride = 2, .padding = 2, .dilation = 2, .groups = 4}},
      {{2, 16, 20, 20}, {16, 1, 5, 5}, {.padding = 2, .groups = 16}},
      {{2, 32, 16, 16}, {48, 32, 1, 1}, {}},
      {{3, 8, 13, 11}, {6, 4, 3, 2}, {.padding = {1, 0}, .dilation = 2, .groups = 2}},
      {{4, 64, 40, 40}, {8, 64, 3, 3}, {.padding = 1}},
      {{2, 64, 30, 30}, {8, 64, 3, 3}, {.stride = 2, .padding = 1}},
      {{2, 8, 12, 10}, {6, 4, 3, 5}, {.padding = {2, 4}, .dilation = 2, .groups = 2}},
      {{2, 2, 10, 9}, {24, 1, 3, 3}, {.padding = 1, .groups = 2}},
      {{3, 4, 9, 7}, {12, 1, 3, 2}, {.padding = {3, 1}, .dilation = 2, .groups = 4}},
      {{2, 6, 7, 8}, {6, 1, 3, 3}, {.groups = 6}},
      {{2, 8, 11, 11}, {8, 1, 3, 3}, {.stride = 2, .padding = 1, .groups = 8}},
  };
  Generator gen(77);
  for (const Case& k : cases) {
    Tensor x = randn(k.x, kF32, &gen).requires_grad_(true);
    Tensor w = randn(k.w, kF32, &gen).requires_grad_(true);
    Tensor b = randn({k.w[0]}, kF32, &gen).requires_grad_(true);
    const Shape ys = conv2d_output_shape(k.x, k.w, k.o);
    Tensor dy = randn(ys, kF32, &gen);
    const Reference ref = naive_conv(x, w, b, dy, k.o);
    // Rounding: a sum of n terms computed in f32 (any order, FMA or not) differs from the exact
    // sum by at most γₙ·Σ|terms|, γₙ = n·u/(1 − n·u) ≤ 1.01·n·u with u = 2⁻²⁴; the reference
    // itself is exact to f64 rounding (negligible). Forward: n = K + 1 terms (bias included),
    // bounded by the convolution of |x| and |w|.
    const int64_t K = k.w[1] * k.w[2] * k.w[3];
    std::vector<double> fwd_bound(ref.y.size());
    for (size_t i = 0; i < ref.y.size(); ++i) fwd_bound[i] = 1.01 * double(K + 2) * 0x1p-24 * ref.y_abs[i];
    // Backward sums: dweight over N·Ho·Wo terms, dx over O/G·kH·kW terms, dbias over N·Ho·Wo,
    // all of |terms| ≤ max|x|·max|dy| (etc.); a coarser but still derived bound.
    auto max_abs = [](const std::vector<double>& v) {
      double m = 0;
      for (double e : v) m = std::max(m, std::fabs(e));
      return m;
    };
    const auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), gv = dy.to_vector<double>();
    const double n_dw = double(ys[0] * ys[2] * ys[3]), n_dx = double(k.w[0] / k.o.groups * k.w[2] * k.w[3]);
    const double dw_tol = 1.01 * (n_dw + 2) * 0x1p-24 * n_dw * max_abs(xv) * max_abs(gv);
    const double dx_tol = 1.01 * (n_dx + 2) * 0x1p-24 * n_dx * max_abs(wv) * max_abs(gv);
    const double db_tol = 1.01 * (n_dw + 2) * 0x1p-24 * n_dw * max_abs(gv);
    std::vector<float> first_dw;
    for (int threads : {1, 2, 4}) {
      const test::ThreadCount scoped(threads);
      INFO("x " << str(k.x) << " weight " << str(k.w) << " threads " << threads);
      x.set_grad(Tensor());
      w.set_grad(Tensor());
      b.set_grad(Tensor());
      Tensor y = conv2d(x, w, b, k.o);
      check_within(y, ref.y, fwd_bound);
      y.backward(dy);
      check_within(x.grad(), ref.dx, std::vector<double>(ref.dx.size(), dx_tol));
      check_within(w.grad(), ref.dw, std::vector<double>(ref.dw.size(), dw_tol));
      check_within(b.grad(), ref.db, std::vector<double>(ref.db.size(), db_tol));
    }
  }
}

TEST_CASE("conv2d gradients pass f64 gradcheck for every config", "[conv]") {
  uint64_t seed = 100;
  for (const char* name : kConfigs) {
    const auto& c = fixture()[name];
    const Conv2dOptions o = options_of(c);
    INFO(name);
    Tensor x = test::grad_input(test::fixture_tensor(c["x"]).shape(), seed++);
    Tensor w = test::grad_input(test::fixture_tensor(c["weight"]).shape(), seed++);
    TensorList inputs{x, w};
    if (c.contains("bias")) inputs.push_back(test::grad_input({w.size(0)}, seed++));
    auto r = gradcheck(
        [&](const TensorList& in) { return conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), o); }, inputs);
    INFO(r.message);
    CHECK(r.ok);
  }
  // Only some inputs requiring grad (the backward computes just those).
  const auto& c = fixture()["conv_groups"];
  Tensor x = test::grad_input(test::fixture_tensor(c["x"]).shape(), 1);
  Tensor w = test::fixture_tensor(c["weight"]);
  auto rx = gradcheck([&](const TensorList& in) { return conv2d(in[0], w, Tensor(), options_of(c)); }, {x});
  INFO(rx.message);
  CHECK(rx.ok);
  Tensor xc = test::fixture_tensor(c["x"]);
  Tensor wg = test::grad_input(w.shape(), 2);
  auto rw = gradcheck([&](const TensorList& in) { return conv2d(xc, in[0], Tensor(), options_of(c)); }, {wg});
  INFO(rw.message);
  CHECK(rw.ok);
  // A larger case checked through random projections of the Jacobian.
  Tensor xb = test::grad_input({4, 6, 10, 9}, 3), wb = test::grad_input({8, 3, 3, 3}, 4), bb = test::grad_input({8}, 5);
  auto big = gradcheck([&](const TensorList& in) { return conv2d(in[0], in[1], in[2], {.stride = 2, .padding = 1, .groups = 2}); },
                       {xb, wb, bb});
  INFO(big.message);
  CHECK(big.ok);
}

TEST_CASE("conv2d takes unbatched, non-contiguous and empty-batch inputs", "[conv]") {
  Generator gen(9);
  Tensor w = randn({4, 3, 3, 3}, kF64, &gen).requires_grad_(true);
  Tensor b = randn({4}, kF64, &gen);
  Tensor x = randn({3, 6, 5}, kF64, &gen).requires_grad_(true);
  const Conv2dOptions o{.padding = 1};
  Tensor y = conv2d(x, w, b, o);
  REQUIRE(y.shape() == Shape{4, 6, 5});
  test::check_close(y, conv2d(x.unsqueeze(0), w, b, o).squeeze(0), 0, 0);
  sum(y).backward();
  CHECK(x.grad().shape() == Shape{3, 6, 5});

  // A permuted view reads the logical layout.
  Tensor base = randn({2, 5, 6, 3}, kF64, &gen);
  Tensor xp = base.permute({0, 3, 1, 2});  // [2, 3, 5, 6], not contiguous
  test::check_close(conv2d(xp, w, b, o), conv2d(xp.contiguous(), w, b, o), 0, 0);

  // N = 0: an empty output; the weight gradient is zero.
  Tensor empty_x = zeros({0, 3, 5, 5}, kF64);
  Tensor bg = b.clone().requires_grad_(true);
  w.set_grad(Tensor());
  Tensor ye = conv2d(empty_x, w, bg, o);
  CHECK(ye.shape() == Shape{0, 4, 5, 5});
  sum(ye).backward();
  test::check_equal<double>(w.grad(), w.shape(), std::vector<double>(size_t(w.numel()), 0.0));
  test::check_equal<double>(bg.grad(), {4}, {0, 0, 0, 0});
}

TEST_CASE("conv2d rejects bad arguments with the shapes in the message", "[conv]") {
  Tensor x = zeros({2, 3, 5, 5});
  using Catch::Contains;
  CHECK_THROWS_WITH(conv2d(x, zeros({4, 2, 3, 3})),
                    Contains("conv2d") && Contains("{2, 3, 5, 5}") && Contains("{4, 2, 3, 3}") && Contains("channels"));
  CHECK_THROWS_WITH(conv2d(zeros({2, 4, 5, 5}), zeros({6, 2, 3, 3}), Tensor(), {.groups = 4}),
                    Contains("conv2d") && Contains("{6, 2, 3, 3}") && Contains("groups=4"));
  CHECK_THROWS_WITH(conv2d(x, zeros({4, 3, 7, 3})),
                    Contains("conv2d") && Contains("larger than the padded input") && Contains("{2, 3, 5, 5}"));
  CHECK_THROWS_WITH(conv2d(x, zeros({4, 3, 3, 3}), Tensor(), {.dilation = 3}),
                    Contains("conv2d") && Contains("7x7") && Contains("5x5"));
  CHECK_THROWS_WITH(conv2d(x, zeros({4, 3, 3, 3}), Tensor(), {.stride = {1, 0}}),
                    Contains("conv2d") && Contains("stride") && Contains("(1, 0)"));
  CHECK_THROWS_WITH(conv2d(x, zeros({4, 3, 3, 3}), Tensor(), {.padding = -1}),
                    Contains("conv2d") && Contains("padding"));
  CHECK_THROWS_WITH(conv2d(x, zeros({4, 3, 3, 3}), Tensor(), {.groups = 0}), Contains("conv2d") && Contains("groups"));
  CHECK_THROWS_WITH(conv2d(x, zeros({4, 3, 3, 3}), zeros({3})),
                    Contains("conv2d") && Contains("bias") && Contains("{3}"));
  CHECK_THROWS_WITH(conv2d(zeros({3, 5}), zeros({4, 3, 3, 3})), Contains("conv2d") && Contains("{3, 5}"));
  CHECK_THROWS_WITH(conv2d(x, zeros({4, 3, 3})), Contains("conv2d") && Contains("{4, 3, 3}"));
  CHECK_THROWS_WITH(conv2d(x, zeros({4, 3, 3, 3}, kF64)), Contains("conv2d"));
  CHECK_THROWS_WITH(conv2d(zeros({2, 3, 5, 5}, kI64), zeros({4, 3, 3, 3}, kI64)),
                    Contains("conv2d") && Contains("i64"));
  CHECK_THROWS_WITH(conv2d(Tensor(), zeros({4, 3, 3, 3})), Contains("conv2d"));
}

TEST_CASE("nn::Conv2d has PyTorch's parameters, initialisation and printout", "[conv]") {
  manual_seed(3);
  nn::Conv2d conv(6, 8, {3, 2}, {.stride = 2, .padding = {1, 0}, .groups = 2});
  auto params = conv.named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].first == "weight");
  CHECK(params[0].second.shape() == Shape{8, 3, 3, 2});
  CHECK(params[1].first == "bias");
  CHECK(params[1].second.shape() == Shape{8});
  CHECK(conv.parameter_count() == 8 * 3 * 3 * 2 + 8);
  // kaiming_uniform_(a = √5): bound = √(2/(1+5))·√(3/fan_in) = 1/√fan_in, fan_in = 3·3·2 = 18;
  // the bias has the same bound. U(−b, b) draws lie within it (the f32 rounding of b aside).
  const double bound = 1.0 / std::sqrt(18.0);
  for (const auto& [name, p] : params)
    for (float v : p.to_vector<float>()) CHECK(std::fabs(v) <= float(bound));
  CHECK(conv.extra_repr() == "6, 8, kernel_size=(3, 2), stride=(2, 2), padding=(1, 0), groups=2");
  CHECK(nn::Conv2d(3, 4, 1, {}, /*bias=*/false).extra_repr() == "3, 4, kernel_size=(1, 1), stride=(1, 1), bias=false");
  CHECK(!nn::Conv2d(3, 4, 1, {}, false).bias.defined());

  Tensor x = randn({2, 6, 7, 5});
  test::check_close(conv.forward(x), conv2d(x, conv.weight, conv.bias, conv.options()), 0, 0);
  CHECK(conv.forward(x).shape() == Shape{2, 8, 4, 2});  // Ho = (7 + 2 − 3)/2 + 1, Wo = (5 − 2)/2 + 1

  CHECK_THROWS_WITH(nn::Conv2d(6, 8, 3, {.groups = 4}), Catch::Contains("Conv2d") && Catch::Contains("groups=4"));
  CHECK_THROWS_WITH(nn::Conv2d(0, 8, 3), Catch::Contains("Conv2d"));
}
