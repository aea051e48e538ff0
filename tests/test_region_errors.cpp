// Errors raised inside the CPU kernels' OpenMP regions reach the caller as exceptions
// (engine/region_errors.h) instead of ending the process: RegionErrors itself, then the kernels
// whose regions allocate per-thread scratch or run nested GEMMs, each under an allocator that
// refuses every request made on a worker thread of a parallel region. Before RegionErrors such a
// failure called std::terminate (the test process would abort, not fail an assertion).
#include <omp.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "helpers.h"
#include "lsformer/engine/parallel.h"
#include "lsformer/engine/region_errors.h"
#include "lsformer/engine/storage.h"
#include "lsformer/ops/causal_long_short.h"
#include "lsformer/ops/conv.h"
#include "lsformer/ops/long_short.h"

using namespace lsf;
using Catch::Contains;

namespace {

// While alive, the CPU allocator refuses (lsf::Error) every request made on a thread other than
// the team's first inside a parallel region; everything else goes to the real allocator.
class WorkerAllocationFailure final : public Allocator {
 public:
  WorkerAllocationFailure() : base_(allocator_for(DeviceType::CPU)) { register_allocator(DeviceType::CPU, this); }
  ~WorkerAllocationFailure() override { register_allocator(DeviceType::CPU, &base_); }
  WorkerAllocationFailure(const WorkerAllocationFailure&) = delete;
  WorkerAllocationFailure& operator=(const WorkerAllocationFailure&) = delete;

  void* allocate(size_t nbytes, Device device) override {
    if (omp_in_parallel() && omp_get_thread_num() != 0) {
      refused_.fetch_add(1);
      LSF_CHECK(false) << "injected allocation failure on worker thread " << omp_get_thread_num() << " (" << nbytes
                       << " bytes)";
    }
    return base_.allocate(nbytes, device);
  }
  void deallocate(void* p, size_t nbytes, Device device) override { base_.deallocate(p, nbytes, device); }
  MemoryStats stats(Device device) const override { return base_.stats(device); }
  void reset_peak(Device device) override { base_.reset_peak(device); }
  int64_t refused() const { return refused_.load(); }

 private:
  Allocator& base_;
  std::atomic<int64_t> refused_{0};
};

// Runs fn under the failing allocator: it must throw the injected error (so a worker really
// asked for memory) and leave the allocator's live bytes as they were (the scratch of every
// thread was given back while the error travelled).
template <typename Fn>
void require_carried_out(Fn&& fn) {
  const int64_t live_before = memory_stats().current_bytes;
  int64_t refused = 0;
  {
    WorkerAllocationFailure failing;
    REQUIRE_THROWS_WITH(fn(), Contains("injected allocation failure on worker thread"));
    refused = failing.refused();
  }
  REQUIRE(refused > 0);
  REQUIRE(memory_stats().current_bytes == live_before);
}

Tensor rnd(const Shape& shape, Generator& g, bool grad = false) {
  Tensor t = randn(shape, TensorOptions(kF32), &g);
  if (grad) t.requires_grad_(true);
  return t;
}

}  // namespace

TEST_CASE("RegionErrors carries the first exception out of a parallel region", "[parallel]") {
  const test::ThreadCount threads(2);
  SECTION("nothing thrown: nothing rethrown, every iteration ran") {
    RegionErrors errors;
    std::atomic<int> ran{0};
#pragma omp parallel for schedule(static)
    for (int i = 0; i < 100; ++i) errors.run([&] { ran.fetch_add(1); });
    REQUIRE_FALSE(errors.failed());
    REQUIRE_NOTHROW(errors.rethrow());
    REQUIRE(ran.load() == 100);
  }
  SECTION("an lsf::Error thrown on one iteration comes back with its type and message") {
    RegionErrors errors;
    std::atomic<int> ran{0};
#pragma omp parallel for schedule(static)
    for (int i = 0; i < 1000; ++i)
      errors.run([&] {
        ran.fetch_add(1);
        LSF_CHECK(i != 700) << "iteration " << i << " failed";
      });
    REQUIRE(errors.failed());
    REQUIRE_THROWS_AS(errors.rethrow(), Error);
    REQUIRE_THROWS_WITH(errors.rethrow(), Contains("iteration 700 failed"));
    // Static schedule: the thread of iteration 700 owns 500..999 (all of 0..999 on one thread)
    // and skips 701..999 once it has failed, so at most 701 iterations ran.
    REQUIRE(ran.load() <= 701);
  }
  SECTION("every thread failing keeps one of the errors; later runs are skipped") {
    RegionErrors errors;
    std::atomic<int> after{0};
#pragma omp parallel
    {
      errors.run([&] { throw std::runtime_error("thread " + std::to_string(omp_get_thread_num())); });
      // A worksharing loop after the failure: every thread still reaches it (and its barrier).
#pragma omp for schedule(static)
      for (int i = 0; i < 64; ++i) errors.run([&] { after.fetch_add(1); });
    }
    REQUIRE(after.load() == 0);
    REQUIRE_THROWS_AS(errors.rethrow(), std::runtime_error);
    REQUIRE_THROWS_WITH(errors.rethrow(), Contains("thread "));
  }
}

