// Optimizer kernels on CUDA against the CPU (SGD, Adam / AdamW per tensor and multi-tensor,
// the AdamW optimizer on GPU parameters, norm_pow_sum and scale_), plus the CPU-running check
// that the multi-tensor Adam entry point equals the per-tensor one bit for bit.
#include <cmath>

#include "helpers.h"
#include "lsformer/models/optim/adam.h"
#include "lsformer/ops/optim_update.h"

using namespace lsf;

namespace {

// Parameters, gradients (one transposed, so strided) and zero moments for a few shapes.
struct AdamCase {
  std::vector<Tensor> params, grads, m, v, vmax;
};

AdamCase make_case(DType dtype, Device device, uint64_t seed) {
  Generator gen(seed);
  AdamCase c;
  const std::vector<Shape> shapes = {{17}, {33, 65}, {5, 7, 3}, {129, 31}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    c.params.push_back(randn(shapes[i], TensorOptions(dtype), &gen).to(device));
    Tensor g = randn(shapes[i], TensorOptions(dtype), &gen);
    if (i == 3) g = randn({31, 129}, TensorOptions(dtype), &gen).t();  // a strided gradient
    c.grads.push_back(g.to(device));
    for (auto* state : {&c.m, &c.v, &c.vmax}) state->push_back(zeros(shapes[i], TensorOptions(dtype).device(device)));
  }
  return c;
}

// Tensor i's update at step t: group-like differences (lr, decay, amsgrad) across tensors.
AdamUpdate update_for(size_t i, int64_t t) {
  return AdamUpdate{.lr = i % 2 == 0 ? 1e-2 : 3e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                    .weight_decay = i == 1 ? 0.0 : 0.05, .decoupled = true, .amsgrad = i == 2, .step = t};
}

std::vector<AdamTensor> list_of(const AdamCase& c, int64_t t) {
  std::vector<AdamTensor> list;
  for (size_t i = 0; i < c.params.size(); ++i)
    list.push_back({c.params[i], c.grads[i], c.m[i], c.v[i], c.vmax[i], update_for(i, t)});
  return list;
}

Tensor host(const Tensor& t) { return t.to(kCPU); }

// Adam / AdamW after `steps` steps, GPU against CPU. Both run the same sequence of correctly
// rounded operations (the GPU with explicit _rn intrinsics), so they agree exactly unless the
// host compiler contracted some a·b + c into an FMA: then each such operation differs by at
// most one rounding. A step has ≤ 16 rounded operations per element feeding p, m and v; errors
// carried from earlier steps are damped by β1, β2 < 1 in the moments and enter p once per
// step scaled by lr/(1 − β1^t) ≤ 10·lr, so after `steps` steps
// |Δp| ≤ steps·16·u·(|p| + 10·lr) with u = 2⁻²⁴ (f32) or 2⁻⁵³ (f64) — rtol = atol = steps·16·u·10.
double adam_tolerance(DType dtype, int steps) {
  const double u = dtype == kF32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
  return steps * 16 * u * 10;
}

}  // namespace

TEST_CASE("adam_multi_update_ on the CPU equals adam_update_ per tensor, bit for bit", "[optim]") {
  for (DType dtype : {kF32, kF64}) {
    INFO(dtype);
    AdamCase a = make_case(dtype, kCPU, 1), b = make_case(dtype, kCPU, 1);
    for (int64_t t = 1; t <= 3; ++t) {
      adam_multi_update_(list_of(a, t));
      for (size_t i = 0; i < b.params.size(); ++i)
        adam_update_(b.params[i], b.grads[i], b.m[i], b.v[i], b.vmax[i], update_for(i, t));
    }
    for (size_t i = 0; i < a.params.size(); ++i) {
      CHECK(a.params[i].to_vector<double>() == b.params[i].to_vector<double>());
      CHECK(a.m[i].to_vector<double>() == b.m[i].to_vector<double>());
      CHECK(a.v[i].to_vector<double>() == b.v[i].to_vector<double>());
      CHECK(a.vmax[i].to_vector<double>() == b.vmax[i].to_vector<double>());
    }
  }
}

TEST_CASE("adam_multi_update_ checks every entry before writing any", "[optim]") {
  AdamCase a = make_case(kF32, kCPU, 2);
  const Tensor before = a.params[0].clone();
  std::vector<AdamTensor> list = list_of(a, 1);
  list[2].exp_avg = zeros({3});
  CHECK_THROWS_WITH(adam_multi_update_(list), Catch::Contains("adam_multi_update_") && Catch::Contains("exp_avg"));
  CHECK(a.params[0].to_vector<double>() == before.to_vector<double>());
}

