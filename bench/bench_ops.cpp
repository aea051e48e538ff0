// bench_ops: CPU timings of lsformer's performance-relevant ops (matmul, bmm, softmax,
// layer_norm, gelu, cross_entropy), forward alone and forward + backward, at the shapes the LRA
// model and a dense 1024 × 512 layer use them. bench/torch_ops.py runs the same cases with
// PyTorch by the same method; bench/run_cpu_ops.py runs both and writes bench/RESULTS.md.
//
// The cases (B batch, n tokens, d width, h heads, e = d/h, r projection rank, w window,
// s = 2w window keys; LRA ListOps: B 32, n 2048, d 64, h 2, e 32, r 32, w 8, FFN 128):
//   lra/*   the shapes one Transformer-LS layer of the LRA model runs. The LS layer never forms
//           an n × n score matrix, so its batched products are the global scores Q·K̄ᵀ, the
//           compression P·K and the many tiny per-window products Q_tile·K_tileᵀ.
//   dense/* a dense layer at n 1024 × d 512: Linear, 8-head full-attention scores, row-wise
//           softmax / layer_norm / gelu, cross-entropy over 512 classes.
// Linear layers store W as [out, in] and compute x·Wᵀ (as nn::Linear and PyTorch do), so the
// matmul cases multiply by a transposed view.
//
// Method (torch_ops.py mirrors it exactly): fixed seed; every float input requires grad;
// "forward" runs the op with autograd recording (as in training) and drops the result;
// "forward_backward" runs the op then backward with a fixed random upstream gradient (a scalar
// loss: backward()), after setting every input's .grad to undefined (PyTorch: None), so each
// iteration allocates fresh gradients instead of accumulating. Each timing: `warmup` calls,
// then a calibration of `inner` calls per sample so that one sample lasts ≥ --min-sample-ms,
// then samples (steady_clock, or with --clock cpu the process's CPU time; per-call time =
// sample / inner) until ≥ --min-samples samples and
// ≥ --budget seconds, or --max-samples. Reported: median (and min, max) per call.
//
// GEMM reference: for matmul and bmm cases the same products are also timed as raw
// cblas_sgemm calls on preallocated buffers (the forward product; forward + the two backward
// products), which bounds what the op can reach; run_cpu_ops.py reports lsformer's time as a
// fraction of it. bmm references loop over the batch, in an OpenMP loop (one-threaded sgemm
// per batch) when the batch has at least as many matrices as threads.
#include <cblas.h>
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <lsformer/lsformer.h>

#include "bench_cli.h"
#include "bench_timing.h"

extern "C" char* openblas_get_config(void);

namespace {

constexpr uint64_t kSeed = 1234;

// ---- options, from one table (so --help cannot drift from the parser) ----------------------

struct Options {
  int threads = 0;  // 0: all processors
  bool json = false;
  std::string filter;        // substring of "op case" to select
  double budget_s = 1.0;     // sampling time per measurement
  int warmup = 3;
  int min_samples = 5;
  int max_samples = 100;
  double min_sample_ms = 1.0;
  bool list = false;
  bool meta = false;  // --meta
  bool no_sgemm = false;
  bool cpu_clock = false;  // process CPU time instead of steady_clock
};

using Flag = lsf::bench::Flag<Options>;

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = [] {
    std::vector<Flag> t = lsf::bench::common_flags<Options>("only cases whose \"op case\" contains TEXT");
    std::vector<Flag> own = {
        lsf::bench::meta_flag<Options>(),
        {"--json", nullptr, "one JSON object per line instead of a table",
         [](Options& o, const std::string&) { o.json = true; }},
        {"--budget", "SECONDS", "sampling time per measurement (default 1.0)",
         [](Options& o, const std::string& v) { o.budget_s = lsf::bench::number_at_least(v, 0); }},
        {"--no-sgemm", nullptr, "skip the raw cblas_sgemm reference timings",
         [](Options& o, const std::string&) { o.no_sgemm = true; }},
    };
    t.insert(t.end(), own.begin(), own.end());
    return t;
  }();
  return table;
}


// ---- timing ----------------------------------------------------------------------------------

using lsf::bench::Timing;

Timing time_call(const std::function<void()>& call, const Options& opt) {
  return lsf::bench::time_call(call, lsf::bench::sampling_plan(opt, opt.budget_s));
}

// ---- raw sgemm reference ---------------------------------------------------------------------

// batch × (C[m, n] = A[m, k] · B), with B stored [k, n] or, when b_nk, [n, k] (used as Bᵀ).
struct GemmSpec {
  int64_t batch, m, n, k;
  bool b_nk;
  double gflop() const { return 2.0 * double(batch) * double(m) * double(n) * double(k) * 1e-9; }
};

