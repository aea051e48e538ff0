// The Tensor data structure: dtypes and conversions, factories, metadata, printing, Philox,
// memory statistics and argument errors.
#include <sstream>

#include "helpers.h"
#include "lsformer/engine/dispatch.h"

using namespace lsf;

TEST_CASE("bf16 and f16 conversions round to nearest even and keep specials", "[tensor][dtype]") {
  // bf16 keeps 8 significant bits: 1 + 2⁻⁸ is a tie between 1 and 1 + 2⁻⁷ → even (1).
  CHECK(float(BFloat16(1.0f + 0x1p-8f)) == 1.0f);
  CHECK(float(BFloat16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);  // tie → even mantissa
  CHECK(float(BFloat16(1.0f + 0x1p-8f + 0x1p-20f)) == 1.0f + 0x1p-7f);  // above the tie
  CHECK(std::isnan(float(BFloat16(NAN))));
  CHECK(float(BFloat16(INFINITY)) == INFINITY);
  // f16: 11 significant bits, max 65504, smallest subnormal 2⁻²⁴.
  CHECK(float(Half(1.0f + 0x1p-11f)) == 1.0f);
  CHECK(float(Half(65504.0f)) == 65504.0f);
  CHECK(float(Half(65520.0f)) == INFINITY);  // rounds up past the largest finite value
  CHECK(float(Half(0x1p-24f)) == 0x1p-24f);
  CHECK(float(Half(0x1p-25f)) == 0.0f);         // tie with 0 → even (0)
  CHECK(float(Half(0x1.8p-25f)) == 0x1p-24f);   // above the tie
  CHECK(float(Half(-3.140625f)) == -3.140625f);
  CHECK(std::isnan(float(Half(NAN))));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {  // every finite f16 survives a round trip
    Half h;
    h.bits = uint16_t(bits);
    float f = h;
    if (std::isnan(f)) continue;
    REQUIRE(Half(f).bits == h.bits);
  }
}

TEST_CASE("to(dtype) converts values like static_cast", "[tensor][dtype]") {
  Tensor x = tensor(std::vector<double>{-1.75, 0.0, 2.5, 3.0});
  test::check_equal<int64_t>(x.to(kI64), {4}, {-1, 0, 2, 3});
  test::check_equal<bool>(x.to(kBool), {4}, {true, false, true, true});
  test::check_equal<float>(x.to(kBF16).to(kF32), {4}, {-1.75f, 0.0f, 2.5f, 3.0f});
  test::check_equal<float>(x.to(kF16).to(kF32), {4}, {-1.75f, 0.0f, 2.5f, 3.0f});
  CHECK(x.to(kF64).is_same(x));  // no copy when nothing changes
  Tensor g = x.to(TensorOptions(kF64).requires_grad(true));
  CHECK(g.requires_grad());
  CHECK_FALSE(x.requires_grad());
}

TEST_CASE("factories", "[tensor]") {
  test::check_equal<float>(zeros({2, 2}), {2, 2}, {0, 0, 0, 0});
  test::check_equal<double>(ones({3}, kF64), {3}, {1, 1, 1});
  test::check_equal<int32_t>(full({2}, 7, kI32), {2}, {7, 7});
  test::check_equal<int64_t>(arange(4), {4}, {0, 1, 2, 3});
  test::check_equal<float>(arange(1.0, 2.0, 0.25), {4}, {1.0f, 1.25f, 1.5f, 1.75f});
  test::check_equal<float>(arange(3.0, 0.0, -1.0), {3}, {3, 2, 1});
  CHECK(scalar_tensor(2.5).dim() == 0);
  CHECK(scalar_tensor(2.5).item<double>() == 2.5);
  Tensor x = tensor(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(x.dtype() == kI32);
  CHECK(x.strides() == Strides{3, 1});
  CHECK(ones_like(x).dtype() == kI32);
  CHECK(zeros_like(x).shape() == Shape{2, 3});
  CHECK(full_like(x, 9).to_vector<int32_t>() == std::vector<int32_t>(6, 9));
  CHECK(empty({0, 3}).numel() == 0);
  CHECK(ones({2}, TensorOptions().requires_grad(true)).requires_grad());
  CHECK_THROWS_WITH(tensor(std::vector<float>{1, 2, 3}, {2, 2}), Catch::Contains("3 values") && Catch::Contains("{2, 2}"));
  CHECK_THROWS_WITH(empty({2, -1}), Catch::Contains("negative"));
  CHECK_THROWS_WITH(arange(0.0, 1.0, 0.0), Catch::Contains("arange"));
  CHECK_THROWS_WITH(arange(0.0, 1.0, -1.0), Catch::Contains("arange"));
}

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors", "[tensor][random]") {
  CHECK(philox4x32_10({0, 0, 0, 0}, {0, 0}) == PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  CHECK(philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}) ==
        PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  CHECK(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}) ==
        PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("random tensors are reproducible by seed and have the right moments", "[tensor][random]") {
  manual_seed(42);
  Tensor a = rand({1000});
  Tensor b = randn({100000});
  manual_seed(42);
  CHECK(rand({1000}).to_vector<float>() == a.to_vector<float>());
  CHECK(randn({100000}).to_vector<float>() == b.to_vector<float>());
  CHECK(rand({1000}).to_vector<float>() != a.to_vector<float>());  // the offset advanced
  auto u = a.to_vector<float>();
  for (float v : u) REQUIRE((v >= 0.0f && v < 1.0f));
  // n = 10⁵ standard normals: the sample mean has sd 1/√n ≈ 0.0032 and the variance sd
  // √(2/n) ≈ 0.0045; 5 sd bounds fail with probability < 1e-6.
  CHECK(std::fabs(mean(b).item<double>()) < 5 * 0.0032);
  CHECK(std::fabs(var(b).item<double>() - 1.0) < 5 * 0.0045);
  Generator g(7);
  Tensor c = rand({5}, kF64, &g);
  Generator g2(7);
  CHECK(rand({5}, kF64, &g2).to_vector<double>() == c.to_vector<double>());
  GeneratorState s = g.state();
  CHECK(s.seed == 7);
  CHECK(s.offset == 3);  // 5 f64 values at 2 per block
}

TEST_CASE("metadata, item and errors on undefined tensors", "[tensor]") {
  Tensor x = zeros({2, 3, 4});
  CHECK(x.dim() == 3);
  CHECK(x.numel() == 24);
  CHECK(x.size(-1) == 4);
  CHECK(x.stride(0) == 12);
  CHECK(x.nbytes() == 96);
  CHECK(x.is_contiguous());
  CHECK_FALSE(x.transpose(0, 2).is_contiguous());
  CHECK(reinterpret_cast<uintptr_t>(x.raw_data()) % 64 == 0);  // 64-byte aligned buffers
  CHECK_THROWS_WITH(x.size(3), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(x.item<float>(), Catch::Contains("one-element") && Catch::Contains("{2, 3, 4}"));
  CHECK_THROWS_WITH(x.data_ptr<double>(), Catch::Contains("f32"));
  Tensor u;
  CHECK_FALSE(u.defined());
  CHECK_THROWS_WITH(u.shape(), Catch::Contains("undefined"));
  CHECK(tensor(std::vector<int64_t>{5}).item<double>() == 5.0);
}

TEST_CASE("dense layouts: is_non_overlapping_and_dense and empty_in_layout keep a permuted view's memory order", "[tensor]") {
  Tensor x = zeros({2, 3, 4});
  CHECK(x.is_non_overlapping_and_dense());
  CHECK(x.permute({2, 0, 1}).is_non_overlapping_and_dense());      // a permutation of a dense block
  CHECK(x.view({2, 3, 2, 2}).permute({0, 2, 1, 3}).is_non_overlapping_and_dense());  // a head split
  CHECK_FALSE(x.slice(2, 0, 4, 2).is_non_overlapping_and_dense());  // gaps
  CHECK_FALSE(x.narrow(1, 0, 2).is_non_overlapping_and_dense());
  CHECK_FALSE(zeros({3}).unsqueeze(0).expand({4, 3}).is_non_overlapping_and_dense());  // overlaps
  CHECK(zeros({1, 5}).expand({1, 5}).is_non_overlapping_and_dense());  // size-1 dims take any stride
  CHECK(zeros({0, 3}).t().is_non_overlapping_and_dense());

  // [B, n, h, e] memory seen as [B, h, n, e]: the new tensor has the same strides.
  Tensor heads = zeros({2, 5, 3, 4}).permute({0, 2, 1, 3});
  Tensor same = empty_in_layout_of(heads);
  CHECK(same.shape() == heads.shape());
  CHECK(same.strides() == heads.strides());
  CHECK(same.permute({0, 2, 1, 3}).is_contiguous());
  // Not dense: row-major.
  Tensor gaps = x.slice(2, 0, 4, 2);
  CHECK(empty_in_layout_of(gaps).is_contiguous());
  CHECK(empty_in_layout({3, 2}, {1, 3}, TensorOptions(kF64)).strides() == Strides{1, 3});
  CHECK(empty_in_layout({3, 2}, {1, 3}, TensorOptions(kF64)).dtype() == kF64);
}

TEST_CASE("devices parse and unknown backends are reported", "[tensor][device]") {
  CHECK(Device("cpu") == kCPU);
  CHECK(Device("cuda:1").index == 1);
  CHECK_THROWS_WITH(Device("tpu"), Catch::Contains("unknown device 'tpu'"));
  CHECK_THROWS_WITH(Device("cuda:x"), Catch::Contains("unknown device"));
  bool cuda_built = false;
  for (KernelBase* k : all_kernels()) cuda_built = cuda_built || k->implemented(DeviceType::CUDA);
  if (!cuda_built) {
    CHECK_THROWS_WITH(zeros({2}).to(kCUDA), Catch::Contains("cuda") && Catch::Contains("no cuda backend"));
  }
}

TEST_CASE("CPU memory statistics track current and peak bytes", "[tensor]") {
  MemoryStats before = memory_stats();
  reset_peak_memory();
  {
    Tensor big = empty({1 << 20});  // 4 MiB
    MemoryStats during = memory_stats();
    CHECK(during.current_bytes - before.current_bytes == 4 << 20);
    CHECK(during.peak_bytes >= during.current_bytes);
  }
  MemoryStats after = memory_stats();
  CHECK(after.current_bytes == before.current_bytes);
  CHECK(after.peak_bytes >= before.current_bytes + (4 << 20));
  CHECK(after.reserved_bytes - after.current_bytes >= 4 << 20);  // the block is cached for reuse
  void* cached_block;
  {
    Tensor again = empty({1 << 20});  // the same size comes back from the cache
    cached_block = again.raw_data();
    CHECK(memory_stats().reserved_bytes == after.reserved_bytes);
  }
  {
    // A slightly smaller tensor (packed sequences with fewer real tokens, say) falls in the same
    // size class and reuses the cached block instead of faulting in fresh pages.
    Tensor smaller = empty({(1 << 20) - 20000});
    CHECK(smaller.raw_data() == cached_block);
  }
  {
    // A request two classes below the cached block's (3.2 MiB, 20% smaller) reuses it too.
    Tensor two_classes_down = empty({(1 << 20) * 8 / 10});
    CHECK(two_classes_down.raw_data() == cached_block);
  }
  empty_cpu_cache();
  CHECK(memory_stats().reserved_bytes == memory_stats().current_bytes);
  CHECK(cached_block != nullptr);
}

TEST_CASE("CPU allocator size classes: 8 per power of two from 64 KiB, at most 12.5% over", "[tensor]") {
  CHECK(cpu_block_size(100) == 128);          // small blocks: 64-byte multiples, never cached
  CHECK(cpu_block_size(0) == 64);
  CHECK(cpu_block_size(65535) == 65536);      // just under the cached sizes: a 64-byte multiple
  CHECK(cpu_block_size(65536 + 1) == 65536 + 8192);
  CHECK(cpu_block_size(1 << 20) == 1 << 20);  // a class boundary is its own class
  CHECK(cpu_block_size((1 << 20) + 1) == (1 << 20) + (1 << 17));
  CHECK(cpu_block_size(10'000'000) == 10'485'760);  // 8 MiB + 2 steps of 1 MiB
  for (size_t n : {size_t(1) << 20, size_t(1'500'000), size_t(7'777'777), size_t(123'456'789)}) {
    const size_t b = cpu_block_size(n);
    CHECK(b >= n);
    CHECK(double(b) <= 1.125 * double(n) + 64);
    CHECK(cpu_block_size(b) == b);  // classes are fixed points
  }
}

TEST_CASE("printing follows PyTorch's format", "[tensor][print]") {
  auto str = [](const Tensor& t) {
    std::ostringstream os;
    os << t;
    return os.str();
  };
  CHECK(str(tensor(std::vector<float>{1.5f, -2, 3, 4}, {2, 2})) ==
        "tensor([[ 1.5000, -2.0000],\n        [ 3.0000,  4.0000]], shape={2, 2}, dtype=f32)");
  CHECK(str(tensor(std::vector<double>{1, 2, 3})) == "tensor([1., 2., 3.], shape={3}, dtype=f64)");
  CHECK(str(arange(3)) == "tensor([0, 1, 2], shape={3}, dtype=i64)");
  CHECK(str(tensor(std::vector<bool>{true, false})) == "tensor([ True, False], shape={2}, dtype=bool)");
  CHECK(str(scalar_tensor(0.5)) == "tensor(0.5000, shape={}, dtype=f32)");
  CHECK(str(tensor(std::vector<float>{1e-5f, 1.0f})) == "tensor([1.0000e-05, 1.0000e+00], shape={2}, dtype=f32)");
  CHECK(str(zeros({2, 1, 2})) == "tensor([[[0., 0.]],\n\n        [[0., 0.]]], shape={2, 1, 2}, dtype=f32)");
  std::string big = str(arange(2000));
  CHECK(big == "tensor([   0,    1,    2, ..., 1997, 1998, 1999], shape={2000}, dtype=i64)");
  Tensor g = ones({1}, TensorOptions().requires_grad(true));
  CHECK(str(g) == "tensor([1.], shape={1}, dtype=f32, requires_grad=true)");
  CHECK(str(mul(g, 2.0)) == "tensor([2.], shape={1}, dtype=f32, grad_fn=<mul>)");
  CHECK(str(Tensor()) == "tensor(undefined)");
}
