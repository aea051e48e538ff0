// The CUDA backend's core: the public CUDA API (engine/cuda_api.h), transfers to and from the
// GPU, fill / copy / add_ against the CPU kernels, cuBLAS GEMM against the CPU gemm_kernel, and
// the caching allocator's statistics and out-of-memory error.
//
// [cuda] cases need a GPU and skip without one; the [cuda_api] cases run everywhere and check
// what a CPU-only build or a machine without a GPU answers.
#include <cmath>

#include "cuda_gemm_cases.h"
#include "lsformer/engine/core_kernels.h"
#include "lsformer/ops/kernels/causal_long_short.h"
#include "lsformer/ops/kernels/conv.h"
#include "lsformer/ops/kernels/long_short.h"
#include "lsformer/ops/kernels/matmul.h"
#include "helpers.h"
#include "lsformer/engine/dispatch.h"

using namespace lsf;

namespace {
const Device kGpu = kCUDA;
const DType kAllDTypes[] = {kF32, kF64, kBF16, kF16, kI32, kI64, kU8, kBool};

// Values every dtype holds exactly (0..255 in quarter steps for floats, cut to the dtype).
Tensor sample(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  Tensor u = rand(shape, TensorOptions(kF64), &gen);
  std::vector<double> v = u.to_vector<double>();
  for (double& x : v) {
    x = std::floor(x * 1024.0) / 4.0;  // 0 .. 255.75
    if (!is_floating(dtype)) x = std::floor(x);
    if (dtype == DType::F16 || dtype == DType::BF16) x = std::floor(x);  // ≤ 255: exact in both
    if (dtype == DType::Bool) x = std::fmod(x, 2.0);
  }
  return tensor(v, shape, TensorOptions(kF64)).to(dtype);
}
}  // namespace

TEST_CASE("cuda API answers without a GPU", "[cuda_api]") {
  const int n = cuda::device_count();
  CHECK(n == cuda_device_count());
  if (!cuda::built()) {
    CHECK(n == 0);
    CHECK_THROWS_WITH(cuda::memory_stats(0), Catch::Contains("memory_stats") && Catch::Contains("built without CUDA"));
    CHECK_THROWS_WITH(cuda::empty_cache(), Catch::Contains("built without CUDA"));
    CHECK_THROWS_WITH(cuda::synchronize(), Catch::Contains("built without CUDA"));
    CHECK_THROWS_WITH(cuda::set_allow_tf32(true), Catch::Contains("built without CUDA"));
    CHECK_THROWS_WITH(cuda::device_properties(0), Catch::Contains("built without CUDA"));
    CHECK_THROWS_WITH(empty({2, 3}, TensorOptions(kF32).device(kGpu)), Catch::Contains("cuda"));
    CHECK_FALSE(cuda::allow_tf32());
  } else {
    // A device index past the last usable one is an error naming it (with no GPU: device 0).
    CHECK_THROWS_WITH(cuda::memory_stats(n), Catch::Contains("no CUDA device " + std::to_string(n)));
    CHECK_THROWS_WITH(cuda::device_properties(n), Catch::Contains("no CUDA device"));
    CHECK_THROWS_WITH(cuda::synchronize(n), Catch::Contains("no CUDA device"));
    CHECK_THROWS_WITH(empty({2, 3}, TensorOptions(kF32).device(Device(DeviceType::CUDA, n))),
                      Catch::Contains("no device cuda:" + std::to_string(n)));
    CHECK_NOTHROW(cuda::empty_cache());
  }
  CHECK_THAT(build_info(), Catch::Contains("devices:  cpu"));
}

TEST_CASE("cuda device properties and lsf info", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  const cuda::DeviceProperties p = cuda::device_properties(0);
  CHECK_FALSE(p.name.empty());
  CHECK(p.sm_count > 0);
  CHECK(p.total_memory > (int64_t(1) << 30));
  CHECK(p.major >= 7);
  CHECK_THAT(build_info(), Catch::Contains("cuda:0 " + p.name));
  CHECK_NOTHROW(cuda::synchronize());
  CHECK_NOTHROW(cuda::synchronize(0));
}

