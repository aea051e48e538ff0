// Mixed precision (engine/autocast.h, issue #20): the guard's per-thread state, each product op
// under autocast equal — forward and gradients, bit for bit on the CPU — to its explicit
// composition with 16-bit roundings of the operands and the result, f64 and autocast-off calls
// untouched, and a small LRA model trained under bf16 autocast tracking the f32 run.
#include <bit>
#include <functional>
#include <limits>
#include <thread>

#include "helpers.h"
#include "lsformer/engine/autocast.h"
#include "lsformer/engine/core_kernels.h"

using namespace lsf;
using Catch::Contains;

namespace {

// t's value rounded to `low` (round to nearest even), as f32: what autocast does to an operand
// and to a result on the CPU.
Tensor rounded(const Tensor& t, DType low) { return t.defined() ? t.to(low).to(kF32) : t; }

Tensor leaf(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return mul(randn(shape, TensorOptions(kF32), &g), scale).detach().requires_grad_(true);
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// op(operands) under AutocastGuard(low) against rounded(op(rounded(operands))) without it: the
// output and every operand's gradient (for one random output gradient) bit for bit; and the
// autocast output differs from the plain f32 one somewhere (so the rounding did happen).
void check_like_composition(const std::function<Tensor(const TensorList&)>& op, const TensorList& operands, DType low) {
  auto fresh = [&] {
    TensorList copies;
    for (const Tensor& t : operands) copies.push_back(t.detach().clone().requires_grad_(true));
    return copies;
  };
  TensorList a = fresh(), b = fresh(), c = fresh();
  Tensor ya;
  {
    AutocastGuard autocast(low);
    ya = op(a);
  }
  TensorList rb;
  for (const Tensor& t : b) rb.push_back(rounded(t, low));
  const Tensor yb = rounded(op(rb), low);
  const Tensor yc = op(c);
  CHECK(ya.dtype() == kF32);
  CHECK(values(ya) == values(yb));
  CHECK(values(ya) != values(yc));
  Generator g(99);
  const Tensor dy = randn(ya.shape(), TensorOptions(kF32), &g);
  ya.backward(dy);
  yb.backward(dy);
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("gradient of operand " << i);
    REQUIRE(a[i].grad().defined());
    CHECK(values(a[i].grad()) == values(b[i].grad()));
  }
}

}  // namespace

TEST_CASE("AutocastGuard: per thread, nested, restored, only bf16, f16 or f32", "[autocast]") {
  CHECK(autocast_dtype() == kF32);
  CHECK_FALSE(autocast_enabled());
  {
    AutocastGuard outer(kBF16);
    CHECK(autocast_dtype() == kBF16);
    {
      AutocastGuard off(kF32);
      CHECK_FALSE(autocast_enabled());
      AutocastGuard inner(kF16);
      CHECK(autocast_dtype() == kF16);
    }
    CHECK(autocast_dtype() == kBF16);
    DType seen = kBF16;
    std::thread([&] { seen = autocast_dtype(); }).join();
    CHECK(seen == kF32);  // another thread's state is its own
  }
  CHECK(autocast_dtype() == kF32);
  CHECK_THROWS_WITH(AutocastGuard(kF64), Contains("AutocastGuard: the dtype must be bf16 or f16 (on) or f32 (off), got f64"));
  CHECK_THROWS_WITH(AutocastGuard(kI64), Contains("got i64"));
}

TEST_CASE("round_to_kernel: the bits of to(low).to(kF32), special values and strided views included", "[autocast]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Ties either way for bf16 (1 + 2^-8, 1 + 3·2^-8), the largest finite f32 (rounds to inf in
  // both formats), f16's overflow and subnormals, signed zeros, infinities, a NaN, and 70 random
  // values (more than a vector's lanes, with a remainder).
  std::vector<float> specials{1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-8f), 3.4028235e38f, 65520.0f,
                              0x1p-20f, 0x1p-130f, 0.0f, -0.0f, inf, -inf, nan};
  Generator g(7);
  for (float v : values(mul(randn({70}, TensorOptions(kF32), &g), 100.0))) specials.push_back(v);
  const Tensor src = tensor(specials, {int64_t(specials.size())});
  // A strided view too: every other element of a [n, 2] tensor's column.
  const Tensor wide = stack({src, src}, 1), strided = wide.select(1, 1);
  REQUIRE_FALSE(strided.is_contiguous());
  for (DType low : {kBF16, kF16})
    for (const Tensor& x : {src, strided}) {
      INFO(dtype_name(low) << (x.is_contiguous() ? ", contiguous" : ", strided"));
      Tensor out = empty(x.shape(), TensorOptions(kF32));
      round_to_kernel(kCPU, out, x, low);
      const std::vector<float> got = values(out), want = values(rounded(x.detach(), low));
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("element " << i << ": " << specials[i]);
        if (std::isnan(want[i])) CHECK(std::isnan(got[i]));
        else CHECK(std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]));
      }
    }
  // Anything but two f32 tensors of one shape, rounded to bf16 or f16, is an error naming it.
  Tensor out = empty(src.shape(), TensorOptions(kF32));
  CHECK_THROWS_WITH(round_to_kernel(kCPU, out, src.to(kF64), kBF16), Contains("expected two f32 tensors"));
  CHECK_THROWS_WITH(round_to_kernel(kCPU, out, src.narrow(0, 0, 3), kBF16), Contains("of one shape"));
  CHECK_THROWS_WITH(round_to_kernel(kCPU, out, src, kF64), Contains("must be bf16 or f16"));
}