// Row-major C = op(A)·op(B) for each of `batch` matrices stored one after another.
void batched_sgemm(int64_t batch, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  const int64_t sa = m * k, sb = k * n, sc = m * n;
  auto one = [&](int64_t i) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                int(m), int(n), int(k), 1.0f, a + i * sa, int(lda), b + i * sb, int(ldb), 0.0f,
                c + i * sc, int(ldc));
  };
  if (batch >= omp_get_max_threads() && batch > 1) {
    // Inside a parallel region the OpenMP build of OpenBLAS runs each call on one thread.
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i) one(i);
  } else {
    for (int64_t i = 0; i < batch; ++i) one(i);
  }
}

// Buffers for the forward product and the two backward products of one GemmSpec.
struct RawGemm {
  GemmSpec s;
  lsf::Tensor a, b, c, dc, da, db;  // plain f32 buffers (no autograd)

  explicit RawGemm(const GemmSpec& spec) : s(spec) {
    lsf::Generator gen(kSeed);
    a = lsf::randn({s.batch, s.m, s.k}, {}, &gen);
    b = lsf::randn(s.b_nk ? lsf::Shape{s.batch, s.n, s.k} : lsf::Shape{s.batch, s.k, s.n}, {}, &gen);
    c = lsf::empty({s.batch, s.m, s.n});
    dc = lsf::randn({s.batch, s.m, s.n}, {}, &gen);
    da = lsf::empty({s.batch, s.m, s.k});
    db = lsf::empty(b.shape());
  }
  float* p(const lsf::Tensor& t) const { return t.data_ptr<float>(); }
  void forward() const {
    batched_sgemm(s.batch, false, s.b_nk, s.m, s.n, s.k, p(a), s.k, p(b), s.b_nk ? s.k : s.n, p(c), s.n);
  }
  void backward() const {
    if (s.b_nk) {
      // dA[m,k] = dC[m,n]·B[n,k];  dB[n,k] = dCᵀ[n,m]·A[m,k]
      batched_sgemm(s.batch, false, false, s.m, s.k, s.n, p(dc), s.n, p(b), s.k, p(da), s.k);
      batched_sgemm(s.batch, true, false, s.n, s.k, s.m, p(dc), s.n, p(a), s.k, p(db), s.k);
    } else {
      // dA[m,k] = dC[m,n]·Bᵀ (B [k,n]);  dB[k,n] = Aᵀ[k,m]·dC[m,n]
      batched_sgemm(s.batch, false, true, s.m, s.k, s.n, p(dc), s.n, p(b), s.n, p(da), s.k);
      batched_sgemm(s.batch, true, false, s.k, s.n, s.m, p(a), s.k, p(dc), s.n, p(db), s.n);
    }
  }
};

// ---- the cases -------------------------------------------------------------------------------

// What one case runs: the op on its inputs (output dropped), and the op plus backward.
struct Prepared {
  std::function<void()> forward;
  std::function<void()> forward_backward;
};

struct Case {
  const char* op;
  const char* name;   // "lra/qkv_proj"
  const char* shape;  // human-readable shapes, identical in torch_ops.py
  std::optional<GemmSpec> gemm;
  std::function<Prepared(lsf::Generator&)> prepare;
};

lsf::TensorOptions grad_f32() { return lsf::TensorOptions(lsf::kF32).requires_grad(true); }

// Forward + backward of `op` on `inputs` with upstream gradient `dy` (undefined: scalar loss).
Prepared make_prepared(std::function<lsf::Tensor()> op, std::vector<lsf::Tensor> inputs, lsf::Tensor dy) {
  Prepared p;
  p.forward = [op] { (void)op(); };
  p.forward_backward = [op, inputs, dy] {
    for (const lsf::Tensor& x : inputs) x.set_grad(lsf::Tensor());
    lsf::Tensor y = op();
    y.backward(dy);
  };
  return p;
}

// x [rows..., in] · W[out, in]ᵀ — a Linear layer without bias.
Case linear_case(const char* name, const char* shape, lsf::Shape x_shape, int64_t out) {
  int64_t in = x_shape.back(), rows = lsf::shape_numel(x_shape) / in;
  return {"matmul", name, shape, GemmSpec{1, rows, out, in, true}, [x_shape, out, in](lsf::Generator& g) {
            lsf::Tensor x = lsf::randn(x_shape, grad_f32(), &g);
            lsf::Tensor w = lsf::randn({out, in}, grad_f32(), &g);
            lsf::Shape y_shape = x_shape;
            y_shape.back() = out;
            lsf::Tensor dy = lsf::randn(y_shape, {}, &g);
            return make_prepared([x, w] { return lsf::matmul(x, w.t()); }, {x, w}, dy);
          }};
}