TEST_CASE("a failing scratch allocation inside the causal long-short core is an error, not an abort",
          "[parallel][memory][attention]") {
  const test::ThreadCount threads(2);
  // B·h = 4 tasks and B·h·M·(Nc + w)·e = 196608 (≥ 4 · kParallelGrain): the core runs its
  // (batch, head) tasks in a parallel region with per-thread scratch.
  constexpr int64_t B = 2, h = 2, M = 64, e = 16, w = 16, l = 8, r = 2, Nm = 8, Nc = (Nm + M / l) * r;
  const CausalLongShortGeometry geometry{l, r, Nm};
  Generator g(11);
  const CausalLongShortInputs in{rnd({B, h, M, e}, g, true),  rnd({B, h, w + M, e}, g, true),
                                 rnd({B, h, w + M, e}, g, true), rnd({h, e}, g, true),
                                 rnd({h, e}, g, true),           rnd({h, w, e}, g, true),
                                 rnd({B, h, Nc, e}, g, true),    rnd({B, h, Nc, e}, g, true),
                                 rnd({h, Nc, e}, g, true)};
  const Tensor dout = rnd({B, h, M, e}, g);
  SECTION("forward") { require_carried_out([&] { causal_long_short_attention(in, geometry); }); }
  SECTION("backward") {
    Tensor out = causal_long_short_attention(in, geometry);
    require_carried_out([&] { out.backward(dout); });
  }
  SECTION("the next call after a failure computes what a fresh one does") {
    const Tensor want = causal_long_short_attention(in, geometry).detach();
    {
      WorkerAllocationFailure failing;
      REQUIRE_THROWS(causal_long_short_attention(in, geometry));
    }
    const Tensor got = causal_long_short_attention(in, geometry).detach();
    test::check_close(got, want, 0.0, 0.0);  // the same kernel on the same inputs: the same bits
  }
}

TEST_CASE("a failing scratch allocation inside the long-short core is an error, not an abort",
          "[parallel][memory][attention]") {
  const test::ThreadCount threads(2);
  // B·h·n·S·e ≥ kParallelGrain: the bidirectional core's blocks run in a parallel region.
  constexpr int64_t B = 2, h = 2, n = 64, e = 8, R = 8;
  LongShortAttentionOptions options;
  options.window = 8;
  Generator g(12);
  const Tensor q = rnd({B, h, n, e}, g, true), k = rnd({B, h, n, e}, g, true), v = rnd({B, h, n, e}, g, true);
  const Tensor kbar = rnd({B, h, R, e}, g, true), vbar = rnd({B, h, R, e}, g, true);
  const Tensor dout = rnd({B, h, n, e}, g);
  SECTION("forward") { require_carried_out([&] { long_short_attention(q, k, v, kbar, vbar, Tensor(), options); }); }
  SECTION("backward") {
    Tensor out = long_short_attention(q, k, v, kbar, vbar, Tensor(), options);
    require_carried_out([&] { out.backward(dout); });
  }
}

TEST_CASE("a failing bf16 packing buffer inside batched products is an error, not an abort",
          "[parallel][memory][matmul][bf16]") {
  LSF_REQUIRE_BF16_KERNEL();
  const test::ThreadCount threads(2);
  // Four products of a size the bf16 kernel takes (gemm_bf16_pays): gemm_cpu gives each thread
  // whole products inside a parallel region, and the kernel allocates its packed operands there.
  constexpr int64_t M = 256, N = 320, K = 512;
  REQUIRE(cpu::gemm_bf16_pays(M, N, K));
  manual_seed(13);
  const Tensor a = randn({4, M, K}).to(kBF16).to(kF32), b = randn({4, K, N}).to(kBF16).to(kF32);
  require_carried_out([&] { matmul(a, b); });
}

TEST_CASE("a failing bf16 packing buffer inside a threaded convolution is an error, not an abort",
          "[parallel][memory][conv][bf16]") {
  LSF_REQUIRE_BF16_KERNEL();
  const test::ThreadCount threads(2);
  // Eight images of a 1 × 1 convolution: conv2d gives each thread whole images in a parallel
  // region, and each image's product (128 × 1024 × 128: the direct path, no im2col) is one the
  // bf16 kernel takes, which packs its operands inside the region.
  constexpr int64_t C = 128, O = 128, HW = 32;
  REQUIRE(cpu::gemm_bf16_pays(O, HW * HW, C));
  manual_seed(14);
  const Tensor x = randn({8, C, HW, HW}).to(kBF16).to(kF32), w = randn({O, C, 1, 1}).to(kBF16).to(kF32);
  require_carried_out([&] { conv2d(x, w); });
}