TEST_CASE("under autocast the product ops equal their composition with 16-bit roundings", "[autocast]") {
  for (DType low : {kBF16, kF16}) {
    INFO(dtype_name(low));

    {
      INFO("matmul, with batch broadcasting");
      check_like_composition([](const TensorList& t) { return matmul(t[0], t[1]); },
                             {leaf({2, 5, 7}, 1), leaf({7, 3}, 2)}, low);
    }
    {
      INFO("bmm");
      check_like_composition([](const TensorList& t) { return bmm(t[0], t[1]); }, {leaf({3, 4, 6}, 3), leaf({3, 6, 5}, 4)},
                             low);
    }
    {
      INFO("linear with bias");
      check_like_composition([](const TensorList& t) { return linear(t[0], t[1], t[2]); },
                             {leaf({2, 9, 8}, 5), leaf({6, 8}, 6), leaf({6}, 7)}, low);
    }
    {
      INFO("linears (grouped), every output");
      for (int which = 0; which < 2; ++which)
        check_like_composition(
            [which](const TensorList& t) { return linears(t[0], {t[1], t[2]}, {t[3], Tensor()})[size_t(which)]; },
            {leaf({2, 9, 8}, 8), leaf({6, 8}, 9), leaf({4, 8}, 10), leaf({6}, 11)}, low);
    }
    {
      INFO("conv2d");
      Conv2dOptions o;
      o.stride = 2;
      o.padding = 1;
      check_like_composition([o](const TensorList& t) { return conv2d(t[0], t[1], t[2], o); },
                             {leaf({2, 3, 9, 9}, 12), leaf({4, 3, 3, 3}, 13), leaf({4}, 14)}, low);
    }
    {
      INFO("long_short_attention (window and projected slots, padded)");
      const Tensor mask = ne(tensor(std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 8}), 0.0);
      LongShortAttentionOptions o;
      o.window = 2;
      o.q_scale = 0.5;
      check_like_composition(
          [&](const TensorList& t) { return long_short_attention(t[0], t[1], t[2], t[3], t[4], mask, o); },
          {leaf({2, 2, 8, 4}, 15), leaf({2, 2, 8, 4}, 16), leaf({2, 2, 8, 4}, 17), leaf({2, 2, 3, 4}, 18),
           leaf({2, 2, 3, 4}, 19)},
          low);
    }
    {
      INFO("causal_long_short_attention (B 1, h 2, M 16, e 4, w 8, l 4, r 1, 2 memory chunks)");
      const int64_t B = 1, h = 2, M = 16, e = 4, w = 8, Nc = (2 + M / 4) * 1;
      const CausalLongShortGeometry geometry{4, 1, 2};
      check_like_composition(
          [&](const TensorList& t) {
            return causal_long_short_attention({t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8]}, geometry);
          },
          {leaf({B, h, M, e}, 20, 0.5), leaf({B, h, w + M, e}, 21), leaf({B, h, w + M, e}, 22), leaf({h, e}, 23, 0.1),
           leaf({h, e}, 24, 0.1), leaf({h, w, e}, 25), leaf({B, h, Nc, e}, 26), leaf({B, h, Nc, e}, 27), leaf({h, Nc, e}, 28)},
          low);
    }
  }
}