TEST_CASE("cuda: to(kCUDA) and back is exact for every dtype and size", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  // 0-d, empty, one element, odd sizes, and 3.5 staging chunks of 4 MiB (pipelined transfer).
  const Shape shapes[] = {{}, {0}, {1}, {3, 7}, {1000, 1001}, {int64_t(3.5 * (1 << 20))}};
  for (DType dt : kAllDTypes)
    for (const Shape& s : shapes) {
      INFO(dt << " " << test::str(s));
      const Tensor x = sample(s, dt, 7);
      const Tensor g = x.to(kGpu);
      CHECK(g.device() == kGpu);
      CHECK(g.dtype() == dt);
      const Tensor back = g.to(kCPU);
      CHECK(back.device() == kCPU);
      CHECK(back.to(kF64).to_vector<double>() == x.to(kF64).to_vector<double>());
    }
}

TEST_CASE("cuda: copies between views and dtypes match the CPU", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (DType from : kAllDTypes) {
    const Tensor x = sample({6, 5, 4}, from, 11);
    const Tensor g = x.to(kGpu);
    for (DType to : kAllDTypes) {
      INFO(from << " → " << to);
      // Conversion is exact on both sides (round-to-nearest-even, truncation, != 0) for these values.
      CHECK(g.to(to).to(kCPU).to(kF64).to_vector<double>() == x.to(to).to(kF64).to_vector<double>());
      // Strided: permuted and sliced sources into a contiguous destination, and back.
      const Tensor xs = x.permute({2, 0, 1}).slice(1, 1, 6, 2);
      const Tensor gs = g.permute({2, 0, 1}).slice(1, 1, 6, 2);
      Tensor dst_c = empty(xs.shape(), TensorOptions(to));
      Tensor dst_g = empty(gs.shape(), TensorOptions(to).device(kGpu));
      copy_kernel(kCPU, dst_c, xs);
      copy_kernel(kGpu, dst_g, gs);
      CHECK(dst_g.to(kCPU).to(kF64).to_vector<double>() == dst_c.to(kF64).to_vector<double>());
      // Strided destination, broadcast (stride-0) source.
      Tensor wide_c = zeros({4, 8}, TensorOptions(to)), wide_g = zeros({4, 8}, TensorOptions(to).device(kGpu));
      copy_kernel(kCPU, wide_c.t().slice(0, 0, 8, 3), x.select(0, 0).select(0, 0).expand({3, 4}));
      copy_kernel(kGpu, wide_g.t().slice(0, 0, 8, 3), g.select(0, 0).select(0, 0).expand({3, 4}));
      CHECK(wide_g.to(kCPU).to(kF64).to_vector<double>() == wide_c.to(kF64).to_vector<double>());
    }
  }
  // High rank with no mergeable dims: every other element of an 8-D tensor.
  const Tensor x = sample({2, 3, 2, 3, 2, 3, 2, 6}, kF32, 3);
  const Tensor xs = x.slice(7, 0, 6, 2).permute({7, 6, 5, 4, 3, 2, 1, 0});
  const Tensor gs = x.to(kGpu).slice(7, 0, 6, 2).permute({7, 6, 5, 4, 3, 2, 1, 0});
  CHECK(gs.contiguous().to(kCPU).to_vector<float>() == xs.contiguous().to_vector<float>());
}

TEST_CASE("cuda: fill matches the CPU on contiguous and strided tensors", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (DType dt : kAllDTypes)
    for (int64_t n : {1, 5, 16, 1000, 1 << 20}) {
      INFO(dt << " n=" << n);
      Tensor g = zeros({n}, TensorOptions(dt).device(kGpu));
      g.fill_(3.0);
      CHECK(g.to(kCPU).to(kF64).to_vector<double>() == std::vector<double>(size_t(n), dt == kBool ? 1.0 : 3.0));
      // Every third element of an offset (unaligned) view, and a transposed block.
      Tensor c = zeros({n}, TensorOptions(dt)), g2 = zeros({n}, TensorOptions(dt).device(kGpu));
      c.slice(0, 1, n, 3).fill_(2.0);
      g2.slice(0, 1, n, 3).fill_(2.0);
      CHECK(g2.to(kCPU).to(kF64).to_vector<double>() == c.to(kF64).to_vector<double>());
    }
  Tensor c = zeros({7, 9}), g = zeros({7, 9}, TensorOptions(kF32).device(kGpu));
  c.t().slice(0, 2, 9).fill_(-1.5);
  g.t().slice(0, 2, 9).fill_(-1.5);
  CHECK(g.to(kCPU).to_vector<float>() == c.to_vector<float>());
}