TEST_CASE("cuda adam_update_ / adam_multi_update_: 10 AdamW steps equal the CPU's", "[cuda][optim]") {
  LSF_REQUIRE_CUDA_DEVICE();
  const int steps = 10;
  for (DType dtype : {kF32, kF64}) {
    INFO(dtype);
    AdamCase cpu = make_case(dtype, kCPU, 3), single = make_case(dtype, kCUDA, 3), multi = make_case(dtype, kCUDA, 3);
    for (int64_t t = 1; t <= steps; ++t) {
      adam_multi_update_(list_of(cpu, t));
      adam_multi_update_(list_of(multi, t));
      for (size_t i = 0; i < single.params.size(); ++i)
        adam_update_(single.params[i], single.grads[i], single.m[i], single.v[i], single.vmax[i], update_for(i, t));
    }
    const double tol = adam_tolerance(dtype, steps);
    for (size_t i = 0; i < cpu.params.size(); ++i) {
      INFO("tensor " << i);
      test::check_close(host(single.params[i]), cpu.params[i], tol, tol);
      test::check_close(host(multi.params[i]), cpu.params[i], tol, tol);
      test::check_close(host(multi.m[i]), cpu.m[i], tol, tol);
      test::check_close(host(multi.v[i]), cpu.v[i], tol, tol);
      // The per-tensor and multi-tensor GPU kernels run the same element function.
      CHECK(host(single.params[i]).to_vector<double>() == host(multi.params[i]).to_vector<double>());
    }
  }
}

TEST_CASE("cuda AdamW optimizer on GPU parameters follows the CPU's for 10 steps", "[cuda][optim]") {
  LSF_REQUIRE_CUDA_DEVICE();
  const int steps = 10;
  Generator gen(4);
  NamedTensors cpu, gpu;
  for (int i = 0; i < 3; ++i) {
    Tensor p = randn({int64_t(40 + i), 23}, TensorOptions(kF32), &gen);
    cpu.push_back({"p" + std::to_string(i), p.clone().requires_grad_(true)});
    gpu.push_back({"p" + std::to_string(i), p.to(kCUDA).requires_grad_(true)});
  }
  optim::AdamW opt_cpu(cpu, {.lr = 1e-2, .weight_decay = 0.1}), opt_gpu(gpu, {.lr = 1e-2, .weight_decay = 0.1});
  for (int t = 0; t < steps; ++t) {
    for (size_t i = 0; i < cpu.size(); ++i) {
      Tensor g = randn(cpu[i].second.shape(), TensorOptions(kF32), &gen);
      cpu[i].second.set_grad(g);
      gpu[i].second.set_grad(g.to(kCUDA));
    }
    opt_cpu.step();
    opt_gpu.step();
  }
  const double tol = adam_tolerance(kF32, steps);
  for (size_t i = 0; i < cpu.size(); ++i) test::check_close(host(gpu[i].second), cpu[i].second.detach(), tol, tol);
  CHECK(opt_gpu.state("p0")->step == steps);
}

TEST_CASE("cuda sgd_update_: 10 momentum / nesterov steps equal the CPU's", "[cuda][optim]") {
  LSF_REQUIRE_CUDA_DEVICE();
  const int steps = 10;
  for (bool nesterov : {false, true}) {
    INFO("nesterov " << nesterov);
    Generator gen(5);
    Tensor p = randn({300, 7}, TensorOptions(kF32), &gen);
    Tensor pg = p.to(kCUDA), buf = zeros({300, 7}), bufg = zeros({300, 7}).to(kCUDA);
    for (int t = 0; t < steps; ++t) {
      Tensor g = randn({7, 300}, TensorOptions(kF32), &gen).t();  // strided
      const SgdUpdate u{.lr = 0.05, .momentum = 0.9, .dampening = 0.0, .weight_decay = 1e-3, .nesterov = nesterov,
                        .init_buffer = t == 0};
      sgd_update_(p, g, buf, u);
      sgd_update_(pg, g.to(kCUDA), bufg, u);
    }
    // ≤ 6 rounded operations per step; a contracted FMA on the host differs by one rounding
    // each; errors carried in the buffer are damped by momentum < 1 and enter p scaled by
    // lr/(1 − momentum) ≤ 0.5: |Δ| ≤ steps·6·2⁻²⁴·(|p| + 1).
    const double tol = steps * 6 * std::ldexp(1.0, -24);
    test::check_close(host(pg), p, tol, tol);
    test::check_close(host(bufg), buf, tol, tol);
  }
}

