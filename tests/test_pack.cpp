// ops/pack.h: the layout of a mask, pack_sequences / unpack_sequences against plain indexing
// (both layouts, any pattern of padding), their gradients (float64 finite differences), the
// errors, and the CUDA kernel against the CPU's (copies: exact).
#include <cmath>
#include <limits>

#include "helpers.h"
#include "lsformer/models/attention/heads.h"

using namespace lsf;

namespace {

// [B, n] bool from rows of 0/1.
Tensor mask_of(const std::vector<std::vector<int>>& rows) {
  std::vector<double> v;
  for (const auto& r : rows)
    for (int x : r) v.push_back(x);
  return tensor(v, {int64_t(rows.size()), int64_t(rows[0].size())}).to(kBool);
}

// Right padding, holes, a sequence with one token, and a fully padded one.
Tensor awkward_mask() {
  return mask_of({{1, 1, 1, 1, 0, 0}, {1, 0, 0, 1, 1, 0}, {1, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}});
}

std::vector<int64_t> ints(const Tensor& t) { return t.to(kCPU).contiguous().to_vector<int64_t>(); }
std::vector<double> values(const Tensor& t) { return t.to(kCPU).to(kF64).contiguous().to_vector<double>(); }

}  // namespace

TEST_CASE("packed_sequences: rows, slots and positions of any mask", "[pack]") {
  const PackedSequences p = packed_sequences(awkward_mask());
  CHECK(p.batch == 4);
  CHECK(p.length == 6);
  CHECK(p.total == 8);
  CHECK(ints(p.rows) == std::vector<int64_t>{0, 1, 2, 3, 6, 9, 10, 12});
  CHECK(ints(p.positions) == std::vector<int64_t>{0, 1, 2, 3, 0, 3, 4, 0});
  std::vector<int64_t> slots(24, -1);
  for (int64_t r = 0; r < 8; ++r) slots[size_t(ints(p.rows)[size_t(r)])] = r;
  CHECK(ints(p.slots) == slots);
  REQUIRE_THROWS_WITH(packed_sequences(ones({2, 3})), Catch::Contains("mask must be a bool tensor [B, n]"));
  REQUIRE_THROWS_WITH(packed_sequences(ones({2}).to(kBool)), Catch::Contains("of shape {2}"));
}

TEST_CASE("pack_sequences / unpack_sequences equal indexing, in both layouts", "[pack]") {
  const Tensor mask = awkward_mask();
  const PackedSequences p = packed_sequences(mask);
  const std::vector<int64_t> rows = ints(p.rows);
  Generator g(3);
  for (DType dtype : {kF32, kF64}) {
    INFO(dtype);
    const int64_t h = 2, e = 3, F = h * e;
    const Tensor x = randn({4, 6, F}, TensorOptions(dtype), &g);  // [B, n, F]
    const Tensor packed = pack_sequences(x, p);
    REQUIRE(packed.shape() == Shape({8, F}));
    const Tensor flat = x.reshape({24, F});
    for (int64_t r = 0; r < 8; ++r) CHECK(values(packed.select(0, r)) == values(flat.select(0, rows[size_t(r)])));
    // Heads: [B, h, n, e] (split_heads's layout) packs to the rows merge_heads would give.
    const Tensor heads = nn::split_heads(x, h).contiguous();
    CHECK(values(pack_sequences(heads, p, h)) == values(packed));

    // Back: real rows restored, padding = fill, in both layouts.
    const double fill = -std::numeric_limits<double>::infinity();
    const Tensor back = unpack_sequences(packed, p, 0, fill);
    REQUIRE(back.shape() == Shape({4, 6, F}));
    const Tensor back_heads = unpack_sequences(packed, p, h, fill);
    REQUIRE(back_heads.shape() == Shape({4, h, 6, e}));
    CHECK(back_heads.is_contiguous());
    CHECK(values(back_heads) == values(nn::split_heads(back, h).contiguous()));
    const std::vector<double> m = values(mask.to(kF64).reshape({24}));
    const Tensor back_flat = back.reshape({24, F});
    for (int64_t i = 0; i < 24; ++i) {
      if (m[size_t(i)] != 0) {
        CHECK(values(back_flat.select(0, i)) == values(flat.select(0, i)));
      } else {
        for (double v : values(back_flat.select(0, i))) CHECK(v == fill);
      }
    }
  }
}