TEST_CASE("cuda: add_ (gradient accumulation) matches the CPU", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (DType dt : {kF32, kF64, kI32, kI64, kU8})
    for (const Shape& s : {Shape{1}, Shape{7}, Shape{33, 65}, Shape{1 << 20}}) {
      INFO(dt << " " << test::str(s));
      const Tensor a = sample(s, dt, 1), b = sample(s, dt, 2);
      Tensor ac = a.clone(), ag = a.to(kGpu);
      add_inplace_kernel(kCPU, ac, b);
      add_inplace_kernel(kGpu, ag, b.to(kGpu));
      // Exact: one rounding of the same sum on both (integers wrap the same way).
      CHECK(ag.to(kCPU).to(kF64).to_vector<double>() == ac.to(kF64).to_vector<double>());
    }
  // Strided source (transposed), and bf16: added in float, rounded once, as the CPU's f32 path.
  const Tensor a = sample({9, 13}, kF32, 4), b = sample({13, 9}, kF32, 5);
  Tensor ac = a.clone(), ag = a.to(kGpu);
  add_inplace_kernel(kCPU, ac, b.t());
  add_inplace_kernel(kGpu, ag, b.to(kGpu).t());
  CHECK(ag.to(kCPU).to_vector<float>() == ac.to_vector<float>());
  Tensor hg = a.to(kBF16).to(kGpu);
  add_inplace_kernel(kGpu, hg, b.t().contiguous().to(kBF16).to(kGpu));
  const Tensor want = (a.to(kBF16).to(kF32) + b.t().to(kBF16).to(kF32)).to(kBF16);
  CHECK(hg.to(kCPU).to(kF64).to_vector<double>() == want.to(kF64).to_vector<double>());
}

namespace {
// Runs one case on the GPU in `dt` and on the CPU in f64 from the same (dt-rounded) inputs.
void check_gemm_case(const test::GemmCase& gc, DType dt, double unit_roundoff) {
  INFO("case: " << gc.name << ", " << dt);
  const Tensor a0 = gc.a_base.to(dt).to(kF64), b0 = gc.b_base.to(dt).to(kF64), c0 = gc.c_base.to(dt).to(kF64);
  const Tensor c_ref = gc.c_view(c0.clone());
  gemm_kernel(kCPU, c_ref, gc.a_view(a0), gc.b_view(b0), gc.alpha, gc.beta);
  // Σ|a||b| per element bounds the rounding error of any summation order.
  const Tensor c_abs = gc.c_view(abs(c0).clone());
  gemm_kernel(kCPU, c_abs, gc.a_view(abs(a0)), gc.b_view(abs(b0)), std::fabs(gc.alpha), std::fabs(gc.beta));
  const Tensor c_gpu_base = c0.to(dt).to(kGpu);
  const Tensor c_gpu = gc.c_view(c_gpu_base);
  gemm_kernel(kGpu, c_gpu, gc.a_view(a0.to(dt).to(kGpu)), gc.b_view(b0.to(dt).to(kGpu)), gc.alpha, gc.beta);
  // Error bound: (products + 2)·u·(|alpha|·Σ|a||b| + |beta|·|c|) for accumulation in precision u,
  // plus one rounding of the result to dt (2^-8 for bf16, 2^-24 for f32, 2^-53 for f64).
  const double out_round = dt == kBF16 ? std::ldexp(1.0, -8) : dt == kF16 ? std::ldexp(1.0, -11)
                           : dt == kF32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
  double bound = 0;
  for (double v : c_abs.to_vector<double>()) bound = std::max(bound, v);
  const double atol = double(gc.products + 2) * unit_roundoff * bound;
  test::check_close(gc.c_view(c_gpu_base.to(kCPU).to(kF64)), c_ref.contiguous(), atol, out_round);
}
}  // namespace

