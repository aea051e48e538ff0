// CUDA reductions against the CPU kernels: sum, mean, var, amax/amin, max/min with indices and
// argmax/argmin over every dim pattern (inner rows, outer columns, mixed, all), non-contiguous
// inputs, rows longer than a block, the split paths (one huge row, few long columns), integer
// and bool inputs, f32/f64/bf16, and the backward of each (which runs the elementwise CUDA
// kernels). [cuda] cases skip without a device.
#include <cmath>
#include <cstdlib>
#include <limits>

#include "lsformer/cuda/offset_calc.h"
#include "cuda_compare.h"

using namespace lsf;
using test::check_gpu;
using test::check_gpu_equal;
using test::cpu_ref;
using test::gpu;
using test::random_tensor;
using test::unit_roundoff;

namespace {

// Sum tolerance. The GPU adds each output's n terms as sequential runs of L terms per thread
// followed by trees of depth ≤ 32 (warp, block, splits); the CPU sums in f64 and rounds once.
// By Higham's bound for that summation order the float result is within (L + 32)·u·Σ|x| of
// the exact sum, plus one rounding of the result (u relative; 2u for bf16/f16, whose CPU
// reference is f32). Σ|x| is taken as the largest over the outputs. L follows from the
// launch rules in cuda/offset_calc.h (gpu_run below).
//
// L: rows path (x's fastest dim reduced): a group of G = row_group_size(n) threads per
// output, the n terms cut into reduction_splits(outputs, n) chunks: ⌈⌈n/splits⌉/G⌉.
// Columns path: 8 threads per output in a block, reduction_splits(⌈outputs/32⌉, n, 264, 256)
// blocks: ⌈n/(8·splits)⌉.
int64_t gpu_run(int64_t n, int64_t outputs, bool rows_path) {
  if (rows_path) {
    const int64_t splits = lsf::cuda::reduction_splits(outputs, n);
    const int64_t chunk = (n + splits - 1) / splits, g = lsf::cuda::row_group_size(n);
    return (chunk + g - 1) / g;
  }
  const int64_t splits = lsf::cuda::reduction_splits((outputs + 31) / 32, n, 264, 256);
  return (n + 8 * splits - 1) / (8 * splits);
}

// Is x's fastest-moving dim (smallest stride among dims of size > 1) among the reduced ones?
bool rows_path(const Tensor& x, const std::vector<int64_t>& dims) {
  int64_t fastest = -1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.size(d) > 1 && (fastest < 0 || std::abs(x.stride(d)) < std::abs(x.stride(fastest)))) fastest = d;
  if (dims.empty() || fastest < 0) return true;
  for (int64_t d : dims)
    if ((d < 0 ? d + x.dim() : d) == fastest) return true;
  return false;
}

double sum_atol(const Tensor& x_ref, const std::vector<int64_t>& dims, int64_t n, DType t) {
  const double u = t == kF64 ? 0x1p-53 : 0x1p-24;
  const double abs_sum = test::max_abs(sum(abs(x_ref.to(kF64)), dims));
  const int64_t run = gpu_run(n, x_ref.numel() / std::max<int64_t>(n, 1), rows_path(x_ref, dims));
  return (double(run) + 32.0) * u * abs_sum;
}
double result_rtol(DType t) { return t == kBF16 || t == kF16 ? 2.0 * unit_roundoff(t) : unit_roundoff(t); }

int64_t count_of(const Shape& shape, const std::vector<int64_t>& dims) {
  if (dims.empty()) return shape_numel(shape);
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[size_t(d < 0 ? d + int64_t(shape.size()) : d)];
  return n;
}

}  // namespace