// a [batch, m, k] · b, with b [batch, k, n], or b [batch, n, k] used transposed when b_nk.
Case bmm_case(const char* name, const char* shape, int64_t batch, int64_t m, int64_t n, int64_t k, bool b_nk) {
  return {"bmm", name, shape, GemmSpec{batch, m, n, k, b_nk}, [=](lsf::Generator& g) {
            lsf::Tensor a = lsf::randn({batch, m, k}, grad_f32(), &g);
            lsf::Tensor b = lsf::randn(b_nk ? lsf::Shape{batch, n, k} : lsf::Shape{batch, k, n}, grad_f32(), &g);
            lsf::Tensor dy = lsf::randn({batch, m, n}, {}, &g);
            return make_prepared([a, b, b_nk] { return lsf::bmm(a, b_nk ? b.transpose(1, 2) : b); }, {a, b}, dy);
          }};
}

Case softmax_case(const char* name, const char* shape, lsf::Shape x_shape, int64_t dim) {
  return {"softmax", name, shape, std::nullopt, [x_shape, dim](lsf::Generator& g) {
            lsf::Tensor x = lsf::randn(x_shape, grad_f32(), &g);
            lsf::Tensor dy = lsf::randn(x_shape, {}, &g);
            return make_prepared([x, dim] { return lsf::softmax(x, dim); }, {x}, dy);
          }};
}

// Affine layer norm over the last dim (weight and bias require grad, as in the model).
Case layer_norm_case(const char* name, const char* shape, lsf::Shape x_shape) {
  return {"layer_norm", name, shape, std::nullopt, [x_shape](lsf::Generator& g) {
            int64_t n = x_shape.back();
            lsf::Tensor x = lsf::randn(x_shape, grad_f32(), &g);
            lsf::Tensor w = lsf::ones({n}, grad_f32());
            lsf::Tensor b = lsf::zeros({n}, grad_f32());
            lsf::Tensor dy = lsf::randn(x_shape, {}, &g);
            return make_prepared([x, w, b, n] { return lsf::layer_norm(x, {n}, w, b, 1e-5); }, {x, w, b}, dy);
          }};
}

// Exact (erf) GELU, PyTorch's default and the LRA MLP's activation.
Case gelu_case(const char* name, const char* shape, lsf::Shape x_shape) {
  return {"gelu", name, shape, std::nullopt, [x_shape](lsf::Generator& g) {
            lsf::Tensor x = lsf::randn(x_shape, grad_f32(), &g);
            lsf::Tensor dy = lsf::randn(x_shape, {}, &g);
            return make_prepared([x] { return lsf::gelu(x); }, {x}, dy);
          }};
}

// Mean cross-entropy of logits [rows, classes] against random class ids; scalar loss.
Case cross_entropy_case(const char* name, const char* shape, int64_t rows, int64_t classes) {
  return {"cross_entropy", name, shape, std::nullopt, [rows, classes](lsf::Generator& g) {
            lsf::Tensor logits = lsf::randn({rows, classes}, grad_f32(), &g);
            std::mt19937_64 rng(kSeed);
            std::vector<int64_t> ids(static_cast<size_t>(rows));
            for (int64_t& id : ids) id = int64_t(rng() % uint64_t(classes));
            lsf::Tensor target = lsf::tensor(ids, {rows});
            return make_prepared([logits, target] { return lsf::cross_entropy(logits, target); }, {logits},
                                 lsf::Tensor());
          }};
}

