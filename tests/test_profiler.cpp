// The built-in profiler (engine/profiler.h): kernel calls are counted per op and charged to the
// phase their forward ran in (backward included), nested scopes report self time, paused and
// disabled stretches count nothing. Timings are only checked where a sleep makes them certain;
// everything else is checked through call counts, which are exact.
#include <chrono>
#include <thread>

#include "helpers.h"
#include "lsformer/engine/profiler.h"

using namespace lsf;

namespace {

const profiler::OpStat* find_op(const profiler::Report& r, const std::string& name) {
  for (const auto& op : r.ops)
    if (op.name == name) return &op;
  return nullptr;
}

const profiler::PhaseStat* find_phase(const profiler::Report& r, const std::string& name) {
  for (const auto& ph : r.phases)
    if (ph.phase == name) return &ph;
  return nullptr;
}

// Restores the profiler's off state whatever a test does.
struct ProfilerSession {
  ProfilerSession() {
    profiler::reset();
    profiler::enable();
  }
  ~ProfilerSession() {
    profiler::disable();
    profiler::reset();
  }
};

}  // namespace

TEST_CASE("profiler: off by default and when disabled, nothing is recorded", "[profiler]") {
  REQUIRE_FALSE(profiler::enabled());
  profiler::reset();
  Tensor a = randn({8, 8});
  (void)matmul(a, a);
  const profiler::Report r = profiler::snapshot();
  CHECK(r.ops.empty());
  CHECK(r.wall_seconds == 0.0);
}

TEST_CASE("profiler: kernels are counted per op and charged to their phase, backward included", "[profiler]") {
  ProfilerSession session;
  Tensor x = randn({4, 16}).requires_grad_();
  Tensor w = randn({16, 16}).requires_grad_();
  Tensor y;
  {
    profiler::PhaseScope phase("projection");
    y = matmul(x, w);  // one GEMM forward; its backward needs two (dx and dw)
  }
  y.sum().backward();
  const profiler::Report r = profiler::snapshot();

  const profiler::OpStat* gemm = find_op(r, "gemm_kernel");
  REQUIRE(gemm != nullptr);
  CHECK(gemm->calls >= 3);
  const profiler::PhaseStat* projection = find_phase(r, "projection");
  REQUIRE(projection != nullptr);
  CHECK(projection->forward_calls >= 1);
  CHECK(projection->backward_calls >= 2);  // the GEMMs of dx and dw, charged to the forward's phase
  // sum() ran outside every phase, and its backward too.
  const profiler::PhaseStat* other = find_phase(r, "other");
  REQUIRE(other != nullptr);
  CHECK(other->forward_calls >= 1);
  int64_t all_calls = 0, phase_calls = 0;
  for (const auto& op : r.ops) all_calls += op.calls;
  for (const auto& ph : r.phases) phase_calls += ph.forward_calls + ph.backward_calls;
  CHECK(all_calls == phase_calls);  // every call is charged to exactly one phase
  CHECK(r.kernel_seconds <= r.wall_seconds);
}

TEST_CASE("profiler: the innermost phase wins and phases restore on exit", "[profiler]") {
  ProfilerSession session;
  Tensor a = randn({4, 4});
  {
    profiler::PhaseScope outer("block");
    CHECK(std::string(profiler::current_phase()) == "block");
    {
      profiler::PhaseScope inner("layer_norm");
      (void)add(a, a);
    }
    CHECK(std::string(profiler::current_phase()) == "block");
    (void)mul(a, a);
  }
  CHECK(std::string(profiler::current_phase()) == "other");
  const profiler::Report r = profiler::snapshot();
  REQUIRE(find_phase(r, "layer_norm") != nullptr);
  REQUIRE(find_phase(r, "block") != nullptr);
  CHECK(find_phase(r, "layer_norm")->forward_calls >= 1);
  CHECK(find_phase(r, "block")->forward_calls >= 1);
}

TEST_CASE("profiler: nested scopes report self time", "[profiler]") {
  ProfilerSession session;
  using namespace std::chrono_literals;
  {
    profiler::OpScope outer("test_outer");
    std::this_thread::sleep_for(10ms);
    profiler::OpScope inner("test_inner");
    std::this_thread::sleep_for(100ms);
  }
  const profiler::Report r = profiler::snapshot();
  const profiler::OpStat* outer = find_op(r, "test_outer");
  const profiler::OpStat* inner = find_op(r, "test_inner");
  REQUIRE(outer != nullptr);
  REQUIRE(inner != nullptr);
  CHECK(inner->self_seconds >= 0.100);
  CHECK(outer->self_seconds >= 0.010);
  // Without the subtraction the outer scope would hold ≥ 110 ms; a sleep overshooting by 90 ms
  // is the only way this fails.
  CHECK(outer->self_seconds < 0.100);
}

TEST_CASE("profiler: a paused stretch counts neither calls nor wall time", "[profiler]") {
  using namespace std::chrono_literals;
  Tensor a = randn({4, 4});
  ProfilerSession session;
  {
    profiler::PauseScope pause;
    CHECK_FALSE(profiler::enabled());
    (void)add(a, a);
    std::this_thread::sleep_for(200ms);
  }
  CHECK(profiler::enabled());
  const profiler::Report r = profiler::snapshot();
  CHECK(r.ops.empty());
  CHECK(r.wall_seconds < 0.200);
}

TEST_CASE("profiler: the table lists ops, phases and the framework overhead", "[profiler]") {
  ProfilerSession session;
  Tensor a = randn({8, 8});
  {
    profiler::PhaseScope phase("attention");
    (void)matmul(a, a);
  }
  const std::string table = profiler::format_table(profiler::snapshot());
  CHECK_THAT(table, Catch::Matchers::Contains("gemm_kernel"));
  CHECK_THAT(table, Catch::Matchers::Contains("attention"));
  CHECK_THAT(table, Catch::Matchers::Contains("framework overhead"));
}