TEST_CASE("norm_pow_sums gives each tensor's norm_pow_sum, empty ones 0, and checks its inputs", "[optim]") {
  Generator gen(8);
  const TensorList xs = {randn({7}, TensorOptions(kF32), &gen), zeros({0}), randn({3, 5}, TensorOptions(kF64), &gen),
                         randn({64}, TensorOptions(kF32), &gen).slice(0, 0, 64, 2)};  // strided
  for (double p : {1.0, 2.0, 3.0, double(INFINITY)}) {
    INFO("p " << p);
    const std::vector<double> sums = norm_pow_sums(xs, p);
    REQUIRE(sums.size() == xs.size());
    for (size_t i = 0; i < xs.size(); ++i) CHECK(sums[i] == norm_pow_sum(xs[i], p));  // the same bits
    CHECK(sums[1] == 0.0);
  }
  CHECK(norm_pow_sums({}, 2.0).empty());
  CHECK_THROWS_WITH(norm_pow_sums({xs[0], Tensor()}, 2.0), Catch::Contains("norm_pow_sums") && Catch::Contains("undefined"));
  CHECK_THROWS_WITH(norm_pow_sums(xs, 0.0), Catch::Contains("the norm order must be positive or inf, got 0"));
  CHECK_THROWS_WITH(norm_pow_sums({arange(3)}, 2.0), Catch::Contains("expected a floating-point tensor"));
}

TEST_CASE("cuda norm_pow_sums: one synchronisation, each value norm_pow_sum's on the GPU", "[cuda][optim]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Generator gen(9);
  TensorList xs;
  for (int64_t n : {int64_t(5), int64_t(0), int64_t(100003), int64_t(1) << 20, int64_t(257)})
    xs.push_back(randn({n}, TensorOptions(n % 2 ? kF64 : kF32), &gen).to(kCUDA));
  for (double p : {1.0, 2.0, 3.0, double(INFINITY)}) {
    INFO("p " << p);
    const std::vector<double> sums = norm_pow_sums(xs, p);
    REQUIRE(sums.size() == xs.size());
    for (size_t i = 0; i < xs.size(); ++i) CHECK(sums[i] == norm_pow_sum(xs[i], p));  // the same launches
  }
  // Tensors on several devices: one call per device, each value the tensor's own.
  const Tensor host = randn({3});
  const std::vector<double> mixed = norm_pow_sums({xs[0], host, xs[2]}, 2.0);
  CHECK(mixed == std::vector<double>{norm_pow_sum(xs[0], 2.0), norm_pow_sum(host, 2.0), norm_pow_sum(xs[2], 2.0)});
}

TEST_CASE("cuda norm_pow_sum and scale_ equal the CPU's", "[cuda][optim]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Generator gen(6);
  for (DType dtype : {kF32, kF64}) {
    for (int64_t n : {int64_t(5), int64_t(100003), int64_t(1) << 21}) {
      INFO(dtype << " n " << n);
      Tensor x = randn({n}, TensorOptions(dtype), &gen);
      Tensor xg = x.to(kCUDA);
      for (double p : {1.0, 2.0, 3.0}) {
        // Both sum n non-negative terms in double, in different orders: each partial sum is
        // rounded at most ⌈log2 n⌉ + (terms per thread) times; |Δ| ≤ n·2⁻⁵³·Σ ≤ n·2⁻⁵³·result.
        // (p = 3 uses pow on both sides: ≤ 2 ulp per term more, covered by the same n·2⁻⁵³.)
        const double want = norm_pow_sum(x, p), got = norm_pow_sum(xg, p);
        CHECK(std::fabs(got - want) <= double(n) * std::ldexp(1.0, -52) * want);
      }
      CHECK(norm_pow_sum(xg, INFINITY) == norm_pow_sum(x, INFINITY));  // max: exact
      Tensor y = x.clone();
      scale_(y, 0.37);
      scale_(xg, 0.37);
      CHECK(host(xg).to_vector<double>() == y.to_vector<double>());  // one rounded product
    }
  }
}
