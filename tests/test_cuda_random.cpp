// CUDA dropout and random fills against the CPU kernels for the same generator state: dropout
// masks and outputs bit-identical, uniform fills bit-identical, normal fills equal up to the
// transcendental-function differences derived below. Each case skips without a CUDA device.
#include <cmath>
#include <cstring>

#include "helpers.h"
#include "lsformer/ops/dropout.h"
#include "lsformer/ops/kernels/random.h"
#include "lsformer/ops/kernels/dropout.h"

using namespace lsf;

namespace {

// Smallest positive value and mantissa bits (with the implicit one) of each float dtype.
struct FloatFormat {
  double min_subnormal;
  int precision;
};
FloatFormat format_of(DType t) {
  switch (t) {
    case DType::F64: return {std::ldexp(1.0, -1074), 53};
    case DType::BF16: return {std::ldexp(1.0, -133), 8};
    case DType::F16: return {std::ldexp(1.0, -24), 11};
    default: return {std::ldexp(1.0, -149), 24};
  }
}

std::vector<double> host_values(const Tensor& t) { return t.to(kCPU).to(kF64).to_vector<double>(); }

}  // namespace

TEST_CASE("cuda dropout: mask and output bit-identical to the CPU kernel", "[cuda][dropout]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (DType dtype : {kF32, kF64}) {
    for (int64_t n : {int64_t(1), int64_t(1001), int64_t(1) << 20 | 3}) {
      for (double p : {0.1, 0.5, 0.9}) {
        INFO(dtype << " n " << n << " p " << p);
        Generator gen(2024);
        Tensor x = randn({n}, TensorOptions(dtype), &gen);
        const GeneratorState state{0xfeedbeefcafeull, 12345};
        Tensor y = empty({n}, TensorOptions(dtype)), mask = empty({n}, TensorOptions(kU8));
        dropout_forward_kernel(kCPU, y, mask, x, p, state);
        Tensor xg = x.to(kCUDA);
        Tensor yg = empty({n}, TensorOptions(dtype).device(kCUDA)), mg = empty({n}, TensorOptions(kU8).device(kCUDA));
        dropout_forward_kernel(kCUDA, yg, mg, xg, p, state);
        // Exact: the same integer mask rule and one rounding of x·scale in the same dtype.
        CHECK(host_values(mg) == host_values(mask));
        CHECK(host_values(yg) == host_values(y));

        Tensor dy = randn({n}, TensorOptions(dtype), &gen);
        Tensor dx = empty({n}, TensorOptions(dtype));
        Tensor dxg = empty({n}, TensorOptions(dtype).device(kCUDA));
        const double scale = 1.0 / (1.0 - p);
        dropout_backward_kernel(kCPU, dx, dy, mask, scale);
        dropout_backward_kernel(kCUDA, dxg, dy.to(kCUDA), mg, scale);
        CHECK(host_values(dxg) == host_values(dx));  // exact: one rounded product
      }
    }
  }
}

TEST_CASE("cuda dropout: the op draws the CPU's mask from the same generator", "[cuda][dropout]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Tensor x = rand({37, 129}) + 0.5;  // no zeros: a zero output means a dropped element
  Generator cpu_gen(9), gpu_gen(9);
  Tensor y = dropout(x, 0.3, /*training=*/true, &cpu_gen);
  Tensor yg = dropout(x.to(kCUDA), 0.3, /*training=*/true, &gpu_gen);
  CHECK(gpu_gen.state().offset == cpu_gen.state().offset);
  CHECK(host_values(yg) == host_values(y));
}

TEST_CASE("cuda uniform_: bit-identical to the CPU fill for every float dtype", "[cuda][random]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (DType dtype : {kF32, kF64, kBF16, kF16}) {
    for (int64_t n : {int64_t(3), int64_t(4099), int64_t(1) << 20}) {
      INFO(dtype << " n " << n);
      const GeneratorState state{31337, 5};
      Tensor c = empty({n}, TensorOptions(dtype));
      Tensor g = empty({n}, TensorOptions(dtype).device(kCUDA));
      uniform_kernel(kCPU, c, state, -1.5, 2.5);
      uniform_kernel(kCUDA, g, state, -1.5, 2.5);
      // Exact: the uniform is exact and low + span·u is rounded twice on both sides.
      CHECK(host_values(g) == host_values(c));
    }
  }
}

TEST_CASE("cuda normal_: equal to the CPU fill within the log/cos/sin ulp bound", "[cuda][random]") {
  LSF_REQUIRE_CUDA_DEVICE();
  const double mean = 0.25, stdev = 3.0;
  for (DType dtype : {kF32, kF64, kBF16, kF16}) {
    const int64_t n = (int64_t(1) << 18) + 1;
    INFO(dtype);
    const GeneratorState state{8, 0};
    Tensor c = empty({n}, TensorOptions(dtype));
    Tensor g = empty({n}, TensorOptions(dtype).device(kCUDA));
    normal_kernel(kCPU, c, state, mean, stdev);
    normal_kernel(kCUDA, g, state, mean, stdev);
    const std::vector<double> cv = host_values(c), gv = host_values(g);
    // z = √(−2 log u1)·cos(2π u2) in double. glibc's log, cos, sin are within 1 ulp, CUDA's log
    // within 1 ulp and cos / sin within 2 ulp; sqrt and the products are correctly rounded on
    // both. Relative difference of z: ≤ ½(1 + 1) (log, through the square root) + (1 + 2)
    // (cos/sin) + 2 roundings ≈ 6 ulp = 6·2⁻⁵² < 2⁻⁴⁹; mean + std·z then differs by at most
    // δ = 2⁻⁴⁸·(|mean| + std·|z|) after its own rounding. Rounding to the element type can
    // split two values δ apart by one ulp of that type at most (a value at a rounding
    // boundary), so |gpu − cpu| ≤ δ + ulp_T(|cpu|) + min_subnormal_T.
    const FloatFormat f = format_of(dtype);
    int64_t bad = 0, exact = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = cv[size_t(i)], got = gv[size_t(i)];
      const double spread = std::fabs(mean) + std::fabs(want - mean) + 1.0;  // ≥ |mean| + std·|z|
      const double tol = std::ldexp(spread, -48) + std::ldexp(std::fabs(want), 1 - f.precision) + f.min_subnormal;
      bad += !(std::fabs(got - want) <= tol);
      exact += got == want;
    }
    CHECK(bad == 0);
    // After rounding to f32 / bf16 / f16, boundaries are rare: nearly every value is identical
    // (f64 keeps the few-ulp differences).
    if (dtype != kF64) CHECK(exact >= n - n / 100);
  }
}