// LRA ListOps: B 32, n 2048, d 64, h 2, e 32, r 32, w 8 (s 16 window keys), FFN 128, 10 classes.
// Dense: n 1024, d 512, 8 heads of 64.
std::vector<Case> all_cases() {
  return {
      linear_case("lra/qkv_proj", "x[32,2048,64] @ W[64,64]^T", {32, 2048, 64}, 64),
      linear_case("lra/ffn_up", "x[32,2048,64] @ W[128,64]^T", {32, 2048, 64}, 128),
      bmm_case("lra/global_scores", "Q[64,2048,32] @ Kbar[64,32,32]^T", 64, 2048, 32, 32, true),
      bmm_case("lra/compress", "P[64,32,2048] @ K[64,2048,32]", 64, 32, 32, 2048, false),
      bmm_case("lra/window_scores", "Qt[16384,8,32] @ Kt[16384,16,32]^T", 16384, 8, 16, 32, true),
      softmax_case("lra/attn_probs", "[32,2,2048,48] dim -1", {32, 2, 2048, 48}, -1),
      softmax_case("lra/proj_weights", "[32,2048,64] dim 1", {32, 2048, 64}, 1),
      layer_norm_case("lra/ln", "[32,2048,64] over 64, affine", {32, 2048, 64}),
      gelu_case("lra/ffn", "[32,2048,128]", {32, 2048, 128}),
      cross_entropy_case("lra/head", "logits[32,10]", 32, 10),
      linear_case("dense/linear", "x[1024,512] @ W[512,512]^T", {1024, 512}, 512),
      bmm_case("dense/attn_scores", "Q[8,1024,64] @ K[8,1024,64]^T", 8, 1024, 1024, 64, true),
      softmax_case("dense/rows", "[1024,512] dim -1", {1024, 512}, -1),
      layer_norm_case("dense/ln", "[1024,512] over 512, affine", {1024, 512}),
      gelu_case("dense/act", "[1024,512]", {1024, 512}),
      cross_entropy_case("dense/loss", "logits[1024,512]", 1024, 512),
  };
}

// ---- output ----------------------------------------------------------------------------------

void emit(const Options& opt, const char* impl, const Case& c, const char* phase, const Timing& t,
          double gflop) {
  if (opt.json) {
    std::printf(
        "{\"impl\": \"%s\", \"op\": \"%s\", \"case\": \"%s\", \"shape\": \"%s\", \"phase\": \"%s\", "
        "\"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, \"samples\": %d, \"inner\": %d, "
        "\"threads\": %d, \"clock\": \"%s\", \"gflop\": %.6f}\n",
        impl, c.op, c.name, lsf::bench::json_escape(c.shape).c_str(), phase, t.median_ms, t.min_ms, t.max_ms,
        t.samples, t.inner, lsf::get_num_threads(), opt.cpu_clock ? "cpu" : "wall", gflop);
  } else {
    char gflops[32] = "";
    if (gflop > 0) std::snprintf(gflops, sizeof gflops, "%8.1f", gflop / (t.median_ms * 1e-3));
    std::printf("%-14s %-20s %-17s %-7s %10.3f %10.3f %4d×%-5d %s\n", impl, c.name, phase,
                c.op, t.median_ms, t.min_ms, t.samples, t.inner, gflops);
  }
  std::fflush(stdout);
}

void emit_meta(const Options& opt) {
  if (!opt.json && !opt.meta) {  // --meta prints the JSON line in either format
    std::printf("%s", lsf::build_info().c_str());
    std::printf("\n%-14s %-20s %-17s %-7s %10s %10s %10s %8s\n", "impl", "case", "phase", "op",
                "median_ms", "min_ms", "samples", "GFLOP/s");
    return;
  }
  lsf::bench::print_meta_line("\"openblas_config\": \"" + lsf::bench::json_escape(openblas_get_config()) + "\"");
}

int run(const Options& opt) {
  std::vector<Case> cases = all_cases();
  auto key = [](const Case& c) { return std::string(c.op) + " " + c.name; };  // what --filter matches
  std::vector<std::string> keys;
  for (const Case& c : cases) keys.push_back(key(c));
  lsf::bench::filtered_cases(keys, opt.filter);  // an error when it selects none
  if (opt.list) {
    for (const Case& c : cases)
      if (lsf::bench::case_selected(opt.filter, key(c))) std::printf("%-14s %-20s %s\n", c.op, c.name, c.shape);
    return 0;
  }
  lsf::set_num_threads(opt.threads > 0 ? opt.threads : omp_get_num_procs());
  emit_meta(opt);
  if (opt.meta) return 0;
  for (const Case& c : cases) {
    if (!lsf::bench::case_selected(opt.filter, key(c))) continue;
    double fwd_gflop = c.gemm ? c.gemm->gflop() : 0.0;
    {
      lsf::Generator gen(kSeed);
      Prepared p = c.prepare(gen);
      emit(opt, "lsformer", c, "forward", time_call(p.forward, opt), fwd_gflop);
      emit(opt, "lsformer", c, "forward_backward", time_call(p.forward_backward, opt), 3 * fwd_gflop);
    }
    if (c.gemm && !opt.no_sgemm) {
      RawGemm raw(*c.gemm);
      emit(opt, "sgemm", c, "forward", time_call([&] { raw.forward(); }, opt), fwd_gflop);
      emit(opt, "sgemm", c, "forward_backward", time_call([&] { raw.forward(); raw.backward(); }, opt),
           3 * fwd_gflop);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return lsf::bench::run_main<Options>(argc, argv, "bench_ops", "usage: bench_ops [options]", flags(), run);
}
