// Shared test utilities: tolerance-based comparison of tensors against expected values, and
// reading the PyTorch-generated fixtures in tests/fixtures/*.json.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <lsformer/lsformer.h>
#include <lsformer/engine/profiler.h>
#include "lsformer/ops/cpu/gemm_bf16.h"

namespace lsf::test {

// Opens every [cuda] test: without a usable GPU the test ends here, saying why (CTest reports it
// as skipped). With LSF_EXPECT_CUDA=1 in the environment (set it on a GPU machine) the missing
// device is a failure instead, so a broken driver cannot turn the suite into skips.
#define LSF_REQUIRE_CUDA_DEVICE()                                                                    \
  do {                                                                                               \
    if (!::lsf::cuda_is_available()) {                                                               \
      if (::lsf::test::cuda_expected())                                                              \
        FAIL("LSF_EXPECT_CUDA=1, but no usable CUDA device: " << ::lsf::cuda::unavailable_reason()); \
      WARN("skipped: no usable CUDA device (" << ::lsf::cuda::unavailable_reason() << ")");          \
      return;                                                                                        \
    }                                                                                                \
  } while (0)

// LSF_EXPECT_CUDA=1: the [cuda] tests must find a device (LSF_REQUIRE_CUDA_DEVICE).
inline bool cuda_expected() {
  const char* v = std::getenv("LSF_EXPECT_CUDA");
  return v != nullptr && std::string(v) == "1";
}

// Opens a test whose measurement AddressSanitizer makes meaningless (resident memory: ASan adds
// shadow memory and a quarantine of freed blocks); CTest reports it as skipped there.
#if defined(__SANITIZE_ADDRESS__)
#define LSF_SKIP_UNDER_ASAN(what)                                                     \
  do {                                                                                \
    WARN("skipped: not measurable under AddressSanitizer: " what);                    \
    return;                                                                           \
  } while (0)
#else
#define LSF_SKIP_UNDER_ASAN(what) \
  do {                            \
  } while (0)
#endif

// Opens a test of the CPU's bf16 product kernel (ops/cpu/gemm_bf16.h); CTest reports it as
// skipped where the kernel does not run (no AVX512_BF16, or a capped vector level).
#define LSF_REQUIRE_BF16_KERNEL()                                                                   \
  do {                                                                                              \
    if (!::lsf::cpu::gemm_bf16_available()) {                                                       \
      WARN("skipped: this CPU runs no bf16 products (no AVX512_BF16, or LSF_CPU_VECTOR_LEVEL caps " \
           "the vector level)");                                                                    \
      return;                                                                                       \
    }                                                                                               \
  } while (0)

// lsf::set_num_threads(n) for a scope, restored after it (also when a REQUIRE ends the test).
class ThreadCount {
 public:
  explicit ThreadCount(int n) : previous_(get_num_threads()) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(previous_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int previous_;
};

// Checks |actual − expected| ≤ atol + rtol·|expected| for every element (NaN matches NaN,
// infinities must match exactly), reporting the first mismatches with their flat index.
inline void check_close(const Tensor& actual, const std::vector<double>& expected, double atol,
                        double rtol) {
  REQUIRE(actual.numel() == int64_t(expected.size()));
  std::vector<double> a = actual.to_vector<double>();
  int bad = 0;
  std::ostringstream msg;
  for (size_t i = 0; i < a.size(); ++i) {
    double e = expected[i];
    bool ok = (std::isnan(e) && std::isnan(a[i])) || (std::isinf(e) && a[i] == e) ||
              std::fabs(a[i] - e) <= atol + rtol * std::fabs(e);
    if (!ok && bad++ < 5) msg << "  [" << i << "] got " << a[i] << ", expected " << e << "\n";
  }
  INFO("mismatches: " << bad << " of " << a.size() << " (atol " << atol << ", rtol " << rtol << ")\n" << msg.str());
  CHECK(bad == 0);
}

inline void check_close(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  REQUIRE(actual.shape() == expected.shape());
  check_close(actual, expected.to_vector<double>(), atol, rtol);
}

// Exact equality of shape and every value.
template <typename T>
void check_equal(const Tensor& actual, const Shape& shape, const std::vector<T>& values) {
  REQUIRE(actual.shape() == shape);
  CHECK(actual.to_vector<T>() == values);
}

// tests/fixtures/<name>.json, generated by the committed scripts next to it.
inline nlohmann::json load_fixture(const std::string& name) {
  std::ifstream in(std::string(LSF_FIXTURE_DIR) + "/" + name + ".json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// The same fixture file, parsed once per test binary.
inline const nlohmann::json& cached_fixture(const std::string& name) {
  static std::map<std::string, nlohmann::json> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, load_fixture(name)).first;
  return it->second;
}

// Shapes as text for INFO messages (Catch does not find lsf's operator<< for std::vector).
inline std::string str(const Shape& s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

// A fixture tensor: {"shape": [...], "dtype": "f64", "data": [...]} (data row-major).
inline Tensor fixture_tensor(const nlohmann::json& j) {
  Shape shape = j.at("shape").get<Shape>();
  std::string dtype = j.value("dtype", "f64");
  std::vector<double> data;
  for (const auto& v : j.at("data")) {
    if (v.is_string()) {  // "nan", "inf", "-inf"
      std::string s = v.get<std::string>();
      data.push_back(s == "nan" ? NAN : s == "inf" ? INFINITY : -INFINITY);
    } else if (v.is_boolean()) {
      data.push_back(v.get<bool>() ? 1.0 : 0.0);
    } else {
      data.push_back(v.get<double>());
    }
  }
  DType dt = dtype == "f32" ? kF32 : dtype == "i64" ? kI64 : dtype == "bool" ? kBool : kF64;
  return tensor(data, shape).to(dt);
}

// A fixture's state dict: {"name": fixture tensor, ...} (a model's weights by state_dict name).
inline std::map<std::string, Tensor> fixture_state(const nlohmann::json& j) {
  std::map<std::string, Tensor> out;
  for (auto it = j.begin(); it != j.end(); ++it) out[it.key()] = fixture_tensor(it.value());
  return out;
}

// Fixture tensor `name` of case `c`, as a leaf that requires grad.
inline Tensor fixture_leaf(const nlohmann::json& c, const std::string& name) {
  return fixture_tensor(c.at(name)).requires_grad_(true);
}

// Random f64 leaf for gradient checks.
inline Tensor grad_input(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, TensorOptions(kF64), &g).requires_grad_(true);
}

// Calls of each backend kernel (by kernel-table name, e.g. "copy_kernel") while body runs,
// counted by the profiler: how tests check which kernels an op runs and that it makes no extra
// passes (copies, gradient sums). A kernel that did not run is absent (operator[] gives 0).
inline std::map<std::string, int64_t> kernel_calls(const std::function<void()>& body) {
  profiler::enable();
  profiler::reset();
  body();
  profiler::disable();
  std::map<std::string, int64_t> calls;
  for (const profiler::OpStat& op : profiler::snapshot().ops) calls[op.name] += op.calls;
  return calls;
}

// Calls of one kernel during loss.backward().
inline int64_t kernel_calls_in_backward(const Tensor& loss, const std::string& kernel) {
  return kernel_calls([&] { loss.backward(); })[kernel];
}

}  // namespace lsf::test