TEST_CASE("pack_sequences / unpack_sequences: float64 gradients", "[pack]") {
  const PackedSequences p = packed_sequences(awkward_mask());
  Generator g(4);
  const Tensor w = randn({8, 4}, TensorOptions(kF64), &g);  // weights every output differently
  for (int64_t heads : {0, 2}) {
    INFO("heads " << heads);
    Tensor x = (heads == 0 ? randn({4, 6, 4}, TensorOptions(kF64), &g) : randn({4, 2, 6, 2}, TensorOptions(kF64), &g))
                   .requires_grad_(true);
    auto pack_fn = [&](const TensorList& in) { return mul(pack_sequences(in[0], p, heads), w); };
    auto r1 = testing::gradcheck(pack_fn, {x});
    INFO(r1.message);
    CHECK(r1.ok);
    Tensor y = randn({8, 4}, TensorOptions(kF64), &g).requires_grad_(true);
    const Tensor u = heads == 0 ? randn({4, 6, 4}, TensorOptions(kF64), &g) : randn({4, 2, 6, 2}, TensorOptions(kF64), &g);
    auto unpack_fn = [&](const TensorList& in) { return mul(unpack_sequences(in[0], p, heads, 7.0), u); };
    auto r2 = testing::gradcheck(unpack_fn, {y});
    INFO(r2.message);
    CHECK(r2.ok);
  }
}

TEST_CASE("pack_sequences / unpack_sequences: errors name the problem", "[pack]") {
  const PackedSequences p = packed_sequences(awkward_mask());
  REQUIRE_THROWS_WITH(pack_sequences(zeros({4, 5, 3}), p), Catch::Contains("x must be [B, n, F]") && Catch::Contains("{4, 5, 3}"));
  REQUIRE_THROWS_WITH(pack_sequences(zeros({4, 6, 3}), p, 2), Catch::Contains("[B, heads, n, e]"));
  REQUIRE_THROWS_WITH(unpack_sequences(zeros({7, 4}), p), Catch::Contains("T = 8"));
  REQUIRE_THROWS_WITH(unpack_sequences(zeros({8, 5}), p, 2), Catch::Contains("does not split into heads = 2"));
  REQUIRE_THROWS_WITH(unpack_sequences(zeros({8, 4}).to(kI64), p), Catch::Contains("floating-point"));
  PackedSequences bad = p;
  bad.rows = tensor(std::vector<int64_t>{0, 1, 2, 3, 6, 9, 10, 99}, {8});
  REQUIRE_THROWS_WITH(pack_sequences(zeros({4, 6, 2}), bad), Catch::Contains("names position 99"));
}

TEST_CASE("cuda pack_sequences / unpack_sequences equal the CPU's", "[cuda][pack]") {
  LSF_REQUIRE_CUDA_DEVICE();
  const Tensor mask = awkward_mask();
  const PackedSequences p = packed_sequences(mask), pg = packed_sequences(mask.to(kCUDA));
  Generator g(5);
  for (DType dtype : {kF32, kF64}) {
    const Tensor x = randn({4, 2, 6, 3}, TensorOptions(dtype), &g);
    const Tensor packed = pack_sequences(x, p, 2);
    CHECK(values(pack_sequences(x.to(kCUDA), pg, 2)) == values(packed));
    const double fill = -std::numeric_limits<double>::infinity();
    CHECK(values(unpack_sequences(packed.to(kCUDA), pg, 2, fill)) == values(unpack_sequences(packed, p, 2, fill)));
    CHECK(values(unpack_sequences(packed.to(kCUDA), pg)) == values(unpack_sequences(packed, p)));
  }
}
