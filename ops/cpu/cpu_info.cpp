// The CPU backend's lines of lsf::build_info() (`lsf info`, the benchmarks' metadata): which
// vector level its kernels run (ops/cpu/vector_kernels.h) and whether autocast's bf16 products
// run on the AVX512_BF16 kernel (ops/cpu/gemm_bf16.h), so that a figure measured on one machine
// says which code produced it. Registered with the engine, which knows nothing of ops/.
#include <sstream>
#include <string>

#include "lsformer/engine/info.h"
#include "lsformer/ops/cpu/gemm_bf16.h"
#include "lsformer/ops/cpu/vector_kernels.h"

namespace lsf::cpu {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
const char* vector_isa_name(VectorLevel level) {
  constexpr const char* kNames[] = {"AVX-512", "AVX2", "SSE2"};
  return kNames[int(level)];
}
#endif

std::string describe_cpu_kernels() {
  std::ostringstream os;
  os << "cpu:      ";
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  const VectorLevel running = vector_level(), best = supported_vector_levels().front();
  os << vector_level_name(running) << " vector kernels (" << vector_isa_name(running) << ")";
  if (running != best) os << " (capped by LSF_CPU_VECTOR_LEVEL; this CPU runs " << vector_level_name(best) << ")";
#else
  os << "portable vector kernels (one 64-byte build)";
#endif
  os << "\n          bf16 products under autocast: ";
  if (gemm_bf16_available())
    os << "AVX512_BF16 kernel (LSF_CPU_BF16_PRODUCTS=0 turns it off)";
  else if (gemm_bf16_supported())
    os << "off (LSF_CPU_BF16_PRODUCTS=0 or lsf::set_cpu_bf16_products(false)); f32 products";
  else
    os << "f32 products (no AVX512_BF16 at the vector level in use)";
  os << "\n";
  return os.str();
}

[[maybe_unused]] const bool kRegistered = (register_build_info_section(describe_cpu_kernels), true);

}  // namespace
}  // namespace lsf::cpu
