// Host-side logic of the CUDA backend, tested on the CPU (no GPU needed): the caching
// allocator's size classes, free lists and statistics (cuda/alloc_bins.h) and the plan that
// maps gemm_kernel's contract onto cuBLAS calls (cuda/gemm_plan.h), executed here by a
// reference column-major GEMM and compared with the CPU gemm_kernel.
#include <cstdlib>
#include <set>

#include "lsformer/cuda/alloc_bins.h"
#include "lsformer/cuda/gemm_plan.h"
#include "lsformer/ops/kernels/matmul.h"
#include "cuda_gemm_cases.h"
#include "helpers.h"

using namespace lsf;
namespace alloc = lsf::cuda::alloc;

TEST_CASE("cuda allocator: size classes", "[cuda_host]") {
  CHECK(alloc::round_size(0) == 512);
  CHECK(alloc::round_size(1) == 512);
  CHECK(alloc::round_size(512) == 512);
  CHECK(alloc::round_size(513) == 1024);
  CHECK(alloc::round_size(4000) == 4096);
  CHECK(alloc::round_size(size_t(1) << 20) == size_t(1) << 20);          // largest small class
  CHECK(alloc::round_size((size_t(1) << 20) + 1) == size_t(2) << 20);    // large: 2 MiB steps
  CHECK(alloc::round_size(size_t(2) << 20) == size_t(2) << 20);
  CHECK(alloc::round_size((size_t(3) << 20)) == size_t(4) << 20);
  CHECK(alloc::round_size((size_t(4) << 20) + 1) == size_t(6) << 20);
  for (size_t n : {1, 511, 777, 65537, 1048575, 1048577, 5000000, 123456789}) {
    const size_t s = alloc::round_size(n);
    CHECK(s >= n);
    CHECK(s % 512 == 0);
    CHECK(s - n < (n <= alloc::kSmallLimit ? alloc::kMinBlock : alloc::kLargeGranularity));  // waste bound
  }
}

namespace {
// A pool over malloc with a byte budget, counting driver calls.
struct FakeDriver {
  size_t budget = size_t(64) << 20;
  size_t used = 0;
  int mallocs = 0, frees = 0;
  std::map<void*, size_t> live;
  alloc::CachingPool pool{[this](size_t n) -> void* {
                            if (used + n > budget) return nullptr;
                            void* p = std::malloc(n);
                            used += n;
                            live[p] = n;
                            ++mallocs;
                            return p;
                          },
                          [this](void* p) {
                            used -= live.at(p);
                            live.erase(p);
                            std::free(p);
                            ++frees;
                          }};
  ~FakeDriver() { pool.release_cached(); }
};
}  // namespace

TEST_CASE("cuda allocator: reuse and statistics", "[cuda_host]") {
  FakeDriver d;
  void* p = d.pool.allocate(4000);
  REQUIRE(p != nullptr);
  MemoryStats s = d.pool.stats();
  CHECK(s.current_bytes == 4000);   // requested bytes
  CHECK(s.peak_bytes == 4000);
  CHECK(s.reserved_bytes == 4096);  // the size class held from the driver
  CHECK(s.allocations == 1);
  d.pool.deallocate(p, 4000);
  s = d.pool.stats();
  CHECK(s.current_bytes == 0);
  CHECK(s.peak_bytes == 4000);
  CHECK(s.reserved_bytes == 4096);  // cached, not returned
  CHECK(d.pool.cached_bytes() == 4096);

  // Same class (3585..4096 bytes): the cached block, no driver call, no growth.
  void* q = d.pool.allocate(3600);
  CHECK(q == p);
  CHECK(d.mallocs == 1);
  CHECK(d.pool.reuses() == 1);
  CHECK(d.pool.stats().reserved_bytes == 4096);
  // Another class: a new block.
  void* big = d.pool.allocate(3 << 20);
  CHECK(d.mallocs == 2);
  s = d.pool.stats();
  CHECK(s.reserved_bytes == 4096 + (4 << 20));
  CHECK(s.current_bytes == 3600 + (3 << 20));
  CHECK(s.peak_bytes == s.current_bytes);
  d.pool.deallocate(big, 3 << 20);
  d.pool.reset_peak();
  CHECK(d.pool.stats().peak_bytes == 3600);

  // release_cached gives back only the unused blocks.
  CHECK(d.pool.release_cached() == (4 << 20));
  CHECK(d.frees == 1);
  CHECK(d.pool.stats().reserved_bytes == 4096);
  d.pool.deallocate(q, 3600);
}

TEST_CASE("cuda allocator: out of memory leaves the statistics alone", "[cuda_host]") {
  FakeDriver d;
  d.budget = size_t(8) << 20;
  void* a = d.pool.allocate(6 << 20);
  REQUIRE(a != nullptr);
  d.pool.deallocate(a, 6 << 20);  // 6 MiB cached
  const MemoryStats before = d.pool.stats();
  CHECK(d.pool.allocate(4 << 20) == nullptr);  // 6 cached + 4 > 8: the driver refuses
  const MemoryStats after = d.pool.stats();
  CHECK(after.current_bytes == before.current_bytes);
  CHECK(after.reserved_bytes == before.reserved_bytes);
  CHECK(after.allocations == before.allocations);
  // What the CUDA allocator does next: free the cache and retry.
  d.pool.release_cached();
  void* b = d.pool.allocate(4 << 20);
  CHECK(b != nullptr);
  d.pool.deallocate(b, 4 << 20);
}