TEST_CASE("autocast leaves f64 and 16-bit operands, and calls outside a guard, as they are", "[autocast]") {
  Generator g(3);
  const Tensor a = randn({4, 5}, TensorOptions(kF64), &g), b = randn({5, 3}, TensorOptions(kF64), &g);
  const Tensor plain = matmul(a, b);
  Tensor under;
  {
    AutocastGuard autocast(kBF16);
    under = matmul(a, b);
  }
  CHECK(under.dtype() == kF64);
  CHECK(under.to_vector<double>() == plain.to_vector<double>());
  // After the guard, f32 products are plain again.
  const Tensor x = randn({4, 5}, TensorOptions(kF32), &g), y = randn({5, 3}, TensorOptions(kF32), &g);
  const Tensor before = matmul(x, y);
  { AutocastGuard autocast(kBF16); }
  CHECK(values(matmul(x, y)) == values(before));
}

TEST_CASE("a small LRA model trained 50 steps under bf16 autocast tracks the f32 run", "[autocast]") {
  // Label = the first token's id mod 3 (the CLS must read position 0 through the attention), 16
  // documents of 8 tokens, AdamW; the same initialisation and batches for both runs.
  auto run = [](bool bf16) {
    default_generator().manual_seed(2026);
    lra::LraModelOptions o{.vocab_size = 12, .max_seq_len = 16, .dim = 16, .heads = 2, .layers = 2, .ffn_dim = 32,
                           .num_classes = 3, .attention = lra::AttentionKind::LongShort, .window = 2, .rank = 2,
                           .pooling = lra::Pooling::Cls, .head_hidden = 16};
    lra::LraClassifier model(o);
    Generator g(21);
    const Tensor ids = add(mul(rand({16, 8}, TensorOptions(kF64), &g), 11.0).to(kI64), 1.0);  // [1, 12)
    const Tensor tokens = ids.to(kI64), mask = ne(tokens, 0.0);
    std::vector<int64_t> labels;
    for (int64_t v : tokens.select(1, 0).to_vector<int64_t>()) labels.push_back(v % 3);
    const Tensor y = tensor(labels, {16});
    optim::AdamW opt(model.named_parameters(), {.lr = 3e-3, .eps = 1e-6, .weight_decay = 0.0});
    std::vector<double> losses;
    for (int step = 0; step < 50; ++step) {
      Tensor loss;
      {
        AutocastGuard autocast(bf16 ? kBF16 : kF32);
        loss = cross_entropy(model.forward(tokens, mask), y);
      }
      losses.push_back(loss.item<double>());
      loss.backward();
      opt.step();
      opt.zero_grad();
    }
    return losses;
  };
  const std::vector<double> f32 = run(false), bf16 = run(true);
  // Tolerance. Under bf16 autocast every product rounds its operands and its result to 2^-8
  // relative (u = 2^-9, two roundings per operand path): along the deepest path of this model —
  // per layer the q/k/v/projection Linears, the attention core, the output Linear and the two
  // FFN Linears, then the head's two Linears: 2·5 + 2 = 12 products — the logits move by at most
  // 12·2u relative to their magnitude, and the loss (a smooth function of logits of magnitude ≲ 3
  // here) by as much: 24u ≈ 4.7% of it at step 0. Training compounds it: AdamW moves every weight
  // by ≤ lr per step whatever the gradient, so two runs whose gradients differ can drift apart by
  // at most 2·lr·t per weight after t steps; with the loss's sensitivity to a uniform weight shift
  // (measured on the f32 run below) that adds ≤ 2·lr·t·S.
  const double u = 0x1p-9, lr = 3e-3;
  INFO("f32 " << f32.front() << " → " << f32.back() << ", bf16 " << bf16.front() << " → " << bf16.back());
  REQUIRE(f32.back() < 0.7 * f32.front());  // the f32 run learns
  CHECK(bf16.back() < 0.7 * bf16.front());  // so does the bf16 one
  CHECK(bf16 != f32);                       // and it did run in bf16
  // Step 0 is the forward's rounding alone: the tight check. The later ones bound the drift.
  // S: the largest loss change per unit of uniform weight drift seen along the f32 run (each
  // step moves every weight by ≤ lr: |Δloss per step| / lr bounds it from the data).
  double S = 0;
  for (size_t t = 1; t < f32.size(); ++t) S = std::max(S, std::fabs(f32[t] - f32[t - 1]) / lr);
  for (size_t t = 0; t < f32.size(); ++t) {
    INFO("step " << t << ": f32 " << f32[t] << ", bf16 " << bf16[t]);
    CHECK(std::fabs(bf16[t] - f32[t]) <= 24.0 * u * f32[t] + 2.0 * lr * double(t) * S);
  }
}
