// ops/cpu/gemm_bf16 (the CPU's bf16 product kernel) and how products reach it: every layout,
// edge and block path against a long double product of the same bf16 values; the values it
// declines (not exact in bf16, subnormal) leave c untouched; the same bits on any thread count
// and inside a parallel region; the storage hint that routes autocast's products to it; and
// autocast's Linear, forward and backward, with the kernel on and off.
//
// On a CPU without AVX512_BF16 (or with LSF_CPU_VECTOR_LEVEL below AVX-512) the kernel's own
// cases report themselves skipped; the routing cases then check that the f32 path runs.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "helpers.h"
#include "lsformer/engine/autocast.h"
#include "lsformer/ops/cpu/gemm_bf16.h"
#include "lsformer/ops/cpu/vector_kernels.h"

using lsf::cpu::gemm_bf16;
using lsf::cpu::gemm_bf16_available;

namespace {

// Deterministic bf16 numbers in (−2, 2) as f32: random f32 bits with the low half cleared,
// normal or zero (a value whose exponent would be 0 becomes 0).
std::vector<float> bf16_values(size_t count, uint32_t seed) {
  std::vector<float> v(count);
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    const float f = float(double(s >> 8) / double(1u << 22) - 2.0);
    x = std::bit_cast<float>(std::bit_cast<uint32_t>(f) & 0xFFFF0000u);
  }
  return v;
}

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
};

struct Operands {
  int64_t lda, ldb, ldc;
  std::vector<float> a, b, c;
};

// Leading dimensions 3 wider than needed; c holds bf16 values too, NaN where beta = 0 must not
// read it.
Operands operands_of(const Case& cs) {
  const int64_t a_rows = cs.ta ? cs.k : cs.m, a_cols = cs.ta ? cs.m : cs.k;
  const int64_t b_rows = cs.tb ? cs.n : cs.k, b_cols = cs.tb ? cs.k : cs.n;
  Operands o{a_cols + 3, b_cols + 3, cs.n + 3, {}, {}, {}};
  o.a = bf16_values(size_t(a_rows * o.lda), 1);
  o.b = bf16_values(size_t(b_rows * o.ldb), 2);
  o.c = bf16_values(size_t(cs.m * o.ldc), 3);
  if (cs.beta == 0.0f)
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t j = 0; j < cs.n; ++j) o.c[size_t(i * o.ldc + j)] = std::numeric_limits<float>::quiet_NaN();
  return o;
}

bool run(const Case& cs, Operands& o) {
  return gemm_bf16(cs.ta, cs.tb, cs.m, cs.n, cs.k, cs.alpha, o.a.data(), o.lda, o.b.data(), o.ldb, cs.beta, o.c.data(),
                   o.ldc);
}

// Every element of c, padding included, against a long double product.
void check_case(const Case& cs, bool in_parallel_region) {
  Operands o = operands_of(cs);
  const std::vector<float> c_before = o.c;
  bool ran = false;
  if (in_parallel_region) {
#pragma omp parallel num_threads(2)
#pragma omp single
    ran = run(cs, o);
  } else {
    ran = run(cs, o);
  }
  REQUIRE(ran);
  auto av = [&](int64_t i, int64_t kk) { return o.a[size_t(cs.ta ? kk * o.lda + i : i * o.lda + kk)]; };
  auto bv = [&](int64_t kk, int64_t j) { return o.b[size_t(cs.tb ? j * o.ldb + kk : kk * o.ldb + j)]; };
  // Each product of two bf16 numbers is exact in f32, so the only errors are the f32 additions:
  // a sum of k exact terms errs by at most γ_k·Σ|a||b| (Higham §3.1, γ_k = k·u/(1 − k·u), u =
  // 2^-24), whatever their order; the partial sums of the ⌈k/256⌉ blocks of pairs are added onto
  // c (one rounding each), and alpha's product and beta's fused add are two more: bound
  // γ_(k + ⌈k/256⌉ + 2)·(|alpha|·Σ|a||b| + |beta·c|).
  const double u = 0x1p-24;
  const double terms = double(cs.k + (cs.k + 255) / 256 + 2);
  const double gamma = terms * u / (1.0 - terms * u);
  int64_t failures = 0;
  std::string first_failure;
  for (int64_t i = 0; i < cs.m; ++i)
    for (int64_t j = 0; j < o.ldc; ++j) {
      const float got = o.c[size_t(i * o.ldc + j)];
      if (j >= cs.n) {
        if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(c_before[size_t(i * o.ldc + j)]) && failures++ == 0)
          first_failure = "padding column " + std::to_string(j) + " of row " + std::to_string(i) + " changed";
        continue;
      }
      long double sum = 0, magnitude = 0;
      for (int64_t kk = 0; kk < cs.k; ++kk) {
        const long double t = (long double)av(i, kk) * (long double)bv(kk, j);
        sum += t;
        magnitude += std::fabs(t);
      }
      const long double old = cs.beta == 0.0f ? 0.0L : (long double)c_before[size_t(i * o.ldc + j)];
      const long double want = (long double)cs.alpha * sum + (long double)cs.beta * old;
      const double bound = gamma * double(std::fabs(cs.alpha) * magnitude + std::fabs(cs.beta * old));
      const double error = std::fabs(double((long double)got - want));
      if ((!std::isfinite(got) || !(error <= bound)) && failures++ == 0)
        first_failure = "(" + std::to_string(i) + ", " + std::to_string(j) + "): got " + std::to_string(got) +
                        ", want " + std::to_string(double(want)) + " ± " + std::to_string(bound);
    }
  INFO("ta " << cs.ta << " tb " << cs.tb << " m " << cs.m << " n " << cs.n << " k " << cs.k << " alpha " << cs.alpha
             << " beta " << cs.beta << (in_parallel_region ? " inside a parallel region" : "") << ": " << failures
             << " wrong elements, first " << first_failure);
  REQUIRE(failures == 0);
}

}  // namespace

