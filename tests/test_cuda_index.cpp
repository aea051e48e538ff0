// CUDA embedding, one_hot, where, gather / scatter_add and index_select / index_add against the
// CPU kernels on the same inputs, and the out-of-range index errors. The GPU kernels repeat the
// CPU's arithmetic in the CPU's order (copies; sums per output element in index order, in the
// same precision), so every comparison is exact. Each case skips without a CUDA device.
#include <random>

#include "helpers.h"
#include "lsformer/ops/embedding.h"
#include "lsformer/ops/index.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/kernels/embedding.h"
#include "lsformer/ops/kernels/index.h"

using namespace lsf;

namespace {

std::vector<double> host_values(const Tensor& t) { return t.to(kCPU).to(kF64).to_vector<double>(); }

// n ids drawn uniformly from [0, limit) (many repeats when n > limit).
Tensor random_ids(int64_t n, int64_t limit, uint32_t seed, DType dtype = kI64) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, limit - 1);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = pick(rng);
  return tensor(v, {n}).to(dtype);
}

Tensor random_index(const Shape& shape, int64_t limit, uint32_t seed) {
  return random_ids(shape_numel(shape), limit, seed).reshape(shape);
}

}  // namespace

TEST_CASE("cuda embedding: forward and backward with repeated ids equal the CPU's", "[cuda][embedding]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (DType id_type : {kI64, kI32}) {
    for (DType dtype : {kF32, kF64}) {
      INFO(id_type << " " << dtype);
      const int64_t V = 50, D = 300, n = 4000;  // D > one 256-column tile; ~80 repeats per id
      Generator gen(5);
      Tensor weight = randn({V, D}, TensorOptions(dtype), &gen);
      Tensor ids = random_ids(n, V, 11, id_type);
      Tensor y = empty({n, D}, TensorOptions(dtype));
      Tensor yg = empty({n, D}, TensorOptions(dtype).device(kCUDA));
      embedding_forward_kernel(kCPU, y, weight, ids);
      embedding_forward_kernel(kCUDA, yg, weight.to(kCUDA), ids.to(kCUDA));
      CHECK(host_values(yg) == host_values(y));

      Tensor dy = randn({n, D}, TensorOptions(dtype), &gen);
      for (int64_t padding_idx : {int64_t(-1), int64_t(7)}) {
        INFO("padding_idx " << padding_idx);
        Tensor dw = randn({V, D}, TensorOptions(dtype), &gen);  // accumulates into existing values
        Tensor dwg = dw.to(kCUDA);
        embedding_backward_kernel(kCPU, dw, dy, ids, padding_idx);
        embedding_backward_kernel(kCUDA, dwg, dy.to(kCUDA), ids.to(kCUDA), padding_idx);
        // Exact: both sum each row's dy rows in occurrence order in double from dweight's value.
        CHECK(host_values(dwg) == host_values(dw));
      }
    }
  }
}

TEST_CASE("cuda embedding op: gradient through autograd equals the CPU's", "[cuda][embedding]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Generator gen(3);
  Tensor weight = randn({20, 33}, TensorOptions(kF32), &gen);
  Tensor ids = random_ids(500, 20, 4).reshape({25, 20});
  Tensor w_cpu = weight.clone().requires_grad_(true);
  Tensor w_gpu = weight.to(kCUDA).requires_grad_(true);
  sum(embedding(w_cpu, ids, /*padding_idx=*/2)).backward();
  sum(embedding(w_gpu, ids.to(kCUDA), /*padding_idx=*/2)).backward();
  CHECK(host_values(w_gpu.grad()) == host_values(w_cpu.grad()));
}

TEST_CASE("cuda one_hot equals the CPU's", "[cuda][embedding]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Tensor ids = random_ids(777, 13, 21).reshape({7, 111});
  CHECK(host_values(one_hot(ids.to(kCUDA), 13)) == host_values(one_hot(ids, 13)));
}

TEST_CASE("cuda where and masked_fill equal the CPU's, with broadcasting", "[cuda][index]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Generator gen(8);
  for (DType dtype : {kF32, kF64, kI64}) {
    INFO(dtype);
    Tensor cond = gt(rand({6, 1, 40}, TensorOptions(kF32), &gen), 0.5);
    Tensor a = randn({6, 5, 40}, TensorOptions(kF32), &gen).to(dtype);
    Tensor b = randn({5, 1}, TensorOptions(kF32), &gen).to(dtype);
    CHECK(host_values(where(cond.to(kCUDA), a.to(kCUDA), b.to(kCUDA))) == host_values(where(cond, a, b)));
    // Transposed (strided) operands, made on each device.
    Tensor c2 = randn({40, 5, 6}, TensorOptions(kF32), &gen).to(dtype);
    CHECK(host_values(where(cond.to(kCUDA).transpose(0, 2), a.to(kCUDA).transpose(0, 2), c2.to(kCUDA))) ==
          host_values(where(cond.transpose(0, 2), a.transpose(0, 2), c2)));
  }
  Tensor x = randn({9, 17}, TensorOptions(kF32), &gen);
  Tensor mask = gt(rand({9, 1}, TensorOptions(kF32), &gen), 0.3);
  CHECK(host_values(masked_fill(x.to(kCUDA), mask.to(kCUDA), -1e9)) == host_values(masked_fill(x, mask, -1e9)));
}

