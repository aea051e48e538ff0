// GEMM cases covering the contract of gemm_kernel (ops/matmul.h): transposed operands, batches,
// stride-0 (broadcast) batch dims, summed-over c dims, column-major c, K = 0 and alpha/beta.
// Each case holds contiguous bases plus the views to apply, so the same case can be rebuilt on
// any device (to(device) makes tensors contiguous; the views are applied after the move).
// Used by tests/test_cuda_alloc_bins.cpp (the cuBLAS plan on the CPU) and test_cuda_core.cpp.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <lsformer/lsformer.h>
#include "lsformer/ops/kernels/matmul.h"

namespace lsf::test {

struct GemmCase {
  std::string name;
  Tensor a_base, b_base, c_base;  // f64, on the CPU
  std::function<Tensor(const Tensor&)> a_view, b_view, c_view;
  double alpha = 1.0, beta = 0.0;
  int64_t products = 0;  // products summed into one c element (K times any summed batch dims)
};

inline std::vector<GemmCase> gemm_cases() {
  Generator gen(1234);
  auto r = [&](const Shape& s) { return randn(s, TensorOptions(kF64), &gen); };
  auto id = [](const Tensor& t) { return t; };
  std::vector<GemmCase> cases;
  auto add = [&](std::string name, Tensor a, Tensor b, Tensor c, std::function<Tensor(const Tensor&)> av,
                 std::function<Tensor(const Tensor&)> bv, std::function<Tensor(const Tensor&)> cv, double alpha,
                 double beta, int64_t products) {
    cases.push_back({std::move(name), a, b, c, av, bv, cv, alpha, beta, products});
  };
  add("plain", r({3, 5}), r({5, 4}), r({3, 4}), id, id, id, 1.0, 0.0, 5);
  add("a transposed", r({5, 3}), r({5, 4}), r({3, 4}), [](const Tensor& t) { return t.t(); }, id, id, 1.0, 0.0, 5);
  add("b transposed", r({3, 5}), r({4, 5}), r({3, 4}), id, [](const Tensor& t) { return t.t(); }, id, 1.0, 0.0, 5);
  add("alpha beta", r({3, 5}), r({5, 4}), r({3, 4}), id, id, id, 2.0, 0.5, 5);
  add("column-major c", r({3, 5}), r({5, 4}), r({4, 3}), id, id, [](const Tensor& t) { return t.t(); }, 1.0, 0.0, 5);
  add("batched", r({2, 3, 5}), r({2, 5, 4}), r({2, 3, 4}), id, id, id, 1.0, 0.0, 5);
  add("broadcast b (folds into M)", r({6, 3, 5}), r({1, 5, 4}), r({6, 3, 4}), id,
      [](const Tensor& t) { return t.expand({6, 5, 4}); }, id, 1.0, 0.0, 5);
  add("broadcast a", r({1, 3, 5}), r({6, 5, 4}), r({6, 3, 4}), [](const Tensor& t) { return t.expand({6, 3, 5}); }, id,
      id, 1.0, 0.0, 5);
  add("summed c batch", r({6, 3, 5}), r({6, 5, 4}), r({1, 3, 4}), id, id,
      [](const Tensor& t) { return t.expand({6, 3, 4}); }, 1.0, 0.5, 30);
  add("two summed c dims", r({2, 2, 3, 5}), r({2, 2, 5, 4}), r({1, 1, 3, 4}), id, id,
      [](const Tensor& t) { return t.expand({2, 2, 3, 4}); }, 1.5, 0.5, 20);
  add("weight gradient (folds into K)", r({3, 7, 5}), r({3, 7, 4}), r({1, 5, 4}),
      [](const Tensor& t) { return t.transpose(1, 2); }, id, [](const Tensor& t) { return t.expand({3, 5, 4}); }, 1.0,
      0.0, 21);
  add("4-D, permuted and broadcast batch", r({3, 2, 4, 5}), r({2, 1, 6, 5}), r({2, 3, 4, 6}),
      [](const Tensor& t) { return t.permute({1, 0, 2, 3}); },
      [](const Tensor& t) { return t.expand({2, 3, 6, 5}).transpose(2, 3); }, id, 1.0, 0.0, 5);
  add("K = 0, beta 0.5", r({3, 0}), r({0, 4}), r({3, 4}), id, id, id, 1.0, 0.5, 0);
  add("K = 0, beta 0", r({2, 3, 0}), r({2, 0, 4}), r({2, 3, 4}), id, id, id, 1.0, 0.0, 0);
  add("vector-like (N = 1)", r({4, 6}), r({6, 1}), r({4, 1}), id, id, id, 1.0, 0.0, 6);
  add("larger", r({2, 33, 70}), r({2, 70, 65}), r({2, 33, 65}), id, id, id, 1.0, 0.0, 70);
  return cases;
}

}  // namespace lsf::test