TEST_CASE("gemm_bf16 matches a long double product of the same bf16 values", "[matmul][bf16]") {
  LSF_REQUIRE_BF16_KERNEL();
  // Rows: one strip of 12 and its remainders, several strips, more than one 192-row unit.
  // Columns: partial and whole 16-lane halves of the 32-column panel, several panels. Depths:
  // odd (a padded last pair), one block of 256, three blocks (600).
  const int64_t rows[] = {1, 5, 12, 13, 200};
  const int64_t cols[] = {1, 7, 16, 17, 32, 33, 100};
  const int64_t depths[] = {1, 2, 31, 256, 257, 600};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t m : rows)
        for (int64_t n : cols)
          for (int64_t k : depths) {
            const float alpha = (n + k) % 3 == 0 ? -0.5f : 1.0f;
            const float beta = (m + n) % 3 == 0 ? 0.0f : (m + n) % 3 == 1 ? 1.0f : 0.25f;
            check_case({ta, tb, m, n, k, alpha, beta}, /*in_parallel_region=*/(m + k) % 2 == 0);
          }
}

TEST_CASE("gemm_bf16 gives the same bits on one thread, on all, and inside a parallel region", "[matmul][bf16]") {
  LSF_REQUIRE_BF16_KERNEL();
  // Large enough to be split over the threads (units of rows and of columns).
  for (const Case cs : {Case{false, true, 300, 200, 700, 1.0f, 0.0f}, Case{true, false, 40, 500, 1000, 0.5f, 1.0f}}) {
    Operands all = operands_of(cs), one = all, nested = all;
    REQUIRE(run(cs, all));
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const bool one_ran = run(cs, one);
    omp_set_num_threads(threads);
    REQUIRE(one_ran);
    bool nested_ran = false;
#pragma omp parallel num_threads(2)
#pragma omp single
    nested_ran = run(cs, nested);
    REQUIRE(nested_ran);
    for (size_t i = 0; i < all.c.size(); ++i) {
      INFO("element " << i);
      REQUIRE(std::bit_cast<uint32_t>(all.c[i]) == std::bit_cast<uint32_t>(one.c[i]));
      REQUIRE(std::bit_cast<uint32_t>(all.c[i]) == std::bit_cast<uint32_t>(nested.c[i]));
    }
  }
}

TEST_CASE("gemm_bf16 declines values that are not exact bf16 numbers, leaving c untouched", "[matmul][bf16]") {
  LSF_REQUIRE_BF16_KERNEL();
  const Case cs{false, false, 30, 40, 50, 1.0f, 1.0f};
  // 1 + 2^-20: a low-half bit; 2^-130: a bf16 subnormal (exact, but the instruction reads 0).
  for (const float odd : {1.0f + 0x1p-20f, 0x1p-130f, -0x1p-128f})
    for (bool in_a : {true, false}) {
      Operands o = operands_of(cs);
      (in_a ? o.a[size_t(7 * o.lda + 49)] : o.b[size_t(49 * o.ldb + 39)]) = odd;  // in the last pair
      const std::vector<float> before = o.c;
      INFO("value " << odd << " in " << (in_a ? "a" : "b"));
      REQUIRE_FALSE(run(cs, o));
      for (size_t i = 0; i < o.c.size(); ++i) REQUIRE(std::bit_cast<uint32_t>(o.c[i]) == std::bit_cast<uint32_t>(before[i]));
    }
  // Zeros, infinities and NaN are bf16 numbers: taken, with IEEE products.
  Operands o = operands_of(cs);
  o.a[0] = std::numeric_limits<float>::infinity();
  o.a[1] = 0.0f;
  o.b[0] = -2.0f;
  REQUIRE(run(cs, o));
  REQUIRE(o.c[0] == -std::numeric_limits<float>::infinity());  // ∞·(−2) + finite terms
  o.b[0] = 0.0f;
  REQUIRE(run(cs, o));
  REQUIRE(std::isnan(o.c[0]));  // ∞·0
}

