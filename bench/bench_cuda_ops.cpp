// GPU ops, forward + backward, and the bandwidth they reach: lsformer's side of the comparison
// with PyTorch on the same GPU (bench/torch_cuda_ops.py runs the same cases).
//
// Each case times one forward and one backward call (gradients dropped between calls, the
// stream synchronised at the end of every call) with the sampling method of bench_timing.h,
// and reports the median and the fastest time per call and the achieved bandwidth at the
// median: the minimal bytes the computation must move (inputs and outputs of forward, gradient
// in, saved tensors read and gradients out of backward — the formula is in each case) over the
// time. GEMMs report TFLOP/s instead (three products: forward, dA, dB). A device-to-device copy
// of the same bytes calibrates what "memory bound" can reach on this GPU. The elementwise
// operands are [rows, 1024]: the default 32768 rows (128 MiB in f32) are well past an
// H100/H200's 50–60 MB L2, so the bandwidth is device memory's; the first H200 run
// (bench/RESULTS.md) used 8192.
//
//   build/bench/bench_cuda_ops [--filter TEXT] [--dtype f32|bf16] [--rows N] [--json] [--list] (--help: all)
// bench/run_gpu.py runs it beside bench/torch_cuda_ops.py and tabulates the ratios.
#include <cstdio>
#include <functional>
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
  DType dtype = kF32;
  int64_t rows = 32768;
  bool json = false;
};

using Flag = bench::Flag<Options>;

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = [] {
    std::vector<Flag> t = bench::gpu_flags<Options>("only cases whose name contains TEXT (e.g. softmax)");
    t.push_back({"--rows", "N", "rows of the [N, 1024] operands (default 32768: 128 MiB in f32)",
                 [](Options& o, const std::string& v) { o.rows = bench::int_at_least(v, 1); }});
    return t;
  }();
  return table;
}

// The operands every case reads, made once on the GPU.
struct Operands {
  Tensor x, y, dy, w, b, target, a_mm, b_mm, g_mm, dsum;
};

struct Case {
  std::string name;
  double bytes_per_element;  // minimal traffic, in elements of x, of forward + backward
  double flops;              // GEMMs: floating-point operations per call (else 0)
  std::function<Tensor(const Operands&)> forward;  // null: the copy calibration
  std::function<Tensor(const Operands&)> gradient;  // the upstream gradient (null: a scalar loss)
  std::function<std::vector<Tensor>(const Operands&)> leaves;
};

const std::vector<Case>& cases() {
  using O = const Operands&;
  static const std::vector<Case> table = {
      {"copy (calibration)", 2, 0, nullptr, nullptr, nullptr},
      // fwd: read x, y, write z; bwd: read dz, write dx, dy
      {"add", 6, 0, [](O o) { return o.x + o.y; }, [](O o) { return o.dy; },
       [](O o) { return std::vector<Tensor>{o.x, o.y}; }},
      // fwd: read x, y, write z; bwd: read dz, x, y, write dx, dy
      {"mul", 8, 0, [](O o) { return o.x * o.y; }, [](O o) { return o.dy; },
       [](O o) { return std::vector<Tensor>{o.x, o.y}; }},
      // fwd: read x, write y; bwd: read dy, x, write dx
      {"gelu", 5, 0, [](O o) { return gelu(o.x); }, [](O o) { return o.dy; },
       [](O o) { return std::vector<Tensor>{o.x}; }},
      // fwd: read x, write y; bwd: read dy, y, write dx
      {"softmax(dim=-1)", 5, 0, [](O o) { return softmax(o.x, -1); }, [](O o) { return o.dy; },
       [](O o) { return std::vector<Tensor>{o.x}; }},
      // fwd: read x, write y; bwd: read dy, x, write dx (weight/bias gradients are rows× smaller)
      {"layer_norm", 5, 0, [](O o) { return layer_norm(o.x, {o.x.size(1)}, o.w, o.b); }, [](O o) { return o.dy; },
       [](O o) { return std::vector<Tensor>{o.x, o.w, o.b}; }},
      // fwd: read logits; bwd: read logits, write dlogits
      {"cross_entropy", 3, 0, [](O o) { return cross_entropy(o.x.to(kF32), o.target); }, nullptr,
       [](O o) { return std::vector<Tensor>{o.x}; }},
      // fwd: read x; bwd: write dx
      {"sum(dim=-1)", 2, 0, [](O o) { return sum(o.x, {-1}); }, [](O o) { return o.dsum; },
       [](O o) { return std::vector<Tensor>{o.x}; }},
      {"matmul 4096x1024x1024", 0, 3.0 * 2.0 * 4096.0 * 1024.0 * 1024.0, [](O o) { return matmul(o.a_mm, o.b_mm); },
       [](O o) { return o.g_mm; }, [](O o) { return std::vector<Tensor>{o.a_mm, o.b_mm}; }},
  };
  return table;
}

