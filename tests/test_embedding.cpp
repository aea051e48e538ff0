// embedding and one_hot: values and weight gradients against PyTorch
// (tests/fixtures/matmul_embedding.json) with repeated ids and padding_idx (also negative), i32
// ids, a large case against a naive scatter-add that is bit-identical across thread counts,
// f64 gradient checks, and the argument errors.
#include <algorithm>
#include <random>

#include "helpers.h"

using namespace lsf;
using testing::gradcheck;

namespace {

const nlohmann::json& fixture() {
  static const nlohmann::json j = test::load_fixture("matmul_embedding");
  return j;
}

}  // namespace

TEST_CASE("embedding matches PyTorch with repeated ids and padding_idx", "[embedding]") {
  const auto& f = fixture()["embedding"];
  const Tensor ids = test::fixture_tensor(f["ids"]);  // [2, 4] i64, ids 1 and 2 repeated
  const Tensor g = test::fixture_tensor(f["g"]);
  double max_abs_g = 0;
  for (double x : g.to_vector<double>()) max_abs_g = std::max(max_abs_g, std::fabs(x));
  struct Variant {
    std::optional<int64_t> padding_idx;
    const char* dweight;
  };
  for (const Variant& v : {Variant{std::nullopt, "dweight"}, Variant{2, "dweight_pad2"},
                           Variant{-5, "dweight_pad_minus5"}}) {
    for (DType id_dtype : {kI64, kI32}) {
      for (DType dtype : {kF64, kF32}) {
        INFO(v.dweight << " ids " << id_dtype << " weight " << dtype);
        Tensor weight = test::fixture_tensor(f["weight"]).to(dtype).requires_grad_(true);
        Tensor out = embedding(weight, ids.to(id_dtype), v.padding_idx);
        REQUIRE(out.shape() == Shape{2, 4, 3});
        // A gather copies values exactly.
        test::check_close(out, test::fixture_tensor(f["out"]).to(dtype), 0, 0);
        out.backward(g.to(dtype));
        // Each dweight element sums ≤ 3 values of g (id 1 occurs three times), in double,
        // rounded once to dtype: error ≤ 3u·max|g| from g's own rounding to dtype plus u·3·max|g|
        // from the final rounding, u = 2⁻⁵³ (f64) or 2⁻²⁴ (f32); we allow 12u·max|g|.
        const double u = dtype == kF64 ? 0x1p-53 : 0x1p-24;
        const double tol = 12 * u * max_abs_g;
        test::check_close(weight.grad(), test::fixture_tensor(f[v.dweight]), tol, 0);
      }
    }
  }
}

TEST_CASE("embedding keeps ids' shape, including 0-d and empty ids", "[embedding]") {
  Tensor weight = arange(0.0, 12.0, 1.0, kF64).reshape({4, 3});
  Tensor one = embedding(weight, scalar_tensor(2, kI64));
  test::check_equal<double>(one, {3}, {6, 7, 8});
  Tensor none = embedding(weight, zeros({0, 5}, kI64));
  CHECK(none.shape() == Shape{0, 5, 3});
  Tensor w = weight.clone().requires_grad_(true);
  sum(embedding(w, zeros({0}, kI64))).backward();
  test::check_equal<double>(w.grad(), {4, 3}, std::vector<double>(12, 0.0));
  // A transposed (non-contiguous) weight reads the logical rows.
  Tensor wt = weight.t();  // [3, 4]
  test::check_equal<double>(embedding(wt, tensor(std::vector<int64_t>{1})), {1, 4}, {1, 4, 7, 10});
}

TEST_CASE("embedding backward matches a naive scatter-add at every thread count", "[embedding]") {
  // V 50, D 300 (more than one 256-column chunk), 4000 ids drawn from 10 hot rows plus the rest.
  const int64_t V = 50, D = 300, n = 4000, pad = 7;
  Generator gen(5);
  std::vector<int64_t> id_values(static_cast<size_t>(n));
  std::mt19937_64 rng(3);
  for (auto& id : id_values) id = int64_t(rng() % 4 == 0 ? rng() % uint64_t(V) : rng() % 10);
  Tensor ids = tensor(id_values, {40, 100});
  Tensor g = randn({40, 100, D}, kF32, &gen);
  // Naive reference in double: dweight[v] = Σ of g rows with id v (not the padding row).
  std::vector<double> gv = g.to_vector<double>(), want(static_cast<size_t>(V * D), 0.0);
  std::vector<int64_t> count(static_cast<size_t>(V), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = id_values[size_t(i)];
    if (v == pad) continue;
    ++count[size_t(v)];
    for (int64_t c = 0; c < D; ++c) want[size_t(v * D + c)] += gv[size_t(i * D + c)];
  }
  const int64_t max_count = *std::max_element(count.begin(), count.end());
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2}) {
    Tensor weight = randn({V, D}, kF32, &gen).requires_grad_(true);
    {
      const test::ThreadCount scoped(threads);
      embedding(weight, ids, pad).backward(g);
    }
    // Summed in double, rounded once: |error| ≤ 2⁻²⁴·|sum| + (count·2⁻⁵³·Σ|g|, negligible).
    test::check_close(weight.grad(), want, max_count * 0x1p-50, 0x1p-24);
    auto row = weight.grad().select(0, pad).to_vector<float>();
    CHECK(std::all_of(row.begin(), row.end(), [](float x) { return x == 0.0f; }));
    results.push_back(weight.grad().to_vector<float>());
  }
  CHECK(results[0] == results[1]);  // bit-identical: each element summed in one fixed order
}