TEST_CASE("cuda gather / scatter_add with random indices equal the CPU's", "[cuda][index]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Generator gen(12);
  for (int64_t dim : {0, 1, 2}) {
    for (DType dtype : {kF32, kF64}) {
      INFO("dim " << dim << " " << dtype);
      Tensor x = randn({7, 9, 11}, TensorOptions(dtype), &gen);
      Shape index_shape = {5, 8, 10};
      index_shape[size_t(dim)] = 23;  // longer than x along dim: repeated indices
      Tensor index = random_index(index_shape, x.size(dim), uint32_t(100 + dim));
      CHECK(host_values(gather(x.to(kCUDA), dim, index.to(kCUDA))) == host_values(gather(x, dim, index)));

      Tensor src = randn(index_shape, TensorOptions(dtype), &gen);
      Tensor out = randn({7, 9, 11}, TensorOptions(dtype), &gen);
      Tensor outg = out.to(kCUDA);
      scatter_add_kernel(kCPU, out, index, src, dim);
      scatter_add_kernel(kCUDA, outg, index.to(kCUDA), src.to(kCUDA), dim);
      // Exact: each output element adds its contributions in index order in the same dtype.
      CHECK(host_values(outg) == host_values(out));
    }
  }
  // The gradient of gather (scatter_add through autograd).
  Tensor x = randn({13, 6}, TensorOptions(kF32), &gen);
  Tensor index = random_index({40, 6}, 13, 7);
  Tensor xc = x.clone().requires_grad_(true), xg = x.to(kCUDA).requires_grad_(true);
  sum(gather(xc, 0, index)).backward();
  sum(gather(xg, 0, index.to(kCUDA))).backward();
  CHECK(host_values(xg.grad()) == host_values(xc.grad()));
}

TEST_CASE("cuda index_select / index_add with random indices equal the CPU's", "[cuda][index]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Generator gen(13);
  for (int64_t dim : {0, 1, 2}) {
    for (DType id_type : {kI64, kI32}) {
      INFO("dim " << dim << " " << id_type);
      Tensor x = randn({6, 7, 8}, TensorOptions(kF32), &gen);
      Tensor index = random_ids(19, x.size(dim), uint32_t(200 + dim), id_type);
      CHECK(host_values(index_select(x.to(kCUDA), dim, index.to(kCUDA))) == host_values(index_select(x, dim, index)));

      Shape src_shape = x.shape();
      src_shape[size_t(dim)] = 19;
      Tensor src = randn(src_shape, TensorOptions(kF32), &gen);
      Tensor out = randn(x.shape(), TensorOptions(kF32), &gen);
      Tensor outg = out.to(kCUDA);
      index_add_kernel(kCPU, out, index, src, dim);
      index_add_kernel(kCUDA, outg, index.to(kCUDA), src.to(kCUDA), dim);
      CHECK(host_values(outg) == host_values(out));  // exact: same order, same dtype
    }
  }
}

TEST_CASE("cuda index ops: out-of-range indices raise lsf::Error naming the op", "[cuda][index]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Tensor x = randn({4, 5}).to(kCUDA);
  Tensor bad = tensor(std::vector<int64_t>{0, 1, 9, 2}, {4}).to(kCUDA);
  Tensor negative = tensor(std::vector<int64_t>{0, -1, 2, 3}, {4}).to(kCUDA);
  CHECK_THROWS_WITH(index_select(x, 0, bad), Catch::Contains("index_select") && Catch::Contains("index 9") &&
                                                 Catch::Contains("{4, 5}"));
  CHECK_THROWS_WITH(index_select(x, 1, negative), Catch::Contains("index_select") && Catch::Contains("index -1"));
  CHECK_THROWS_WITH(gather(x, 1, bad.reshape({4, 1})), Catch::Contains("gather") && Catch::Contains("index 9"));
  Tensor out = zeros({4, 5}).to(kCUDA);
  CHECK_THROWS_WITH(scatter_add_kernel(kCUDA, out, bad.reshape({4, 1}), ones({4, 1}).to(kCUDA), 1),
                    Catch::Contains("scatter_add") && Catch::Contains("index 9"));
  CHECK_THROWS_WITH(index_add_kernel(kCUDA, out, bad, ones({4, 5}).to(kCUDA), 0),
                    Catch::Contains("index_add") && Catch::Contains("index 9"));
  CHECK_THROWS_WITH(embedding(x, bad), Catch::Contains("embedding") && Catch::Contains("id 9"));
  CHECK_THROWS_WITH(one_hot(negative, 4), Catch::Contains("one_hot") && Catch::Contains("non-negative"));
  CHECK_THROWS_WITH(one_hot(bad, 4), Catch::Contains("one_hot") && Catch::Contains("9"));
  // The device is still usable afterwards.
  CHECK(host_values(index_select(x, 0, tensor(std::vector<int64_t>{3}, {1}).to(kCUDA))) ==
        host_values(index_select(x.to(kCPU), 0, tensor(std::vector<int64_t>{3}, {1}))));
}
