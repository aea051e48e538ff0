// Tests of token-by-token decoding with the char-level LM (models/lm/incremental.h) and of the
// sampling helpers (models/lm/sampling.h): the incremental log-probabilities equal a full
// recompute of the current block at every position — inside a block, across block boundaries,
// with a non-zero starting memory, for long-short (M > w and M ≤ w) and full attention, in f64
// and f32 — the rolled memory equals forward's, feeding whole blocks equals stepping; the
// sampling filters, their distribution, and seeded reproducibility.
#include <cmath>

#include "lm_helpers.h"
#include "lsformer/models/lm/incremental.h"
#include "lsformer/models/lm/sampling.h"

using namespace lsf;
using namespace lsf::test::lm_tests;

namespace {

// Decodes `blocks` blocks of B streams token by token from `start`, and at every position
// compares the decoder's log-probabilities with a full forward of the current block (its tokens
// so far, right-padded to M with token 0) from the block's starting memory; at every block end
// compares the rolled memory with forward's. Returns after the last block.
void check_incremental(lm::TransformerLSModel& model, const lm::Memory& start, int64_t blocks, uint32_t seed) {
  const lm::LmModelOptions& o = model.options();
  const int64_t B = start.batch_size(), M = o.block_length, V = o.vocab_size;
  const DType dt = model.in_emb->weight.dtype();
  const Tensor stream = random_tokens(B, blocks * M, V, seed);
  lm::IncrementalDecoder decoder(model, start);
  lm::Memory block_start = start;  // the forward reference's memory at the current block's start
  for (int64_t k = 0; k < blocks; ++k) {
    // Errors of the two routes after k + 1 blocks (the memories differ by the rounding of the
    // blocks before), with two routes: ×2.
    const double tol = 2 * model_tol(o, dt, k + 1);
    for (int64_t t = 0; t < M; ++t) {
      const Tensor lp = decoder.step(stream.select(1, k * M + t).contiguous());
      REQUIRE(lp.shape() == Shape({B, V}));
      std::vector<int64_t> ids(static_cast<size_t>(B * M), 0);
      const auto all = stream.to_vector<int64_t>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s <= t; ++s) ids[size_t(b * M + s)] = all[size_t(b * blocks * M + k * M + s)];
      lm::Memory memory = block_start;
      const Tensor want = model.forward(tensor(ids, {B, M}), memory).select(1, t).contiguous();
      INFO("block " << k << " position " << t);
      test::check_close(lp, want, tol, tol);
      if (t == M - 1) {
        block_start = memory;  // forward's rolled memory = the decoder's after the block
        REQUIRE(decoder.position() == 0);
        for (size_t i = 0; i < memory.layers.size(); ++i) {
          INFO("memory layer " << i);
          test::check_close(decoder.memory().layers[i], memory.layers[i], tol, tol);
        }
      } else {
        REQUIRE(decoder.position() == t + 1);
      }
    }
  }
}

// A non-zero memory: the one a forward over a random block leaves.
lm::Memory warm_memory(lm::TransformerLSModel& model, int64_t B, uint32_t seed) {
  NoGradGuard ng;
  lm::Memory memory = model.initial_memory(B);
  model.forward(random_tokens(B, model.options().block_length, model.options().vocab_size, seed), memory);
  return memory;
}

}  // namespace

TEST_CASE("LM decoding: each step equals a full recompute of the block, across blocks and with memory", "[lm]") {
  struct Variant {
    const char* name;
    lm::LmModelOptions options;
  };
  lm::LmModelOptions short_block = tiny();  // M = 4 ≤ w = 8, l = 4, r = 1, C = 8
  short_block.block_length = 4;
  short_block.window = 8;
  short_block.chunk_length = 4;
  short_block.rank = 1;
  lm::LmModelOptions long_memory = tiny();  // C = 12 > M = 8: the memory keeps rows of two blocks
  long_memory.memory_length = 12;
  lm::LmModelOptions full = tiny(lm::LmAttention::Full);
  full.memory_length = 6;
  for (const auto& v : {Variant{"long-short M > w", tiny()}, Variant{"long-short M ≤ w", short_block},
                        Variant{"long-short C > M", long_memory}, Variant{"full", full}}) {
    for (DType dt : {kF64, kF32}) {
      INFO(v.name << " " << dt);
      lm::TransformerLSModel model(v.options);
      randomise(model, 41);
      model.to(dt);
      model.eval();
      NoGradGuard ng;
      check_incremental(model, warm_memory(model, 2, 43), /*blocks=*/3, 47);
    }
  }
}