TEST_CASE("CUDA sum and mean match the CPU over every dim pattern", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  const Shape shape{5, 37, 66};
  const std::vector<std::vector<int64_t>> patterns{{}, {2}, {0}, {1}, {0, 2}, {-1, 0}, {1, 2}};
  for (DType t : {kF32, kF64, kBF16, kF16}) {
    Tensor x = random_tensor(shape, t, 1);
    for (bool permuted : {false, true}) {
      // The permuted case reduces a non-contiguous view (the CPU path copies, ours maps offsets).
      Tensor xc = permuted ? cpu_ref(x).permute({2, 0, 1}) : cpu_ref(x);
      Tensor xg = permuted ? gpu(x).permute({2, 0, 1}) : gpu(x);
      for (const auto& dims : patterns) {
        for (bool keepdim : {false, true}) {
          INFO(dtype_name(t) << (permuted ? " permuted" : "") << " dims " << test::str(dims) << " keepdim " << keepdim);
          const int64_t n = count_of(xc.shape(), dims);
          const double atol = sum_atol(xc, dims, n, t);
          check_gpu(sum(xg, dims, keepdim), sum(xc, dims, keepdim), atol, result_rtol(t));
          // mean = sum / n: one more rounding on each side.
          check_gpu(mean(xg, dims, keepdim), mean(xc, dims, keepdim), atol / double(n),
                    result_rtol(t) + 2.0 * unit_roundoff(t));
        }
      }
    }
  }
}

TEST_CASE("CUDA sum: rows longer than a block and the split paths", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
  };
  const Case cases[] = {
      {{3, 70001}, {1}},          // rows of 70001: a 1024-thread block per row, split in parts
      {{(1 << 22) + 5}, {}},      // one huge row: many splits and the partials pass
      {{200003, 3}, {0}},         // few long columns: split over blocks in y
      {{4099, 129}, {0}},         // bias-gradient shape
      {{2, 5000, 7}, {0, 2}},     // mixed: fastest dim reduced together with an outer one
  };
  for (const Case& c : cases) {
    INFO("shape " << test::str(c.shape) << " dims " << test::str(c.dims));
    Tensor x = random_tensor(c.shape, kF32, 2);
    const int64_t n = count_of(c.shape, c.dims);
    check_gpu(sum(gpu(x), c.dims), sum(x, c.dims), sum_atol(x, c.dims, n, kF32), 0x1p-24);
    // Extrema are exact whatever the order.
    check_gpu(amax(gpu(x), c.dims), amax(x, c.dims), 0.0, 0.0);
    check_gpu(amin(gpu(x), c.dims), amin(x, c.dims), 0.0, 0.0);
  }
}

TEST_CASE("CUDA integer and bool sums count in i64, integer extrema are exact", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Generator g(3);
  Tensor base = mul(rand({9, 130}, TensorOptions(kF64), &g), 200.0);
  for (DType t : {kI32, kI64, kU8}) {
    INFO(dtype_name(t));
    Tensor x = base.to(kI64).to(t);
    Tensor s = sum(gpu(x), {1});
    CHECK(s.dtype() == kI64);
    check_gpu_equal(s, sum(x, {1}));
    check_gpu_equal(sum(gpu(x)), sum(x));
    check_gpu_equal(amax(gpu(x), {0}), amax(x, {0}));
    check_gpu_equal(amin(gpu(x).t(), {1}), amin(x.t(), {1}));
    check_gpu_equal(argmax(gpu(x), 1), argmax(x, 1));
  }
  Tensor b = gt(base, 100.0);
  check_gpu_equal(sum(gpu(b), {0}), sum(b, {0}));
  check_gpu_equal(amax(gpu(b), {1}), amax(b, {1}));
}