TEST_CASE("to(kF32) of a bf16 tensor marks its values exact in bf16 until they are written", "[matmul][bf16][routing]") {
  using namespace lsf;
  Tensor x = randn({4, 6});
  REQUIRE_FALSE(x.storage()->values_exact_in(kBF16));
  Tensor r = x.to(kBF16).to(kF32);
  REQUIRE(r.storage()->values_exact_in(kBF16));
  REQUIRE_FALSE(r.storage()->values_exact_in(kF16));
  REQUIRE(r.t().storage()->values_exact_in(kBF16));  // a view shares the buffer
  Tensor h = x.to(kF16).to(kF32);
  REQUIRE(h.storage()->values_exact_in(kF16));
  REQUIRE_FALSE(h.storage()->values_exact_in(kBF16));
  r.copy_(x);  // an in-place write through the Tensor API forgets it
  REQUIRE_FALSE(r.storage()->values_exact_in(kBF16));
  REQUIRE_FALSE(x.to(kF64).to(kF32).storage()->values_exact_in(kBF16));
}

namespace {

// Whether two f32 tensors hold the same bits.
bool same_bits(const lsf::Tensor& a, const lsf::Tensor& b) {
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (std::bit_cast<uint32_t>(x[i]) != std::bit_cast<uint32_t>(y[i])) return false;
  return true;
}

// set_cpu_bf16_products(on) for a scope, restored after it (a failed REQUIRE throws through it).
class Bf16Products {
 public:
  explicit Bf16Products(bool on) : previous_(lsf::cpu_bf16_products()) { lsf::set_cpu_bf16_products(on); }
  ~Bf16Products() { lsf::set_cpu_bf16_products(previous_); }

 private:
  bool previous_;
};

// y = product(x, w, b) under bf16 autocast with the bf16 kernel on or off, and the gradients of
// Σ y·probe (db undefined without a bias).
struct ProductRun {
  lsf::Tensor y, dx, dw, db;
};
template <typename Product>
ProductRun autocast_run(bool kernel, const lsf::Tensor& x0, const lsf::Tensor& w0, const lsf::Tensor& b0,
                        const lsf::Tensor& probe, Product product) {
  using namespace lsf;
  const Bf16Products products(kernel);
  Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true), b;
  if (b0.defined()) b = b0.detach().requires_grad_(true);
  Tensor y;
  {
    AutocastGuard autocast(kBF16);
    y = product(x, w, b);
  }
  sum(mul(y, probe)).backward();
  return {y.detach(), x.grad(), w.grad(), b.defined() ? b.grad() : Tensor()};
}

double max_abs(const lsf::Tensor& t) { return t.abs().max().item<double>(); }

// Every element of got within one bf16 rounding of want plus the f32 sums' bound: both sides
// round the same f32 product to bf16 (forward) or take the same bf16-rounded operands (backward);
// their f32 sums of K exact products differ by at most 2·γ_K·Σ|a||b| ≤ 2·γ_K·K·max|a|·max|b|,
// and a rounding to bf16 of two values that close may land one bf16 step apart (a step is at most
// 2^-7 of the larger magnitude: 8 significant bits).
void check_bf16_close(const lsf::Tensor& got, const lsf::Tensor& want, int64_t K, double max_term, const char* what) {
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  REQUIRE(g.size() == w.size());
  const double u = 0x1p-24, gamma = double(K) * u / (1.0 - double(K) * u);
  for (size_t i = 0; i < g.size(); ++i) {
    const double bound = 0x1p-7 * std::max(std::fabs(g[i]), std::fabs(w[i])) + 2.0 * gamma * double(K) * max_term;
    INFO(what << " element " << i << ": " << g[i] << " vs " << w[i] << " (bound " << bound << ")");
    REQUIRE(std::fabs(g[i] - w[i]) <= bound);
  }
}

}  // namespace

