// Tests of the multiply-add counter (ops/flops.h): hand-computed counts for a Linear, a Conv2d
// (dense, strided and depthwise), full attention and the 2-D long-short attention, the fused
// bidirectional long-short op, nesting and scoping, and that backward adds nothing.
#include "helpers.h"
#include "lsformer/models/attention/full_attention.h"
#include "lsformer/models/attention/long_short_2d.h"
#include "lsformer/models/nn/conv2d.h"
#include "lsformer/models/nn/linear.h"
#include "lsformer/ops/flops.h"
#include "lsformer/ops/long_short.h"

using namespace lsf;

TEST_CASE("a Linear layer counts T·in·out multiply-adds (the bias add is not counted)", "[flops]") {
  nn::Linear lin(12, 5);
  Tensor x = randn({2, 7, 12});
  FlopCounter counter;
  lin.forward(x);
  CHECK(counter.multiply_adds() == 2 * 7 * 12 * 5);
  CHECK(counter.by_op().at("matmul") == 2 * 7 * 12 * 5);
}

TEST_CASE("a Conv2d counts N·Ho·Wo·O·(C/groups)·kH·kW multiply-adds", "[flops]") {
  Tensor x = randn({2, 6, 9, 8});
  {
    nn::Conv2d conv(6, 4, {3, 2}, {.stride = 2, .padding = 1});  // Ho = (9+2−3)/2+1 = 5, Wo = (8+2−2)/2+1 = 5
    FlopCounter counter;
    Tensor y = conv.forward(x);
    REQUIRE(y.shape() == Shape{2, 4, 5, 5});
    CHECK(counter.multiply_adds() == 2 * 5 * 5 * 4 * 6 * 3 * 2);
  }
  {
    nn::Conv2d depthwise(6, 6, 3, {.padding = 1, .groups = 6});
    FlopCounter counter;
    depthwise.forward(x);
    CHECK(counter.multiply_adds() == 2 * 9 * 8 * 6 * 1 * 3 * 3);
    CHECK(counter.by_op().at("conv2d") == counter.multiply_adds());
  }
}

TEST_CASE("full attention counts its four projections and its two n×n products", "[flops]") {
  const int64_t B = 2, n = 10, d = 8, h = 2;
  nn::FullAttention attn({.dim = d, .heads = h});
  Tensor x = randn({B, n, d});
  FlopCounter counter;
  attn.forward(x);
  // W_q, W_k, W_v, W_o: 4·B·n·d·d; logits Q·Kᵀ and context P·V: 2·B·h·n·n·e = 2·B·n·n·d.
  CHECK(counter.multiply_adds() == 4 * B * n * d * d + 2 * B * n * n * d);
}

TEST_CASE("the 2-D long-short attention counts every product of its slots", "[flops]") {
  // nx 4 (N 16), C 8, h 2 (e 4), w 2 (T 4, G·w² = N), r 3, g 1.
  const int64_t B = 1, N = 16, C = 8, h = 2, e = 4, r = 3, T = 4, g = 1;
  nn::LongShortAttention2d attn({.dim = C, .heads = h, .window = 2, .rank = r});
  Tensor x = randn({B, g + N, C});
  FlopCounter counter;
  attn.forward(x, {.height = 4, .width = 4, .num_global = g});
  const int64_t qkv = (g + N) * C * 3 * C, proj = (g + N) * C * C, dynamic_projection = N * C * h * r;
  const int64_t compress = 2 * h * r * N * e;             // K̄ = P·k and V̄ = P·v
  const int64_t slots = r + T * T + g;                    // per patch query
  const int64_t patch_attention = 2 * h * N * slots * e;  // logits and weighted sum
  const int64_t global_update = 2 * h * N * e;            // q_g·outᵀ and p·out (its self term is elementwise)
  CHECK(counter.multiply_adds() ==
        B * (qkv + proj + dynamic_projection + compress + patch_attention + global_update));
}

TEST_CASE("the fused long-short op counts 2·B·h·n·(R + s)·e", "[flops]") {
  const int64_t B = 2, h = 2, n = 8, e = 4, R = 3, w = 4;  // span 8
  Tensor q = randn({B, h, n, e}), k = randn({B, h, n, e}), v = randn({B, h, n, e});
  Tensor kb = randn({B, h, R, e}), vb = randn({B, h, R, e});
  FlopCounter counter;
  long_short_attention(q, k, v, kb, vb, Tensor(), {.window = w});
  CHECK(counter.multiply_adds() == 2 * B * h * n * (R + 8) * e);
}

TEST_CASE("counters nest, end with their scope and do not count backward", "[flops]") {
  Tensor a = randn({3, 4}, TensorOptions().requires_grad(true)), b = randn({4, 5});
  FlopCounter outer;
  {
    FlopCounter inner;
    Tensor y = matmul(a, b);
    CHECK(inner.multiply_adds() == 60);
    sum(y).backward();  // dA = dY·Bᵀ runs kernels, not ops: nothing counted
    CHECK(inner.multiply_adds() == 60);
  }
  bmm(randn({2, 3, 4}), randn({2, 4, 1}));
  CHECK(outer.multiply_adds() == 60 + 24);
  CHECK(outer.by_op().at("bmm") == 24);
  count_multiply_adds("x", 0);  // no counter left on other threads' stacks: a plain call is fine
}
