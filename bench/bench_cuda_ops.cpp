// GPU ops, forward + backward, and the bandwidth they reach: lsformer's side of the comparison
// with PyTorch on the same GPU (bench/torch_cuda_ops.py runs the same cases).
//
// Each case times one forward and one backward call (gradients dropped between calls, the
// stream synchronised at the end of every call) with the sampling method of bench_timing.h,
// and reports the median and the fastest time per call and the achieved bandwidth (at the
// median): the minimal bytes the
// computation must move (inputs and outputs of forward, gradient in, saved tensors read and
// gradients out of backward — the formula is in each case) over the time. GEMMs report
// TFLOP/s instead (three products: forward, dA, dB). A device-to-device copy of the same
// bytes calibrates what "memory bound" can reach on this GPU. The elementwise operands are
// [rows, 1024]: the default 32768 rows (128 MiB in f32) are well past an H100/H200's 50–60 MB
// L2, so the bandwidth is device memory's; the first H200 run (bench/RESULTS.md) used 8192.
//
//   build/bench/bench_cuda_ops [--filter TEXT] [--dtype f32|bf16] [--rows N] [--json]
// bench/run_gpu.py runs it beside bench/torch_cuda_ops.py and tabulates the ratios.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include <lsformer/lsformer.h>

#include "bench_cli.h"
#include "bench_timing.h"

using namespace lsf;

namespace {

struct Options {
  std::string filter;
  DType dtype = kF32;
  int64_t rows = 32768;
  bool json = false;
};

struct Case {
  std::string name;
  double bytes_per_element;  // minimal traffic, in elements of x, of forward + backward
  double flops = 0;          // GEMMs: floating-point operations per call
  std::function<void()> call;
};

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

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc) {
      o.filter = argv[++i];
    } else if (a == "--dtype" && i + 1 < argc && (std::string(argv[i + 1]) == "f32" || std::string(argv[i + 1]) == "bf16")) {
      o.dtype = std::string(argv[++i]) == "bf16" ? kBF16 : kF32;
    } else if (a == "--rows" && i + 1 < argc) {
      const std::string v = argv[++i];
      try {
        o.rows = bench::int_at_least(v, 1);
      } catch (const std::exception&) {
        std::cerr << "bench_cuda_ops: --rows expects an integer ≥ 1, got '" << v << "'\n";
        return 2;
      }
    } else if (a == "--json") {
      o.json = true;
    } else {
      std::cerr << "usage: bench_cuda_ops [--filter TEXT] [--dtype f32|bf16] [--rows N] [--json]\n";
      return a == "--help" ? 0 : 2;
    }
  }
  if (cuda::device_count() == 0) {
    std::cerr << "bench_cuda_ops: no usable CUDA device\n";
    return 1;
  }
  if (!o.json) std::cout << cuda::device_properties(0).name << "\n";

  const int64_t rows = o.rows, cols = 1024, N = rows * cols;  // 32768 rows: 128 MiB in f32
  const TensorOptions opt = TensorOptions(o.dtype).device(kCUDA);
  Generator gen(0);
  auto input = [&](const Shape& s) { return randn(s, TensorOptions(kF32), &gen).to(opt).requires_grad_(true); };
  const Tensor x = input({rows, cols}), y = input({rows, cols});
  const Tensor dy = randn({rows, cols}, TensorOptions(kF32), &gen).to(opt);
  const Tensor w = input({cols}), b = input({cols});
  const Tensor target = (rand({rows}, TensorOptions(kF64), &gen) * double(cols)).to(kI64).to(kCUDA);
  const Tensor a_mm = input({4096, 1024}), b_mm = input({1024, 1024});
  const Tensor g_mm = randn({4096, 1024}, TensorOptions(kF32), &gen).to(opt);

  auto fwd_bwd = [&](const std::function<Tensor()>& f, const Tensor& grad, std::vector<Tensor> leaves) {
    return [f, grad, leaves] {
      for (const Tensor& l : leaves) l.set_grad(Tensor());
      Tensor out = f();
      out.backward(grad.defined() ? grad : Tensor());
      cuda::synchronize(0);
    };
  };
  const Tensor none;
  std::vector<Case> cases = {
      {"copy (calibration)", 2, 0, [&] { Tensor c = x.detach().clone(); cuda::synchronize(0); }},
      // fwd: read x, y, write z; bwd: read dz, write dx, dy
      {"add", 6, 0, fwd_bwd([&] { return x + y; }, dy, {x, y})},
      // fwd: read x, y, write z; bwd: read dz, x, y, write dx, dy
      {"mul", 8, 0, fwd_bwd([&] { return x * y; }, dy, {x, y})},
      // fwd: read x, write y; bwd: read dy, x, write dx
      {"gelu", 5, 0, fwd_bwd([&] { return gelu(x); }, dy, {x})},
      // fwd: read x, write y; bwd: read dy, y, write dx
      {"softmax(dim=-1)", 5, 0, fwd_bwd([&] { return softmax(x, -1); }, dy, {x})},
      // fwd: read x, write y; bwd: read dy, x, write dx (weight/bias gradients are rows× smaller)
      {"layer_norm", 5, 0, fwd_bwd([&] { return layer_norm(x, {cols}, w, b); }, dy, {x, w, b})},
      // fwd: read logits; bwd: read logits, write dlogits
      {"cross_entropy", 3, 0, fwd_bwd([&] { return cross_entropy(x.to(kF32), target); }, none, {x})},
      // fwd: read x; bwd: write dx
      {"sum(dim=-1)", 2, 0, fwd_bwd([&] { return sum(x, {-1}); }, randn({rows}, TensorOptions(kF32), &gen).to(opt), {x})},
      {"matmul 4096x1024x1024", 0, 3.0 * 2.0 * 4096.0 * 1024.0 * 1024.0,
       fwd_bwd([&] { return matmul(a_mm, b_mm); }, g_mm, {a_mm, b_mm})},
  };
  bench::SamplingPlan plan;
  plan.warmup = 3;
  plan.sample_ms = 500;
  for (const Case& c : cases) {
    if (!o.filter.empty() && c.name.find(o.filter) == std::string::npos) continue;
    report(o, c, bench::time_call(c.call, plan), N);
  }
  return 0;
}