TEST_CASE("embedding gradients pass f64 gradcheck", "[embedding]") {
  // The padding row's zero gradient is a convention, not the derivative, so a finite-difference
  // check cannot cover it (PyTorch's fixture above and the naive scatter-add test do). Here:
  // no padding_idx, and a padding_idx (also negative) that the ids never use, which must leave
  // every other row's gradient exact.
  Tensor ids = tensor(std::vector<int64_t>{0, 3, 3, 1, 4, 3, 0, 3}, {2, 4});
  Tensor weight = test::grad_input({6, 3}, 21);
  for (std::optional<int64_t> pad : {std::optional<int64_t>{}, std::optional<int64_t>{2}, std::optional<int64_t>{-1}}) {
    auto r = gradcheck([&](const TensorList& in) { return embedding(in[0], ids, pad); }, {weight});
    INFO(r.message);
    CHECK(r.ok);
  }
  // A larger table and many ids: random projections of the Jacobian.
  std::mt19937_64 rng(8);
  std::vector<int64_t> id_values(300);
  for (auto& v : id_values) v = int64_t(rng() % 40);
  Tensor many = tensor(id_values, {10, 30});
  auto big = gradcheck([&](const TensorList& in) { return embedding(in[0], many); }, {test::grad_input({40, 16}, 22)});
  INFO(big.message);
  CHECK(big.ok);
}

TEST_CASE("embedding rejects bad ids and arguments", "[embedding]") {
  Tensor weight = zeros({5, 3});
  CHECK_THROWS_WITH(embedding(weight, tensor(std::vector<int64_t>{0, 7, 1})),
                    Catch::Contains("embedding") && Catch::Contains("id 7") && Catch::Contains("5 embeddings") &&
                        Catch::Contains("{5, 3}"));
  CHECK_THROWS_WITH(embedding(weight, tensor(std::vector<int32_t>{-1})),
                    Catch::Contains("embedding") && Catch::Contains("id -1") && Catch::Contains("5 embeddings"));
  CHECK_THROWS_WITH(embedding(weight, zeros({2})),
                    Catch::Contains("embedding") && Catch::Contains("i64") && Catch::Contains("f32"));
  CHECK_THROWS_WITH(embedding(zeros({5}), tensor(std::vector<int64_t>{0})),
                    Catch::Contains("embedding") && Catch::Contains("2-D") && Catch::Contains("{5}"));
  CHECK_THROWS_WITH(embedding(zeros({5, 3}, kI64), tensor(std::vector<int64_t>{0})),
                    Catch::Contains("embedding") && Catch::Contains("floating"));
  CHECK_THROWS_WITH(embedding(weight, tensor(std::vector<int64_t>{0}), 5),
                    Catch::Contains("embedding") && Catch::Contains("padding_idx 5") && Catch::Contains("{5, 3}"));
  CHECK_THROWS_WITH(embedding(weight, tensor(std::vector<int64_t>{0}), -6),
                    Catch::Contains("embedding") && Catch::Contains("padding_idx -6"));
  CHECK_THROWS_WITH(embedding(Tensor(), tensor(std::vector<int64_t>{0})),
                    Catch::Contains("embedding") && Catch::Contains("undefined"));
}

TEST_CASE("one_hot matches PyTorch and checks its classes", "[embedding]") {
  const auto& f = fixture()["one_hot"];
  Tensor ids = test::fixture_tensor(f["ids"]);
  Tensor inferred = one_hot(ids);
  CHECK(inferred.dtype() == kI64);
  test::check_close(inferred, test::fixture_tensor(f["inferred"]), 0, 0);
  test::check_close(one_hot(ids.to(kI32), 6), test::fixture_tensor(f["classes_6"]), 0, 0);
  CHECK(one_hot(zeros({0}, kI64), 3).shape() == Shape{0, 3});
  CHECK_THROWS_WITH(one_hot(tensor(std::vector<int64_t>{1, -2})),
                    Catch::Contains("one_hot") && Catch::Contains("non-negative") && Catch::Contains("-2"));
  CHECK_THROWS_WITH(one_hot(tensor(std::vector<int64_t>{1, 3}), 3),
                    Catch::Contains("one_hot") && Catch::Contains("class value 3") && Catch::Contains("num_classes 3"));
  CHECK_THROWS_WITH(one_hot(zeros({0}, kI64)), Catch::Contains("one_hot") && Catch::Contains("empty"));
  CHECK_THROWS_WITH(one_hot(zeros({2})), Catch::Contains("one_hot") && Catch::Contains("f32"));
  CHECK_THROWS_WITH(one_hot(zeros({2}, kI64), -3), Catch::Contains("one_hot") && Catch::Contains("-3"));
}
