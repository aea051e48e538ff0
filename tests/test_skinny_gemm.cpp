// ops/cpu/skinny_gemm, in every instruction-set variant the CPU runs: every register-tile path (full and partial column vectors, full and
// remainder row tiles, both transposes, alpha and beta, leading dimensions wider than the
// matrices) against a naive product in higher precision, in f32 and f64; run on all threads
// and inside a parallel region, with identical bits; c outside the product untouched; and the
// limits enforced.
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "helpers.h"
#include "lsformer/ops/cpu/skinny_gemm.h"

using lsf::cpu::skinny_gemm;
using lsf::cpu::skinny_gemm_applies;

namespace {

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  double alpha, beta;
};

// Deterministic values in [−1, 1).
template <typename T>
std::vector<T> values(size_t count, uint32_t seed) {
  std::vector<T> v(count);
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = T(double(s >> 8) / double(1u << 23) - 1.0);
  }
  return v;
}

// Runs one case with padded leading dimensions (lda, ldb, ldc each 3 wider than needed) and
// checks every element of c, padding included, against a long double reference.
template <typename T>
void check_case(const Case& cs, bool in_parallel_region) {
  const int64_t a_rows = cs.ta ? cs.k : cs.m, a_cols = cs.ta ? cs.m : cs.k;
  const int64_t b_rows = cs.tb ? cs.n : cs.k, b_cols = cs.tb ? cs.k : cs.n;
  const int64_t lda = a_cols + 3, ldb = b_cols + 3, ldc = cs.n + 3;
  const std::vector<T> a = values<T>(size_t(a_rows * lda), 1), b = values<T>(size_t(b_rows * ldb), 2);
  std::vector<T> c = values<T>(size_t(cs.m * ldc), 3);
  if (cs.beta == 0.0)  // beta = 0 must not read c: NaN there must not reach the result
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t j = 0; j < cs.n; ++j) c[size_t(i * ldc + j)] = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> c_before = c;
  auto av = [&](int64_t i, int64_t kk) { return a[size_t(cs.ta ? kk * lda + i : i * lda + kk)]; };
  auto bv = [&](int64_t kk, int64_t j) { return b[size_t(cs.tb ? j * ldb + kk : kk * ldb + j)]; };

  if (in_parallel_region) {
#pragma omp parallel num_threads(2)
#pragma omp single
    skinny_gemm(cs.ta, cs.tb, cs.m, cs.n, cs.k, T(cs.alpha), a.data(), lda, b.data(), ldb, T(cs.beta), c.data(), ldc);
  } else {
    skinny_gemm(cs.ta, cs.tb, cs.m, cs.n, cs.k, T(cs.alpha), a.data(), lda, b.data(), ldb, T(cs.beta), c.data(), ldc);
  }

  // A dot product of length k in unit roundoff u errs by at most γ_k·Σ|a||b| with
  // γ_k = k·u / (1 − k·u) (Higham §3.1); the alpha scaling, the beta product and the final
  // add are three more roundings: bound (k + 3)·u/(1 − (k + 3)·u)·(|alpha|·Σ|a||b| + |beta·c|).
  const double u = std::is_same_v<T, float> ? 0x1p-24 : 0x1p-53;
  const double gamma = double(cs.k + 3) * u / (1.0 - double(cs.k + 3) * u);
  int64_t failures = 0;
  std::string first_failure;
  auto fail = [&](int64_t i, int64_t j, const std::string& what) {
    if (failures++ == 0)
      first_failure = "at (" + std::to_string(i) + ", " + std::to_string(j) + "): " + what;
  };
  for (int64_t i = 0; i < cs.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const T got = c[size_t(i * ldc + j)];
      if (j >= cs.n) {  // beyond the product's columns: untouched
        if (!(got == c_before[size_t(i * ldc + j)])) fail(i, j, "padding column changed");
        continue;
      }
      long double sum = 0, magnitude = 0;
      for (int64_t kk = 0; kk < cs.k; ++kk) {
        sum += (long double)av(i, kk) * (long double)bv(kk, j);
        magnitude += std::fabs((long double)av(i, kk) * (long double)bv(kk, j));
      }
      const long double old = cs.beta == 0.0 ? 0.0L : (long double)c_before[size_t(i * ldc + j)];
      const long double want = (long double)cs.alpha * sum + (long double)cs.beta * old;
      const double bound = gamma * double(std::fabs(cs.alpha) * magnitude + std::fabs(cs.beta * old));
      const double error = std::fabs(double((long double)got - want));
      if (!std::isfinite(double(got)) || !(error <= bound))
        fail(i, j, "got " + std::to_string(double(got)) + ", want " + std::to_string(double(want)) + " ± " +
                       std::to_string(bound));
    }
  }
  INFO("ta " << cs.ta << " tb " << cs.tb << " m " << cs.m << " n " << cs.n << " k " << cs.k << " alpha " << cs.alpha
             << " beta " << cs.beta << (in_parallel_region ? " inside a parallel region" : "") << ": " << failures
             << " wrong elements, first " << first_failure);
  REQUIRE(failures == 0);
}