TEST_CASE("LM decoding: feeding whole blocks equals stepping, generate continues the decoder", "[lm]") {
  lm::TransformerLSModel model(tiny());
  randomise(model, 53);
  model.to(kF64);
  model.eval();
  NoGradGuard ng;
  const Tensor prompt = random_tokens(2, 19, 11, 59);  // two whole blocks and 3 more tokens
  lm::IncrementalDecoder fed(model, 2), stepped(model, 2);
  const Tensor a = fed.feed(prompt);
  Tensor b;
  for (int64_t t = 0; t < 19; ++t) b = stepped.step(prompt.select(1, t).contiguous());
  const double tol = 2 * model_tol(model.options(), kF64, 3);
  test::check_close(a, b, tol, tol);
  CHECK(fed.position() == 3);
  CHECK(stepped.position() == 3);
  for (size_t i = 0; i < 2; ++i) test::check_close(fed.memory().layers[i], stepped.memory().layers[i], tol, tol);

  // generate: the same seed gives the same text; the decoder has read every sampled token.
  auto text = [&](uint64_t seed) {
    lm::IncrementalDecoder d(model, 2);
    Generator g(seed);
    Tensor out = lm::generate(d, prompt, 10, {.temperature = 1.0, .top_k = 5, .top_p = 0.9}, g);
    CHECK(d.position() == (19 + 10) % 8);
    return out.to_vector<int64_t>();
  };
  const auto first = text(1);
  CHECK(first.size() == 20);
  for (int64_t id : first) CHECK((id >= 0 && id < 11));
  CHECK(text(1) == first);
  CHECK(text(2) != first);

  CHECK_THROWS_WITH(fed.step(zeros({3}, kI64)), Catch::Contains("[B] = [2]"));
  CHECK_THROWS_WITH(fed.step(full({2}, 11.0, TensorOptions(kI64))), Catch::Contains("vocab_size = 11"));
  model.train();
  CHECK_THROWS_WITH(lm::IncrementalDecoder(model, 1), Catch::Contains("model.eval()"));
}

TEST_CASE("sampling: greedy, top-k, top-p and temperature pick from the right set", "[lm]") {
  // Two rows over 5 tokens: p = [0.1, 0.5, 0.05, 0.3, 0.05] and a tie between ids 0 and 4.
  const std::vector<double> p0 = {0.1, 0.5, 0.05, 0.3, 0.05}, p1 = {0.4, 0.1, 0.05, 0.05, 0.4};
  std::vector<double> logs;
  for (double x : p0) logs.push_back(std::log(x));
  for (double x : p1) logs.push_back(std::log(x));
  const Tensor lp = tensor(logs, {2, 5});
  Generator g(3);
  CHECK(lm::sample_next_tokens(lp, {.temperature = 0.0}, g).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  for (int i = 0; i < 50; ++i) {
    // top_k = 1 and a tiny top_p are greedy whatever the draw; top_k = 2 keeps {1, 3} / {0, 4}.
    CHECK(lm::sample_next_tokens(lp, {.top_k = 1}, g).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
    CHECK(lm::sample_next_tokens(lp, {.top_p = 0.01}, g).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
    const auto k2 = lm::sample_next_tokens(lp, {.top_k = 2}, g).to_vector<int64_t>();
    CHECK((k2[0] == 1 || k2[0] == 3));
    CHECK((k2[1] == 0 || k2[1] == 4));
    // top_p = 0.75: the sorted masses 0.5, 0.8 reach 0.75 with two tokens {1, 3}.
    const auto nucleus = lm::sample_next_tokens(lp, {.top_p = 0.75}, g).to_vector<int64_t>();
    CHECK((nucleus[0] == 1 || nucleus[0] == 3));
  }
  // Frequencies of N draws: temperature 1 gives p0; temperature 0.5 gives p0² renormalised.
  // Each count is within 5 standard deviations √(N·q(1−q)) of N·q.
  const int N = 4000;
  for (double temperature : {1.0, 0.5}) {
    std::vector<double> q(5);
    double total = 0;
    for (int i = 0; i < 5; ++i) total += (q[size_t(i)] = std::pow(p0[size_t(i)], 1.0 / temperature));
    std::vector<int> counts(5, 0);
    const Tensor row = lp.narrow(0, 0, 1).expand({N, 5}).contiguous();
    for (int64_t id : lm::sample_next_tokens(row, {.temperature = temperature}, g).to_vector<int64_t>()) ++counts[size_t(id)];
    for (int i = 0; i < 5; ++i) {
      const double want = N * q[size_t(i)] / total, sd = std::sqrt(want * (1 - q[size_t(i)] / total));
      INFO("temperature " << temperature << " id " << i << " count " << counts[size_t(i)] << " expected " << want);
      CHECK(std::fabs(counts[size_t(i)] - want) <= 5 * sd);
    }
  }
  // The same seed gives the same draws.
  Generator a(9), b(9), c(10);
  const Tensor many = lp.narrow(0, 0, 1).expand({64, 5}).contiguous();
  const auto da = lm::sample_next_tokens(many, {}, a).to_vector<int64_t>();
  CHECK(da == lm::sample_next_tokens(many, {}, b).to_vector<int64_t>());
  CHECK(da != lm::sample_next_tokens(many, {}, c).to_vector<int64_t>());

  CHECK_THROWS_WITH(lm::sample_next_tokens(lp, {.temperature = -1.0}, g), Catch::Contains("temperature"));
  CHECK_THROWS_WITH(lm::sample_next_tokens(lp, {.top_k = -1}, g), Catch::Contains("top_k"));
  CHECK_THROWS_WITH(lm::sample_next_tokens(lp, {.top_p = 0.0}, g), Catch::Contains("top_p"));
  CHECK_THROWS_WITH(lm::sample_next_tokens(zeros({5}), {}, g), Catch::Contains("[B, V]"));
}