namespace {
// y on the GPU against y on the CPU, then the gradients of Σ y in every leaf, within tol.
void check_forward_backward(const Tensor& y_cpu, const Tensor& y_gpu, const TensorList& cpu_leaves,
                            const TensorList& gpu_leaves, double tol) {
  test::check_close(y_gpu.to(kCPU), y_cpu, tol, tol);
  y_cpu.backward(ones_like(y_cpu));
  y_gpu.backward(ones_like(y_gpu));
  for (size_t i = 0; i < cpu_leaves.size(); ++i)
    test::check_close(gpu_leaves[i].grad().to(kCPU), cpu_leaves[i].grad(), tol, tol);
}
}  // namespace

TEST_CASE("cuda: gemm matches the CPU gemm_kernel (f32, f64, bf16, f16, TF32)", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  for (const test::GemmCase& gc : test::gemm_cases()) {
    check_gemm_case(gc, kF64, std::ldexp(1.0, -53));
    check_gemm_case(gc, kF32, std::ldexp(1.0, -24));
    check_gemm_case(gc, kBF16, std::ldexp(1.0, -24));  // f32 accumulation of exact bf16 products
    check_gemm_case(gc, kF16, std::ldexp(1.0, -24));
  }
  // TF32 rounds f32 inputs to 10 mantissa bits (u = 2^-11) before the f32 accumulation.
  cuda::set_allow_tf32(true);
  CHECK(cuda::allow_tf32());
  for (const test::GemmCase& gc : test::gemm_cases()) check_gemm_case(gc, kF32, 2.0 * std::ldexp(1.0, -11));
  cuda::set_allow_tf32(false);
  // Integer GEMM has no cuBLAS path: a clear error, as on the CPU.
  const Tensor i = zeros({2, 2}, TensorOptions(kI32).device(kGpu));
  CHECK_THROWS_WITH(gemm_kernel(kGpu, i, i, i, 1.0, 0.0), Catch::Contains("matmul") && Catch::Contains("i32"));
  // matmul end to end (forward and backward on the GPU) against the CPU.
  Generator gen(5);
  const Tensor a = randn({4, 3, 8}, TensorOptions(kF64), &gen), b = randn({8, 5}, TensorOptions(kF64), &gen);
  const Tensor ac = a.clone().requires_grad_(true), bc = b.clone().requires_grad_(true);
  const Tensor ag = a.to(kGpu).requires_grad_(true), bg = b.to(kGpu).requires_grad_(true);
  // f64: 8 (forward) or 12 (weight gradient) products of randn values: 32·2^-53·16 is ample.
  check_forward_backward(matmul(ac, bc), matmul(ag, bg), {ac, bc}, {ag, bg}, 32.0 * std::ldexp(1.0, -53) * 16.0);
}

TEST_CASE("cuda: linear (its composition there) matches the CPU's fused bias, forward and backward", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  Generator gen(6);
  // 40 rows: the CPU runs its skinny kernel with the bias in the store; K = 24 products.
  const Tensor x = randn({2, 20, 24}, TensorOptions(kF64), &gen), w = randn({10, 24}, TensorOptions(kF64), &gen);
  const Tensor b = randn({10}, TensorOptions(kF64), &gen);
  const Tensor xc = x.clone().requires_grad_(true), wc = w.clone().requires_grad_(true), bc = b.clone().requires_grad_(true);
  const Tensor xg = x.to(kGpu).requires_grad_(true), wg = w.to(kGpu).requires_grad_(true);
  const Tensor bg = b.to(kGpu).requires_grad_(true);
  // f64: sums of at most 40 products of randn values (the weight and bias gradients) and one
  // bias add: 64·2^-53·16 is ample.
  check_forward_backward(linear(xc, wc, bc), linear(xg, wg, bg), {xc, wc, bc}, {xg, wg, bg},
                         64.0 * std::ldexp(1.0, -53) * 16.0);
}