TEST_CASE("autocast's Linear takes the bf16 products where the CPU has them, forward and backward", "[matmul][bf16][routing]") {
  using namespace lsf;
  manual_seed(11);
  // 256 rows of 320 features into 288: every product pays for the kernel (gemm_bf16_pays).
  REQUIRE(lsf::cpu::gemm_bf16_pays(256, 288, 320));
  REQUIRE(lsf::cpu::gemm_bf16_pays(256, 320, 288));
  REQUIRE(lsf::cpu::gemm_bf16_pays(288, 320, 256));
  const Tensor x = randn({2, 128, 320}), w = mul(randn({288, 320}), 0.1), b = randn({288}), probe = randn({2, 128, 288});
  auto product = [](const Tensor& x, const Tensor& w, const Tensor& b) { return linear(x, w, b); };
  const ProductRun with = autocast_run(true, x, w, b, probe, product), without = autocast_run(false, x, w, b, probe, product);
  // Largest |term| of each product: |x|·|w| (forward), |dy|·|w| (dx), |dy|·|x| (dw); dy = probe.
  check_bf16_close(with.y, without.y, 320, max_abs(x) * max_abs(w), "y");
  check_bf16_close(with.dx, without.dx, 288, max_abs(probe) * max_abs(w), "dx");
  check_bf16_close(with.dw, without.dw, 256, max_abs(probe) * max_abs(x), "dw");
  // The bias gradient is a sum, not a product: the same bits either way.
  REQUIRE(same_bits(with.db, without.db));
  if (!gemm_bf16_available()) {  // then both runs were f32: the same bits
    REQUIRE(same_bits(with.y, without.y));
    REQUIRE(same_bits(with.dw, without.dw));
  }
}

TEST_CASE("a product whose operands are marked bf16 but hold other values runs in f32", "[matmul][bf16][routing]") {
  using namespace lsf;
  manual_seed(12);
  // 128 × 256 · 256 × 320: a product that pays for the kernel.
  REQUIRE(lsf::cpu::gemm_bf16_pays(128, 320, 256));
  Tensor a = randn({128, 256}).to(kBF16).to(kF32), b = randn({256, 320}).to(kBF16).to(kF32);
  // Written through a raw pointer: the version does not move, the mark stays, the value is f32.
  a.data_ptr<float>()[5] = 1.0f + 0x1p-20f;
  REQUIRE(a.storage()->values_exact_in(kBF16));
  const Tensor with = matmul(a, b);
  Tensor without;
  {
    const Bf16Products off(false);
    without = matmul(a, b);
  }
  REQUIRE(same_bits(with, without));  // the kernel declined: OpenBLAS's bits
}

TEST_CASE("autocast's conv2d takes the bf16 products where the CPU has them, forward and backward", "[matmul][bf16][routing]") {
  using namespace lsf;
  manual_seed(13);
  // 3 × 3, 32 → 64 channels on 24 × 24: the GEMMs (64 × 576 × 288 forward, 64 × 288 × 576 for
  // the weight, 288 × 576 × 64 for the input's columns) all pay for the kernel.
  REQUIRE(lsf::cpu::gemm_bf16_pays(64, 576, 288));
  REQUIRE(lsf::cpu::gemm_bf16_pays(64, 288, 576));
  REQUIRE(lsf::cpu::gemm_bf16_pays(288, 576, 64));
  const Tensor x = randn({2, 32, 24, 24}), w = mul(randn({64, 32, 3, 3}), 0.1), probe = randn({2, 64, 24, 24});
  auto product = [](const Tensor& x, const Tensor& w, const Tensor&) { return conv2d(x, w, Tensor(), {.padding = 1}); };
  const ProductRun with = autocast_run(true, x, w, Tensor(), probe, product),
                   without = autocast_run(false, x, w, Tensor(), probe, product);
  // Contractions: 288 taps (forward), 64 output channels (dx's columns), 2 · 576 positions (dw).
  check_bf16_close(with.y, without.y, 288, max_abs(x) * max_abs(w), "y");
  check_bf16_close(with.dx, without.dx, 64 * 9, max_abs(probe) * max_abs(w), "dx");
  check_bf16_close(with.dw, without.dw, 2 * 576, max_abs(probe) * max_abs(x), "dw");
}

TEST_CASE("build_info says which vector kernels run and whether bf16 products do", "[matmul][bf16][routing]") {
  using namespace lsf;
  {
    const Bf16Products on(true);
    const std::string text = build_info();
    REQUIRE(text.find("cpu:      ") != std::string::npos);
    if (cpu::gemm_bf16_supported())
      REQUIRE(text.find("bf16 products under autocast: AVX512_BF16 kernel") != std::string::npos);
    else
      REQUIRE(text.find("bf16 products under autocast: f32 products (no AVX512_BF16") != std::string::npos);
  }
  const Bf16Products off(false);
  const std::string text = build_info();
  REQUIRE(text.find(cpu::gemm_bf16_supported() ? "bf16 products under autocast: off" : "(no AVX512_BF16") !=
          std::string::npos);
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  // The level named is the one the kernels run (this suite also runs capped at baseline and AVX2).
  REQUIRE(text.find(std::string("cpu:      ") + cpu::vector_level_name(cpu::vector_level()) + " vector kernels") !=
          std::string::npos);
#endif
}