TEST_CASE("CUDA max/min with indices and argmax/argmin: first of ties, NaN wins", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  // Integers in [0, 4] as floats: every row of 33 or 1500 has repeated maxima and minima.
  Generator g(4);
  for (int64_t n : {33, 1500}) {
    Tensor ints = mul(rand({6, n, 5}, TensorOptions(kF64), &g), 5.0).to(kI64).to(kF64);
    for (DType t : {kF32, kF64, kBF16, kF16}) {
      Tensor x = ints.to(t);
      for (int64_t dim : {0, 1, 2}) {
        INFO(dtype_name(t) << " n " << n << " dim " << dim);
        Tensor xc = cpu_ref(x);
        check_gpu_equal(argmax(gpu(x), dim), argmax(xc, dim));
        check_gpu_equal(argmin(gpu(x), dim, /*keepdim=*/true), argmin(xc, dim, /*keepdim=*/true));
        ValuesIndices mg = max(gpu(x), dim), mc = max(xc, dim);
        check_gpu(mg.values, mc.values, 0.0, 0.0);
        check_gpu_equal(mg.indices, mc.indices);
        ValuesIndices ng = min(gpu(x), dim), nc = min(xc, dim);
        check_gpu(ng.values, nc.values, 0.0, 0.0);
        check_gpu_equal(ng.indices, nc.indices);
      }
    }
  }
  // NaN: the first NaN of a row is both its max and its min; amax/amin give NaN.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor v = tensor(std::vector<double>{1, nan, 3, nan, -2, 5, 0, 1}, {2, 4});
  for (DType t : {kF32, kF64}) {
    Tensor x = v.to(t);
    check_gpu_equal(argmax(gpu(x), 1), argmax(x, 1));
    check_gpu_equal(argmin(gpu(x), 1), argmin(x, 1));
    check_gpu_equal(argmax(gpu(x), 0), argmax(x, 0));
    check_gpu(amax(gpu(x), {1}), amax(x, {1}), 0.0, 0.0);  // check_close matches NaN with NaN
    check_gpu(amin(gpu(x), {0}), amin(x, {0}), 0.0, 0.0);
  }
}

TEST_CASE("CUDA reduction backward passes match the CPU", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  // sum/mean backward are broadcasts (exact, mean one division: u); amax shares the gradient
  // among ties (one division and one product: 2u); max routes to the index (exact).
  // var's gradient 2(x − mean)/(N − 1)·dy − (its row sum)/N: the float mean (error ≤
  // (n/8 + 32)·u·max|x| ≈ 113u for n = 45, |x| ≤ 3) enters times 2|dy|/44 (≈ 5u·|dy|), and
  // the row sum of 45 terms ≤ 0.37|dy| has error (n/8 + 32)·u·45·0.37|dy|, then /45 (≈ 14u·|dy|):
  // 64u·max|dy| absolute leaves a margin, plus a few roundings relative (8u).
  Tensor base = mul(rand({12, 45}, TensorOptions(kF64), nullptr), 4.0).to(kI64).to(kF32);  // ties for amax
  Tensor dy_row = random_tensor({12}, kF32, 5);
  Tensor dy_col = random_tensor({45}, kF32, 6);
  auto run = [&](auto&& fn, const Tensor& dy, double atol, double rtol) {
    Tensor xc = base.clone().requires_grad_(true);
    Tensor xg = gpu(base).requires_grad_(true);
    fn(xc).backward(dy);
    fn(xg).backward(gpu(dy));
    check_gpu(xg.grad(), xc.grad(), atol, rtol);
  };
  run([](const Tensor& x) { return sum(x, {1}); }, dy_row, 0.0, 0.0);
  run([](const Tensor& x) { return mean(x, {0}); }, dy_col, 0.0, 0x1p-24);
  run([](const Tensor& x) { return amax(x, {1}); }, dy_row, 0.0, 2 * 0x1p-24);
  run([](const Tensor& x) { return amin(x.t(), {0}); }, dy_row, 0.0, 2 * 0x1p-24);
  run([](const Tensor& x) { return max(x, 0).values; }, dy_col, 0.0, 0.0);
  const double var_atol = 64 * 0x1p-24 * test::max_abs(dy_row);
  run([](const Tensor& x) { return var(x, {1}); }, dy_row, var_atol, 8 * 0x1p-24);
}

TEST_CASE("CUDA reductions refuse what they do not support", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Tensor b = gpu(tensor(std::vector<double>{1, 0, 1}, {3}).to(kBool));
  CHECK_THROWS_WITH(argmax(b, 0), Catch::Contains("argmax") && Catch::Contains("bool"));
}
