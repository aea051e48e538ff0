// The CPU's bf16 products (ops/cpu/gemm_bf16.h) against the f32 products of the same values, side
// by side in one process: lsf::matmul of two tensors that came from bf16 (as autocast's
// roundings make them), with the bf16 kernel on and then off (lsf::set_cpu_bf16_products: the
// same call then runs lsformer's f32 path, OpenBLAS's sgemm or the skinny kernel), the two
// alternating over --rounds rounds so that drift of the machine hits both alike.
//
//   build/bench/bench_gemm_bf16 --threads 2 [--rounds 5] [--sample-time 0.5] [--filter lm/]
//
// The shapes are the products of the char-LM `small` step (bench_lm: 4096 tokens, d 256, FFN
// 1024: forward, input gradient and weight gradient of the FFN and of the projections), of the
// LRA layer (bench_attention: 16384 tokens, d 64) and a cube. Prints per shape the medians and
// fastest samples of both, their GFLOP/s, and the speed-up (f32 time / bf16 time) on the median
// of the round medians and on the fastest sample; one JSON line per shape with --json.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <lsformer/lsformer.h>

#include "lsformer/engine/autocast.h"
#include "lsformer/ops/cpu/gemm_bf16.h"
#include "bench_cli.h"
#include "bench_timing.h"

using namespace lsf;

namespace {

struct Options {
  int threads = 0;
  std::string filter;
  int warmup = 1, min_samples = 5, max_samples = 200;
  double min_sample_ms = 1.0;
  bool cpu_clock = false, list = false, json = false;
  double sample_s = 0.5;
  int rounds = 5;
};

// C [M × N] = op(A) · op(B); ta: A is stored [K × M] (a weight gradient's dyᵀ), tb: B is stored
// [N × K] (a Linear's weightᵀ).
struct Shape3 {
  const char* name;
  int64_t M, N, K;
  bool ta, tb;
};

const std::vector<Shape3>& shapes() {
  static const std::vector<Shape3> list = {
      {"lm/ffn_up", 4096, 1024, 256, false, true},     {"lm/ffn_down", 4096, 256, 1024, false, true},
      {"lm/ffn_up_dx", 4096, 256, 1024, false, false}, {"lm/ffn_down_dx", 4096, 1024, 256, false, false},
      {"lm/ffn_up_dw", 1024, 256, 4096, true, false},  {"lm/ffn_down_dw", 256, 1024, 4096, true, false},
      {"lm/qkv", 4096, 768, 256, false, true},         {"lm/proj_dw", 256, 256, 4096, true, false},
      {"lra/qkv", 16384, 192, 64, false, true},        {"lra/out", 16384, 64, 64, false, true},
      {"lra/qkv_dx", 16384, 64, 192, false, false},    {"cube/1024", 1024, 1024, 1024, false, false},
  };
  return list;
}

// Samples of a call: the median and fastest per call over one sampling run.
// (The kernel on or off whatever LSF_CPU_BF16_PRODUCTS says: this benchmark compares the two.)
bench::Timing time_matmul(const Tensor& a, const Tensor& b, bool bf16, const bench::SamplingPlan& plan) {
  set_cpu_bf16_products(bf16);
  Tensor c;
  return bench::time_call([&] { c = matmul(a, b); }, plan);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t k = v.size();
  return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

int run(const Options& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  std::vector<std::string> names;
  for (const Shape3& s : shapes()) names.push_back(s.name);
  const std::vector<std::string> selected = bench::filtered_cases(names, o.filter);
  if (o.list) {
    for (const std::string& n : selected) std::printf("%s\n", n.c_str());
    return 0;
  }
  LSF_CHECK(o.rounds >= 1) << "--rounds must be at least 1";
  const bench::SamplingPlan plan = bench::sampling_plan(o, o.sample_s);
  set_cpu_bf16_products(true);  // (what the CPU runs, not what the environment asks)
  std::printf("bf16 products %s on this CPU; %d threads; %d rounds, each timing bf16 then f32 (then f32 first)\n",
              cpu::gemm_bf16_available() ? "available" : "NOT available (every row below is f32 twice)",
              get_num_threads(), o.rounds);
  if (!o.json)
    std::printf("| product | M × N × K | bf16 median / fastest ms | f32 median / fastest ms | bf16 GFLOP/s | f32 GFLOP/s | "
                "speed-up median / fastest |\n|---|---|---|---|---|---|---|\n");
  manual_seed(5);
  for (const Shape3& s : shapes()) {
    if (!bench::case_selected(o.filter, s.name)) continue;
    // Operands in the layout the product reads, rounded to bf16 as autocast rounds them.
    const Tensor A = s.ta ? randn({s.K, s.M}).to(kBF16).to(kF32) : randn({s.M, s.K}).to(kBF16).to(kF32);
    const Tensor B = s.tb ? randn({s.N, s.K}).to(kBF16).to(kF32) : randn({s.K, s.N}).to(kBF16).to(kF32);
    const Tensor a = s.ta ? A.t() : A, b = s.tb ? B.t() : B;
    std::vector<double> med_bf16, med_f32;
    double fast_bf16 = 1e30, fast_f32 = 1e30;
    for (int r = 0; r < o.rounds; ++r) {
      const bool bf16_first = r % 2 == 0;
      for (int side = 0; side < 2; ++side) {
        const bool bf16 = (side == 0) == bf16_first;
        const bench::Timing t = time_matmul(a, b, bf16, plan);
        (bf16 ? med_bf16 : med_f32).push_back(t.median_ms);
        double& fastest = bf16 ? fast_bf16 : fast_f32;
        fastest = std::min(fastest, t.min_ms);
      }
    }
    const double mb = median(med_bf16), mf = median(med_f32), flop = 2.0 * double(s.M) * double(s.N) * double(s.K);
    if (o.json) {
      std::printf("{\"case\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, \"bf16_median_ms\": %.4f, \"bf16_min_ms\": %.4f, "
                  "\"f32_median_ms\": %.4f, \"f32_min_ms\": %.4f, \"speedup_median\": %.3f, \"speedup_fastest\": %.3f, "
                  "\"threads\": %d}\n",
                  s.name, (long long)s.M, (long long)s.N, (long long)s.K, mb, fast_bf16, mf, fast_f32, mf / mb,
                  fast_f32 / fast_bf16, get_num_threads());
    } else {
      std::printf("| %s | %lld × %lld × %lld | %.3f / %.3f | %.3f / %.3f | %.0f | %.0f | **%.2f× / %.2f×** |\n", s.name,
                  (long long)s.M, (long long)s.N, (long long)s.K, mb, fast_bf16, mf, fast_f32, flop / mb * 1e-6,
                  flop / mf * 1e-6, mf / mb, fast_f32 / fast_bf16);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<bench::Flag<Options>> flags = bench::common_flags<Options>("only products whose name contains TEXT (lm/, lra/, cube)");
  flags.insert(flags.end(), {
      {"--sample-time", "SECONDS", "sampling time per side and round (default 0.5)",
       [](Options& o, const std::string& v) { o.sample_s = bench::number_at_least(v, 0); }},
      {"--rounds", "N", "alternating rounds of the two sides (default 5)",
       [](Options& o, const std::string& v) { o.rounds = bench::int_at_least(v, 1); }},
      {"--json", nullptr, "one JSON line per product", [](Options& o, const std::string&) { o.json = true; }},
  });
  return bench::run_main(argc, argv, "bench_gemm_bf16",
                         "usage: bench_gemm_bf16 [options]   (bf16 products vs f32 products of the same values)", flags,
                         &run);
}