// Row counts covering the 6- and 4-row tiles and their remainders, and the parallel split
// (96-row tasks); column counts covering 1 … 4 vectors of 2, 4, 8 and 16 lanes and partial ones.
const int64_t kRows[] = {1, 5, 7, 13, 200};
const int64_t kCols[] = {1, 3, 8, 17, 33, 64, 65, 100, 256};
// 600: three K chunks (256, 256, 88), the long contraction of a small output.
const int64_t kDepths[] = {1, 2, 31, 64, 256, 600};

template <typename T>
void check_all() {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t m : kRows)
        for (int64_t n : kCols)
          for (int64_t k : kDepths) {
            // alpha and beta vary with the shape so every combination meets many shapes.
            const double alpha = (n + k) % 3 == 0 ? -0.5 : 1.0;
            const double beta = (m + n) % 3 == 0 ? 0.0 : (m + n) % 3 == 1 ? 1.0 : 0.25;
            check_case<T>({ta, tb, m, n, k, alpha, beta}, /*in_parallel_region=*/(m + k) % 2 == 0);
          }
}

// Runs body once per kernel variant this CPU can run, then restores the default.
template <typename Body>
void for_each_variant(Body&& body) {
  const std::vector<std::string> variants = lsf::cpu::skinny_gemm_variants();
  REQUIRE(variants.back() == "baseline");
  for (const std::string& v : variants) {
    INFO("variant " << v);
    lsf::cpu::select_skinny_gemm_variant(v);
    body();
  }
  lsf::cpu::select_skinny_gemm_variant(variants.front());
}

}  // namespace

TEST_CASE("skinny_gemm matches a long double product in f32, every variant", "[matmul][skinny]") {
  for_each_variant(check_all<float>);
}
TEST_CASE("skinny_gemm matches a long double product in f64, every variant", "[matmul][skinny]") {
  for_each_variant(check_all<double>);
}
TEST_CASE("skinny_gemm rejects a variant this CPU does not have", "[matmul][skinny]") {
  REQUIRE_THROWS_WITH(lsf::cpu::select_skinny_gemm_variant("x86-64-v9"),
                      Catch::Contains("no variant 'x86-64-v9'") && Catch::Contains("baseline"));
}

// c = op(a) · op(b) (packed operands, values of `seed`) on all threads and on one: the bits must
// agree, the threads only splitting rows.
void check_thread_independent(bool ta, bool tb, int64_t m, int64_t n, int64_t k, uint32_t seed) {
  const std::vector<float> a = values<float>(size_t(m * k), seed), b = values<float>(size_t(k * n), seed + 1);
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  std::vector<float> all_threads(size_t(m * n)), one_thread(size_t(m * n));
  skinny_gemm(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, all_threads.data(), n);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  skinny_gemm(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, one_thread.data(), n);
  omp_set_num_threads(threads);
  REQUIRE(all_threads == one_thread);
}

TEST_CASE("skinny_gemm gives the same bits on one thread and on all", "[matmul][skinny]") {
  check_thread_independent(false, true, 1000, 64, 64, 4);  // large enough to be split over the threads
}

