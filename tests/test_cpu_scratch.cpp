// CpuScratch (engine/scratch.h): a kernel's workspace is taken from the CPU allocator for the
// call and given back after it, so memory_stats() sees it while it lives (peak) and nothing of
// it stays behind (current); the kernels that need one use it: the bf16 kernel's packed
// operands, the partial sums of a product split over its contraction, the skinny kernel's packed
// panels, bias_gelu's per-block dbias rows, the long-short backward's edge and dK̄/dV̄ partials.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "helpers.h"
#include "lsformer/engine/scratch.h"
#include "lsformer/ops/cpu/skinny_gemm.h"
#include "lsformer/ops/kernels/long_short.h"
#include "lsformer/ops/kernels/unary.h"

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

TEST_CASE("the skinny kernel's packed panels are counted while it runs and freed after", "[memory][matmul]") {
  // A transposed b is packed into a [k × ld] panel, ld = n rounded up to 16; c, a and b are
  // std::vectors, so the panel is all the allocator sees.
  constexpr int64_t M = 192, N = 40, K = 256, ld = 48;
  std::vector<float> a(size_t(M * K), 0.5f), b(size_t(N * K), 0.25f), c(size_t(M * N), 0.0f);
  const CallMemory one = measure([&] {
    cpu::skinny_gemm(false, true, M, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f, c.data(), N);
  });
  REQUIRE(one.peak_extra == K * ld * int64_t(sizeof(float)));
  REQUIRE(one.left == 0);
  REQUIRE(c[0] == float(K) * 0.125f);  // Σ of K products 0.5 · 0.25, exact in f32
  // A group packs one panel per product, all alive at once: a transposed one and one with n not
  // a multiple of 16 (b itself is the panel only for an untransposed b with n % 16 == 0).
  std::vector<float> c2(size_t(M * 24), 0.0f), b2(size_t(K * 24), 1.0f);
  const std::vector<cpu::SkinnyProduct<float>> group = {
      {false, true, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f, c.data(), N, nullptr},
      {false, false, 24, K, 1.0f, a.data(), K, b2.data(), 24, 0.0f, c2.data(), 24, nullptr}};
  const CallMemory both = measure([&] { cpu::skinny_gemm_group(M, group); });
  REQUIRE(both.peak_extra == (K * ld + K * 32) * int64_t(sizeof(float)));
  REQUIRE(both.left == 0);
  REQUIRE(c2[0] == float(K) * 0.5f);
}

TEST_CASE("bias_gelu's backward counts its per-block dbias rows and frees them", "[memory]") {
  // One partial row of n per block of kBiasGeluRowBlock rows; dx and dbias exist before the call.
  const test::ThreadCount threads(2);
  constexpr int64_t rows = 512, n = 256;
  manual_seed(5);
  const Tensor x = randn({rows, n}), bias = randn({n}), dy = randn({rows, n});
  const Tensor dx = empty({rows, n}), dbias = empty({n});
  const CallMemory m = measure([&] { bias_gelu_backward_kernel(kCPU, UnaryOp::Gelu, dx, dbias, dy, x, bias); });
  REQUIRE(m.peak_extra == rows / kBiasGeluRowBlock * n * int64_t(sizeof(float)));
  REQUIRE(m.left == 0);
}

TEST_CASE("the long-short backward counts its edge and dK̄/dV̄ partials and frees them", "[memory][attention]") {
  // B 1, h 2, n 1024, e 32, R 32, w 8: blocks of L = 128 queries (4·R), 8 per head, 16 tasks;
  // each keeps 2 · 2·ext rows of dK and of dV (ext = 4) and R rows of dK̄ and of dV̄ for the
  // second passes. One thread: its tile scratch and band rows (~60 KiB) come on top.
  const test::ThreadCount threads(1);
  constexpr int64_t B = 1, h = 2, n = 1024, e = 32, R = 32, tasks = 16, ext2 = 8;
  manual_seed(6);
  const Tensor q = randn({B, h, n, e}), k = randn({B, h, n, e}), v = randn({B, h, n, e});
  const Tensor kbar = randn({B, h, R, e}), vbar = randn({B, h, R, e}), dout = randn({B, h, n, e});
  const Tensor mask = ones({B, n}, TensorOptions(kU8));
  const Tensor out = empty({B, h, n, e}), lse = empty({B, h, n});
  const LongShortGeometry geo{8, false, 0};
  long_short_forward_kernel(kCPU, out, lse, q, k, v, kbar, vbar, mask, geo, LongShortDropout{});
  const Tensor dq = empty({B, h, n, e}), dk = empty({B, h, n, e}), dv = empty({B, h, n, e});
  const Tensor dkbar = empty({B, h, R, e}), dvbar = empty({B, h, R, e});
  const CallMemory m = measure([&] {
    long_short_backward_kernel(kCPU, dq, dk, dv, dkbar, dvbar, dout, lse, q, k, v, kbar, vbar, mask, geo,
                               LongShortDropout{});
  });
  const int64_t edges = 2 * tasks * 2 * ext2 * e, bars = 2 * tasks * R * e;
  REQUIRE(m.peak_extra >= (edges + bars) * int64_t(sizeof(float)));
  REQUIRE(m.left == 0);
}
