// engine/philox.h, the Philox code shared by the CPU and CUDA kernels, compiled here by the host
// compiler: the Random123 known-answer vectors, the dropout keep rule against the CPU dropout
// kernel, and the per-element uniform / normal values against ops/kernels/random.h and the CPU
// fills. The CUDA kernels compile the same functions for the device (tests/test_cuda_random.cpp
// compares them on a GPU).
#include <cmath>

#include "lsformer/engine/philox.h"
#include "helpers.h"
#include "lsformer/ops/dropout.h"
#include "lsformer/ops/kernels/random.h"
#include "lsformer/ops/kernels/dropout.h"

using namespace lsf;

namespace {

bool words_equal(philox::Words a, std::array<uint32_t, 4> b) {
  return a.w[0] == b[0] && a.w[1] == b[1] && a.w[2] == b[2] && a.w[3] == b[3];
}

}  // namespace

TEST_CASE("philox.h: Philox4x32-10 gives the Random123 known-answer vectors", "[philox]") {
  CHECK(words_equal(philox::philox4x32_10({{0, 0, 0, 0}}, 0, 0), {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  CHECK(words_equal(philox::philox4x32_10({{~0u, ~0u, ~0u, ~0u}}, ~0u, ~0u),
                    {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  CHECK(words_equal(philox::philox4x32_10({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u,
                                          0x299f31d0u),
                    {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
  // engine/random.h's wrappers are the same function.
  for (uint64_t block : {uint64_t(0), uint64_t(7), uint64_t(1) << 40}) {
    const philox::Words w = philox::block_words(0x1234567890abcdefull, block);
    CHECK(words_equal(w, philox_block(0x1234567890abcdefull, block)));
  }
}

TEST_CASE("philox.h: the dropout keep rule is the CPU dropout kernel's mask", "[philox]") {
  const int64_t n = 1001;  // not a multiple of 4
  for (double p : {0.1, 0.5, 0.875}) {
    INFO("p " << p);
    const GeneratorState state{987654321, 33};
    Tensor x = ones({n});
    Tensor y = empty({n});
    Tensor mask = empty({n}, TensorOptions(kU8));
    dropout_forward_kernel(Device(kCPU), y, mask, x, p, state);
    const std::vector<int64_t> m = mask.to(kI64).to_vector<int64_t>();
    const uint32_t threshold = dropout_keep_threshold(p);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      const philox::Words w = philox::block_words(state.seed, state.offset + uint64_t(i / 4));
      const bool keep = philox::dropout_keep(w.w[i % 4], threshold);
      wrong += int64_t(keep) != m[size_t(i)];
      // The integer rule is the float rule u ≥ p (exact, since u = k·2⁻²⁴ and p·2²⁴ ≤ 2²⁴).
      wrong += keep != (double(philox::uniform_from_bits(w.w[i % 4])) >= p);
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("philox.h: per-element uniforms and normals equal ops/kernels/random.h's, bit for bit", "[philox]") {
  const GeneratorState s{42, 1000};
  int64_t wrong = 0;
  for (uint64_t i = 0; i < 2003; ++i) {
    wrong += philox::uniform_f32_element(s.seed, s.offset, i) != uniform_f32_at(s, i);
    wrong += philox::uniform_f64_element(s.seed, s.offset, i) != uniform_f64_at(s, i);
    wrong += philox::normal_element(s.seed, s.offset, i) != normal_at(s, i);
  }
  CHECK(wrong == 0);
}

TEST_CASE("philox.h: the CPU uniform_ and normal_ fills are low + span·u and mean + std·z per element", "[philox]") {
  for (DType dtype : {kF32, kF64}) {
    INFO(dtype);
    const int64_t n = 1003;
    Generator gen(77);
    const GeneratorState state = gen.state();
    Tensor u = empty({n}, TensorOptions(dtype));
    uniform_(u, -2.0, 3.0, &gen);
    Tensor z = empty({n}, TensorOptions(dtype));
    const GeneratorState normal_state = gen.state();
    normal_(z, 0.5, 2.0, &gen);
    const std::vector<double> uv = u.to_vector<double>(), zv = z.to_vector<double>();
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t e = uint64_t(i);
      const double ui = dtype == kF64 ? philox::uniform_f64_element(state.seed, state.offset, e)
                                      : double(philox::uniform_f32_element(state.seed, state.offset, e));
      double want_u = -2.0 + 5.0 * ui;
      double want_z = 0.5 + 2.0 * philox::normal_element(normal_state.seed, normal_state.offset, e);
      if (dtype == kF32) {
        want_u = double(float(want_u));
        want_z = double(float(want_z));
      }
      wrong += uv[size_t(i)] != want_u;
      wrong += zv[size_t(i)] != want_z;
    }
    CHECK(wrong == 0);
  }
}