TEST_CASE("skinny_gemm takes only small n, and small k or a small output", "[matmul][skinny]") {
  const bool vector = lsf::cpu::skinny_gemm_variants().front() != "baseline";
  CHECK(skinny_gemm_applies(16, 256, 256) == vector);
  CHECK(skinny_gemm_applies(256, 64, 65536) == vector);  // a weight gradient over every token
  CHECK_FALSE(skinny_gemm_applies(15, 64, 64));  // few rows: OpenBLAS's small kernels
  CHECK_FALSE(skinny_gemm_applies(1000, 257, 64));
  CHECK_FALSE(skinny_gemm_applies(1000, 64, 257));
  CHECK_FALSE(skinny_gemm_applies(257, 64, 257));
  CHECK_FALSE(skinny_gemm_applies(1000, 0, 64));
  std::vector<float> a(300 * 300), b(300 * 300), c(300 * 300);
  REQUIRE_THROWS_WITH(skinny_gemm(false, false, 4, 300, 8, 1.0f, a.data(), 8, b.data(), 300, 0.0f, c.data(), 300),
                      Catch::Contains("exceed its limits"));
  REQUIRE_THROWS_WITH(skinny_gemm(false, false, 280, 8, 280, 1.0f, a.data(), 280, b.data(), 8, 0.0f, c.data(), 8),
                      Catch::Contains("exceed its limits"));
}

TEST_CASE("skinny_gemm: a long contraction gives the same bits on one thread and on all", "[matmul][skinny]") {
  // The dispatch splits such a product's K over threads itself (ops/cpu/matmul.cpp); the kernel
  // alone must not depend on the thread count.
  check_thread_independent(true, false, 200, 48, 3000, 6);
}

TEST_CASE("skinny_gemm is dispatched to only with a vector variant", "[matmul][skinny]") {
  lsf::cpu::select_skinny_gemm_variant("baseline");
  CHECK_FALSE(skinny_gemm_applies(1000, 64, 64));
  lsf::cpu::select_skinny_gemm_variant(lsf::cpu::skinny_gemm_variants().front());
  CHECK(skinny_gemm_applies(1000, 64, 64) == (lsf::cpu::skinny_gemm_variants().front() != "baseline"));
}

// The bias of a Linear layer joins the product as each tile is stored: c = (Σ + beta·c) + bias,
// bit for bit what the product without it followed by a separate add gives (alpha = 1), in every
// variant, for every column count (partial vectors), both transposes, and a contraction in
// several K chunks (the bias joins after the last).
template <typename T>
void check_bias() {
  for (bool tb : {false, true})
    for (int64_t n : kCols)
      for (int64_t k : {int64_t(7), int64_t(64), int64_t(600)})
        for (double beta : {0.0, 0.25}) {
          const int64_t m = k > lsf::cpu::kSkinnyMaxK ? 40 : 37;
          INFO("tb " << tb << ", m " << m << ", n " << n << ", k " << k << ", beta " << beta);
          const int64_t ldb = tb ? k : n;
          const std::vector<T> a = values<T>(size_t(m * k), 4), b = values<T>(size_t((tb ? n : k) * ldb), 5);
          const std::vector<T> bias = values<T>(size_t(n), 6), c0 = values<T>(size_t(m * n), 7);
          std::vector<T> with_bias = c0, separate = c0;
          skinny_gemm(false, tb, m, n, k, T(1), a.data(), k, b.data(), ldb, T(beta), with_bias.data(), n, bias.data());
          skinny_gemm(false, tb, m, n, k, T(1), a.data(), k, b.data(), ldb, T(beta), separate.data(), n);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) separate[size_t(i * n + j)] += bias[size_t(j)];
          CHECK(with_bias == separate);
        }
}

TEST_CASE("skinny_gemm adds a bias as a separate add would, bit for bit, every variant", "[matmul][skinny]") {
  for_each_variant(check_bias<float>);
  for_each_variant(check_bias<double>);
}