void report(const Options& o, const Case& c, const bench::Timing& t, int64_t elements) {
  const double seconds = t.median_ms * 1e-3;
  const double gbps = c.flops > 0 ? 0.0 : c.bytes_per_element * double(elements) * double(dtype_size(o.dtype)) / seconds / 1e9;
  const double tflops = c.flops > 0 ? c.flops / seconds / 1e12 : 0.0;
  if (o.json) {
    std::cout << "{\"case\": \"" << c.name << "\", \"dtype\": \"" << o.dtype << "\", \"ms\": " << t.median_ms
              << ", \"min_ms\": " << t.min_ms << ", \"gbps\": " << gbps << ", \"tflops\": " << tflops << "}\n";
  } else {
    std::printf("%-28s %10.4f ms (fastest %10.4f)  %8.1f GB/s  %6.1f TFLOP/s\n", c.name.c_str(), t.median_ms,
                t.min_ms, gbps, tflops);
  }
}

int run(const Options& o) {
  std::vector<std::string> names;
  for (const Case& c : cases()) names.push_back(c.name);
  if (bench::gpu_preamble(o, names)) return 0;  // --list
  if (!o.json) std::cout << cuda::device_properties(0).name << "\n";

  const int64_t rows = o.rows, cols = 1024, N = rows * cols;
  const TensorOptions opt = TensorOptions(o.dtype).device(kCUDA);
  Generator gen(0);
  auto input = [&](const Shape& s) { return randn(s, TensorOptions(kF32), &gen).to(opt).requires_grad_(true); };
  auto grad = [&](const Shape& s) { return randn(s, TensorOptions(kF32), &gen).to(opt); };
  Operands ops;
  ops.x = input({rows, cols});
  ops.y = input({rows, cols});
  ops.dy = grad({rows, cols});
  ops.w = input({cols});
  ops.b = input({cols});
  ops.target = (rand({rows}, TensorOptions(kF64), &gen) * double(cols)).to(kI64).to(kCUDA);
  ops.a_mm = input({4096, 1024});
  ops.b_mm = input({1024, 1024});
  ops.g_mm = grad({4096, 1024});
  ops.dsum = grad({rows});

  const bench::SamplingPlan plan = bench::sampling_plan(o, o.sample_s);  // wall clock: gpu_preamble refuses cpu
  for (const Case& c : cases()) {
    if (!bench::case_selected(o.filter, c.name)) continue;
    std::function<void()> call;
    if (!c.forward) {
      call = [&] {
        Tensor copy = ops.x.detach().clone();
        cuda::synchronize(0);
      };
    } else {
      const std::vector<Tensor> leaves = c.leaves(ops);
      const Tensor upstream = c.gradient ? c.gradient(ops) : Tensor();
      call = [&c, &ops, leaves, upstream] {
        for (const Tensor& l : leaves) l.set_grad(Tensor());
        c.forward(ops).backward(upstream);
        cuda::synchronize(0);
      };
    }
    report(o, c, bench::time_call(call, plan), N);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main<Options>(argc, argv, "bench_cuda_ops",
                                  "usage: bench_cuda_ops [options]   (a table, or JSON lines with --json)", flags(), run);
}