namespace {
// Runs a plan as cuBLAS would: column-major, C_i = alpha·op(A_i)·op(B_i) + beta·C_i.
void run_plan(const cuda::gemm_plan::Plan& plan, const Tensor& c, const Tensor& a, const Tensor& b, double alpha,
              double beta) {
  double* C = static_cast<double*>(c.raw_data());
  const double* TA = static_cast<const double*>(a.raw_data());
  const double* TB = static_cast<const double*>(b.raw_data());
  if (plan.calls.empty()) {  // K = 0: c = beta·c over c's own strides
    Tensor flat = c;
    const std::vector<double> v = c.to_vector<double>();
    std::vector<double> scaled(v.size());
    for (size_t i = 0; i < v.size(); ++i) scaled[i] = beta == 0.0 ? 0.0 : beta * v[i];
    NoGradGuard guard;
    c.copy_(tensor(scaled, c.shape(), TensorOptions(kF64)));
    return;
  }
  for (const auto& k : plan.calls) {
    const double* A = k.a_is_b ? TB : TA;
    const double* B = k.a_is_b ? TA : TB;
    const double be = k.accumulate ? 1.0 : beta;
    for (int64_t i = 0; i < k.batch; ++i)
      for (int64_t j = 0; j < k.n; ++j)
        for (int64_t r = 0; r < k.m; ++r) {
          double sum = 0;
          for (int64_t p = 0; p < k.k; ++p) {
            const double x = k.trans_a ? A[k.a + i * k.stride_a + p + r * k.lda] : A[k.a + i * k.stride_a + r + p * k.lda];
            const double y = k.trans_b ? B[k.b + i * k.stride_b + j + p * k.ldb] : B[k.b + i * k.stride_b + p + j * k.ldb];
            sum += x * y;
          }
          double& out = C[k.c + i * k.stride_c + r + j * k.ldc];
          out = be == 0.0 ? alpha * sum : alpha * sum + be * out;
        }
  }
}
}  // namespace

TEST_CASE("cuBLAS plan reproduces the CPU gemm_kernel", "[cuda_host]") {
  for (const test::GemmCase& gc : test::gemm_cases()) {
    INFO("case: " << gc.name);
    const Tensor a = gc.a_view(gc.a_base), b = gc.b_view(gc.b_base);
    const Tensor c_cpu = gc.c_view(gc.c_base.clone()), c_plan = gc.c_view(gc.c_base.clone());
    gemm_kernel(kCPU, c_cpu, a, b, gc.alpha, gc.beta);
    const auto plan = cuda::gemm_plan::make_plan(c_plan.shape(), a.strides(), b.strides(), c_plan.strides(), a.size(-1));
    run_plan(plan, c_plan, a, b, gc.alpha, gc.beta);
    // f64, two summation orders of `products` terms of randn·randn (|term| ≲ 16): each result
    // is within products·2^-53·Σ|terms| of the exact one; Σ|terms| ≤ 16·products.
    const double tol = 2.0 * double(gc.products) * std::ldexp(1.0, -53) * 16.0 * double(gc.products) + 1e-300;
    test::check_close(c_plan, c_cpu, tol, tol);
  }
}

TEST_CASE("cuBLAS plan: folding and batching", "[cuda_host]") {
  for (const test::GemmCase& gc : test::gemm_cases()) {
    const Tensor a = gc.a_view(gc.a_base), b = gc.b_view(gc.b_base), c = gc.c_view(gc.c_base);
    const auto plan = cuda::gemm_plan::make_plan(c.shape(), a.strides(), b.strides(), c.strides(), a.size(-1));
    INFO("case: " << gc.name << ", " << plan.calls.size() << " calls");
    if (gc.name == "broadcast b (folds into M)") {
      REQUIRE(plan.calls.size() == 1);
      CHECK(plan.M == 18);  // 6 batches × 3 rows: one GEMM
      CHECK(plan.calls[0].batch == 1);
    } else if (gc.name == "weight gradient (folds into K)") {
      REQUIRE(plan.calls.size() == 1);
      CHECK(plan.K == 21);  // the batch sum became contraction
    } else if (gc.name == "batched") {
      REQUIRE(plan.calls.size() == 1);
      CHECK(plan.calls[0].batch == 2);  // one strided-batched call
    } else if (gc.name == "summed c batch") {
      CHECK(plan.calls.size() == 6);  // one call per summed index, in order
      CHECK_FALSE(plan.calls[0].accumulate);
      CHECK(plan.calls[5].accumulate);
    } else if (gc.name == "broadcast a") {
      REQUIRE(plan.calls.size() == 1);
      CHECK(plan.calls[0].batch == 6);
      CHECK((plan.calls[0].a_is_b ? plan.calls[0].stride_b : plan.calls[0].stride_a) == 0);  // a reused
    }
  }
}