// skinny_gemm_group: the products' bits are skinny_gemm's run one after the other, in every
// variant, on one thread and on all, and inside a parallel region: products sharing a (a
// Linear's x through several weights, both transposes of b, a bias on some), then products
// summed into one c (beta 0, then 1: x's gradient through those layers) with a transposed a.
// Row counts cover one partial row block and several 96-row blocks split over the threads.
template <typename T>
void check_group() {
  using Product = lsf::cpu::SkinnyProduct<T>;
  for (int64_t m : {int64_t(37), int64_t(500)})
    for (int mode = 0; mode < 3; ++mode) {  // 0: all threads, 1: one thread, 2: inside a parallel region
      INFO("m " << m << ", mode " << mode);
      const int64_t k = 48;
      const std::vector<int64_t> widths = {64, 17, 100};
      const std::vector<T> x = values<T>(size_t(m * k), 11);  // shared a [m × k]
      std::vector<std::vector<T>> weights, biases, outs;
      for (size_t i = 0; i < widths.size(); ++i) {
        weights.push_back(values<T>(size_t(widths[i] * k), uint32_t(12 + i)));
        biases.push_back(values<T>(size_t(widths[i]), uint32_t(20 + i)));
        outs.push_back(std::vector<T>(size_t(m * widths[i]), T(0)));
      }
      std::vector<std::vector<T>> want = outs;
      std::vector<Product> shared_a;
      for (size_t i = 0; i < widths.size(); ++i) {
        Product p;
        p.tb = i != 1;  // weight i [n × k] read transposed; weight 1 as [k × n]
        p.n = widths[i];
        p.k = k;
        p.alpha = i == 2 ? T(-0.5) : T(1);
        p.a = x.data();
        p.lda = k;
        p.b = weights[i].data();
        p.ldb = p.tb ? k : widths[i];
        p.c = outs[i].data();
        p.ldc = widths[i];
        p.bias = i == 1 ? nullptr : biases[i].data();
        shared_a.push_back(p);
        skinny_gemm(p.ta, p.tb, m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, want[i].data(), p.ldc, p.bias);
      }
      // Products summed into one c [m × k]: a = dyᵢ stored transposed [nᵢ × m] (ta), b = weight i.
      std::vector<std::vector<T>> dys;
      std::vector<T> dx(size_t(m * k), std::numeric_limits<T>::quiet_NaN()), dx_want = dx;
      std::vector<Product> summed;
      for (size_t i = 0; i < widths.size(); ++i) {
        dys.push_back(values<T>(size_t(widths[i] * m), uint32_t(30 + i)));
        Product p;
        p.ta = true;
        p.n = k;
        p.k = widths[i];
        p.a = dys[i].data();
        p.lda = m;
        p.b = weights[i].data();
        p.ldb = k;
        p.beta = i == 0 ? T(0) : T(1);
        p.c = dx.data();
        p.ldc = k;
        summed.push_back(p);
        skinny_gemm(p.ta, p.tb, m, p.n, p.k, p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, dx_want.data(), p.ldc);
      }
      const int threads = omp_get_max_threads();
      if (mode == 1) omp_set_num_threads(1);
      if (mode == 2) {
#pragma omp parallel num_threads(2)
#pragma omp single
        {
          lsf::cpu::skinny_gemm_group(m, shared_a);
          lsf::cpu::skinny_gemm_group(m, summed);
        }
      } else {
        lsf::cpu::skinny_gemm_group(m, shared_a);
        lsf::cpu::skinny_gemm_group(m, summed);
      }
      omp_set_num_threads(threads);
      for (size_t i = 0; i < widths.size(); ++i) CHECK(outs[i] == want[i]);
      CHECK(dx == dx_want);
    }
}

TEST_CASE("skinny_gemm_group gives skinny_gemm's bits, one product after the other, every variant", "[matmul][skinny]") {
  for_each_variant(check_group<float>);
  for_each_variant(check_group<double>);
}

TEST_CASE("skinny_gemm_group takes only products of one K chunk", "[matmul][skinny]") {
  std::vector<float> a(40 * 300), b(300 * 300), c(40 * 300);
  lsf::cpu::SkinnyProduct<float> p;
  p.n = 8;
  p.k = 257;
  p.a = a.data();
  p.lda = 257;
  p.b = b.data();
  p.ldb = 8;
  p.c = c.data();
  p.ldc = 8;
  REQUIRE_THROWS_WITH(lsf::cpu::skinny_gemm_group(40, {p}), Catch::Contains("skinny_gemm_group") &&
                                                                Catch::Contains("k = 257"));
  p.k = 8;
  p.n = 257;
  REQUIRE_THROWS_WITH(lsf::cpu::skinny_gemm_group(40, {p}), Catch::Contains("n = 257"));
}
