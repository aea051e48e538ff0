// The fused long-short attention core on one GPU (issue 7): forward + backward of
// lsf::long_short_attention at n = 4K, 16K, 64K (batch 1, head dimension 64), windows/ranks
// (w, r) = (128, 32) and (8, 32), with time, TFLOP/s, achieved bandwidth and the ratio to the
// memory-bound floor (medians; the fastest call too). bench/torch_long_short_cuda.py times the
// PyTorch long-short core and F.scaled_dot_product_attention on the same shapes; bench/run_gpu.py
// runs both and tabulates the ratios.
//
// FLOPs (FlashAttention's convention, counting the work a non-recomputing implementation does):
// forward 4·n·S·e per head (logits and P·V, S = r + s slots), backward 2.5× that, so
// 14·B·h·n·S·e per call. Floor bytes: what any implementation must move — forward reads q, k, v
// and writes out (4·n·e) plus K̄, V̄ (2·r·e); backward reads q, k, v, dout and writes dq, dk, dv
// (7·n·e) plus K̄, V̄ and their gradients (4·r·e) — over the bandwidth of a device-to-device
// copy measured here on a buffer of the same size.
//
//   build/bench/bench_cuda_attention [--heads H] [--dtype f32|bf16] [--filter TEXT] [--json] [--list]
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <lsformer/lsformer.h>

#include "bench_cli.h"
#include "bench_timing.h"

using namespace lsf;

namespace {

struct Options {
  int threads = 0;  // host threads (the GPU cases hardly use any)
  std::string filter;
  int warmup = 3;
  int min_samples = 3;
  int max_samples = 50;
  double min_sample_ms = 1.0;
  bool cpu_clock = false;
  bool list = false;
  double sample_s = 0.5;  // sampling time per case
  int64_t heads = 8;
  DType dtype = kF32;
  bool json = false;
};

using Flag = bench::Flag<Options>;

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = [] {
    std::vector<Flag> t = bench::gpu_flags<Options>("only cases whose name contains TEXT (e.g. 'n=16384 w=8 ')");
    t.push_back({"--heads", "H", "heads of dimension 64 (default 8)",
                 [](Options& o, const std::string& v) { o.heads = bench::int_at_least(v, 1); }});
    return t;
  }();
  return table;
}

struct Config {
  int64_t n, w, r;
};

const std::vector<Config> kConfigs = {{4096, 128, 32},  {4096, 8, 32},  {16384, 128, 32},
                                      {16384, 8, 32}, {65536, 128, 32}, {65536, 8, 32}};

std::string case_name(const Config& c) {
  return "long_short n=" + std::to_string(c.n) + " w=" + std::to_string(c.w) + " r=" + std::to_string(c.r);
}

int run(const Options& o) {
  std::vector<std::string> names;
  for (const Config& c : kConfigs) names.push_back(case_name(c));
  if (bench::gpu_preamble(o, names)) return 0;  // --list
  if (!o.json) std::cout << cuda::device_properties(0).name << ", " << o.heads << " heads of 64, " << o.dtype << "\n";

  const int64_t B = 1, h = o.heads, e = 64;
  const bench::SamplingPlan plan = bench::sampling_plan(o, o.sample_s);  // wall clock: gpu_preamble refuses cpu
  Generator gen(0);
  const TensorOptions opt = TensorOptions(o.dtype).device(kCUDA);
  for (const Config& c : kConfigs) {
    const std::string name = case_name(c);
    if (!bench::case_selected(o.filter, name)) continue;
    auto input = [&](const Shape& s, double scale) {
      return (randn(s, TensorOptions(kF32), &gen) * scale).to(opt).requires_grad_(true);
    };
    const Tensor q = input({B, h, c.n, e}, 0.125), k = input({B, h, c.n, e}, 1.0), v = input({B, h, c.n, e}, 1.0);
    const Tensor kb = input({B, h, c.r, e}, 1.0), vb = input({B, h, c.r, e}, 1.0);
    const Tensor dout = randn({B, h, c.n, e}, TensorOptions(kF32), &gen).to(opt);
    LongShortAttentionOptions lo;
    lo.window = c.w;
    auto call = [&] {
      for (const Tensor* t : {&q, &k, &v, &kb, &vb}) t->set_grad(Tensor());
      Tensor out = long_short_attention(q, k, v, kb, vb, Tensor(), lo);
      out.backward(dout);
      cuda::synchronize(0);
    };
    const bench::Timing t = bench::time_call(call, plan);

    // Memory-bound floor: a device copy of as many bytes as the floor moves (read + write).
    const double S = double(c.r + c.w + 2 * std::max<int64_t>(c.w / 2, 1));
    const double elems = double(B * h) * (11.0 * double(c.n) * double(e) + 6.0 * double(c.r) * double(e));
    const double bytes = elems * double(dtype_size(o.dtype));
    const Tensor buf = empty({int64_t(elems / 2) + 1}, opt);
    const bench::Timing copy = bench::time_call([&] { Tensor c2 = buf.clone(); cuda::synchronize(0); }, plan);
    const double copy_gbps = 2.0 * double(buf.numel()) * double(dtype_size(o.dtype)) / (copy.median_ms * 1e-3) / 1e9;
    const double floor_ms = bytes / (copy_gbps * 1e9) * 1e3;
    const double flops = 14.0 * double(B * h) * double(c.n) * S * double(e);
    const double tflops = flops / (t.median_ms * 1e-3) / 1e12;
    const double gbps = bytes / (t.median_ms * 1e-3) / 1e9;
    if (o.json) {
      std::cout << "{\"case\": \"" << name << "\", \"heads\": " << h << ", \"dtype\": \"" << o.dtype
                << "\", \"ms\": " << t.median_ms << ", \"min_ms\": " << t.min_ms << ", \"tflops\": " << tflops
                << ", \"gbps\": " << gbps
                << ", \"copy_gbps\": " << copy_gbps << ", \"floor_ms\": " << floor_ms
                << ", \"ratio_to_floor\": " << t.median_ms / floor_ms << "}\n";
    } else {
      std::printf("%-32s %9.3f ms (fastest %9.3f)  %6.2f TFLOP/s  %7.1f GB/s  floor %7.3f ms (copy %6.0f GB/s)  x%.1f\n",
                  name.c_str(), t.median_ms, t.min_ms, tflops, gbps, floor_ms, copy_gbps, t.median_ms / floor_ms);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main<Options>(argc, argv, "bench_cuda_attention",
                                  "usage: bench_cuda_attention [options]   (a table, or JSON lines with --json)", flags(),
                                  run);
}