TEST_CASE("cuda allocator: statistics and reuse", "[cuda]") {
  LSF_REQUIRE_CUDA_DEVICE();
  cuda::synchronize();
  cuda::empty_cache();
  const MemoryStats s0 = cuda::memory_stats(0);
  CHECK(s0.reserved_bytes >= s0.current_bytes);
  {
    Tensor t = empty({1000}, TensorOptions(kF32).device(kGpu));  // 4000 bytes → a 4096-byte block
    const MemoryStats s1 = cuda::memory_stats(0);
    CHECK(s1.current_bytes == s0.current_bytes + 4000);
    CHECK(s1.reserved_bytes == s0.reserved_bytes + 4096);
    CHECK(s1.peak_bytes >= s1.current_bytes);
    CHECK(s1.allocations == s0.allocations + 1);
  }
  const MemoryStats s2 = cuda::memory_stats(0);
  CHECK(s2.current_bytes == s0.current_bytes);
  CHECK(s2.reserved_bytes == s0.reserved_bytes + 4096);  // cached, not freed
  for (int i = 0; i < 10; ++i) {  // same size class: reuse, no growth
    Tensor t = empty({1024}, TensorOptions(kF32).device(kGpu));
    CHECK(cuda::memory_stats(0).reserved_bytes == s0.reserved_bytes + 4096);
  }
  {
    cuda::reset_peak_memory_stats(0);
    Tensor big = empty({3 << 20}, TensorOptions(kU8).device(kGpu));  // 3 MiB → a 4 MiB block
    const MemoryStats s3 = cuda::memory_stats(0);
    CHECK(s3.reserved_bytes == s0.reserved_bytes + 4096 + (4 << 20));
    CHECK(s3.peak_bytes == s0.current_bytes + (3 << 20));
  }
  cuda::empty_cache();
  const MemoryStats s4 = cuda::memory_stats(0);
  CHECK(s4.reserved_bytes == s0.reserved_bytes);
  CHECK(s4.current_bytes == s0.current_bytes);
}

TEST_CASE("cuda::unavailable_reason says why no device is usable, and nothing when one is", "[cuda_host]") {
  if (cuda::device_count() > 0) {
    CHECK(cuda::unavailable_reason().empty());
  } else if (!cuda::built()) {
    CHECK(cuda::unavailable_reason() == "this build has no CUDA backend");
  } else {
    // The CUDA runtime's own text (a machine without a driver or a GPU, like CI's), never empty.
    CHECK_FALSE(cuda::unavailable_reason().empty());
  }
}

TEST_CASE("cuda allocator: out of memory is an error with the size and the statistics", "[cuda][oom]") {
  LSF_REQUIRE_CUDA_DEVICE();
  const int64_t huge = int64_t(1) << 46;  // 64 TiB: more than any GPU has
  CHECK_THROWS_WITH(empty({huge}, TensorOptions(kU8).device(kGpu)),
                    Catch::Contains("CUDA out of memory") && Catch::Contains(std::to_string(huge)) &&
                        Catch::Contains("reserved") && Catch::Contains("cuda:0"));
  // The device still works afterwards.
  Tensor t = full({4}, 2.0, TensorOptions(kF32).device(kGpu));
  CHECK(t.to(kCPU).to_vector<float>() == std::vector<float>{2, 2, 2, 2});
}

TEST_CASE("cuda: unsupported kernels say so", "[cuda_api]") {
  if (!cuda::built()) return;  // nothing is marked for a backend that is not built
  for (const char* name : {"conv2d_forward_kernel", "conv2d_backward_kernel", "long_short_forward_kernel",
                           "long_short_backward_kernel", "causal_long_short_forward_kernel",
                           "causal_long_short_backward_kernel"}) {
    bool found = false;
    for (KernelBase* k : all_kernels())
      if (std::string(k->name()) == name) {
        found = true;
        // Marked, unless a CUDA implementation has since been registered (which then runs).
        CHECK((k->marked_unsupported(DeviceType::CUDA) || k->implemented(DeviceType::CUDA)));
      }
    CHECK(found);
  }
}
