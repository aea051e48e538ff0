// CpuScratch (engine/scratch.h): a kernel's workspace is taken from the CPU allocator for the
// call and given back after it, so memory_stats() sees it while it lives (peak) and nothing of
// it stays behind (current); the GEMM paths that need one (the bf16 kernel's packed operands,
// the partial sums of a product split over its contraction) use it.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "helpers.h"
#include "lsformer/engine/scratch.h"

using namespace lsf;

namespace {

// The bytes a call adds to the allocator's peak above what was live before it, and what it
// leaves live after it.
struct CallMemory {
  int64_t peak_extra = 0, left = 0;
};
template <typename F>
CallMemory measure(F&& call) {
  const int64_t before = memory_stats().current_bytes;
  reset_peak_memory();
  call();
  const MemoryStats after = memory_stats();
  return {after.peak_bytes - before, after.current_bytes - before};
}

}  // namespace

TEST_CASE("CpuScratch counts while it lives, is given back after, and reuses the cached block", "[memory]") {
  constexpr size_t kCount = size_t(1) << 20;  // 4 MiB of floats: a cached size class
  const CallMemory m = measure([] {
    const CpuScratch<float> s(kCount);
    REQUIRE(s.data() != nullptr);
    REQUIRE(reinterpret_cast<uintptr_t>(s.data()) % 64 == 0);
    std::fill(s.data(), s.data() + kCount, 1.0f);  // writable, all of it
    REQUIRE(memory_stats().current_bytes >= int64_t(kCount * sizeof(float)));
  });
  REQUIRE(m.peak_extra == int64_t(kCount * sizeof(float)));
  REQUIRE(m.left == 0);
  // The freed block waits in the cache: the next workspace of that size takes it.
  const int64_t reserved = memory_stats().reserved_bytes;
  const float* first = nullptr;
  {
    const CpuScratch<float> s(kCount);
    first = s.data();
    REQUIRE(memory_stats().reserved_bytes == reserved);
  }
  {
    const CpuScratch<float> s(kCount);
    REQUIRE(s.data() == first);
  }
  const CpuScratch<double> none(0);
  REQUIRE(none.data() == nullptr);
}

TEST_CASE("a product split over its contraction counts its partial sums and frees them", "[memory][matmul]") {
  // c [64 × 64] = aᵀ · b with K = 16384 (a weight gradient over every token): split over K, one
  // partial c per thread, then summed in order (ops/cpu/matmul.cpp).
  const test::ThreadCount threads(2);
  manual_seed(3);
  const Tensor a = randn({16384, 64}), b = randn({16384, 64});
  const Tensor at = a.transpose(0, 1);
  Tensor c;
  const CallMemory m = measure([&] { c = matmul(at, b); });
  const int64_t out = 64 * 64 * int64_t(sizeof(float)), partials = 2 * out;
  REQUIRE(m.left == out);                   // the workspace went back
  REQUIRE(m.peak_extra >= out + partials);  // and was counted while the product ran
  // The product's value: each element within the f32 bound of a K-term sum, γ_K · Σ|a||b| with
  // γ_K ≈ K · 2⁻²⁴, of the float64 product.
  const Tensor exact = matmul(at.to(kF64), b.to(kF64)).contiguous();
  const Tensor magnitude = matmul(abs(at).to(kF64), abs(b).to(kF64)).contiguous();
  const Tensor got = c.to(kF64).contiguous();
  const double* e = exact.data_ptr<double>();
  const double* g = got.data_ptr<double>();
  const double* s = magnitude.data_ptr<double>();
  for (int64_t i = 0; i < 64 * 64; ++i) REQUIRE(std::abs(g[i] - e[i]) <= 16384 * 0x1p-24 * s[i]);
}

TEST_CASE("the bf16 kernel's packed operands are counted while it runs and freed after", "[memory][matmul][bf16]") {
  LSF_REQUIRE_BF16_KERNEL();
  manual_seed(4);
  constexpr int64_t M = 256, N = 320, K = 512;
  REQUIRE(cpu::gemm_bf16_pays(M, N, K));
  const Tensor a = randn({M, K}).to(kBF16).to(kF32), b = randn({K, N}).to(kBF16).to(kF32);
  Tensor c;
  const CallMemory m = measure([&] { c = matmul(a, b); });
  const int64_t out = M * N * int64_t(sizeof(float));
  // Both operands packed as bf16 pairs, one 32-bit word per pair: at least (M + N) · K/2 words.
  const int64_t packed = (M + N) * (K / 2) * 4;
  REQUIRE(m.left == out);
  REQUIRE(m.peak_extra >= out + packed);
}
