// OpenBLAS kernel-family check and re-exec (see blas_core.h).
#include "lsformer/engine/blas_core.h"

#include <unistd.h>

#include <cstdlib>
#include <initializer_list>

// Exported by every OpenBLAS since 0.2; a DYNAMIC_ARCH build names the core it picked at load.
extern "C" char* openblas_get_corename(void);

namespace lsf {
namespace {

bool in(const std::string& core, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (core == n) return true;
  return false;
}

}  // namespace

int blas_core_vector_level(const std::string& core) {
  // The names of OpenBLAS's driver/others/dynamic.c (corename[]) and what their sgemm kernels use.
  if (in(core, {"SkylakeX", "Cooperlake", "SapphireRapids"})) return 3;
  if (in(core, {"Haswell", "Zen", "Excavator"})) return 2;
  if (in(core, {"Sandybridge", "Bulldozer", "Piledriver", "Steamroller"})) return 1;
  return 0;
}

std::string best_blas_core(bool x86_64_v4, bool avx512_bf16, bool x86_64_v3) {
  if (x86_64_v4) return avx512_bf16 ? "Cooperlake" : "SkylakeX";
  if (x86_64_v3) return "Haswell";
  return "";
}

BlasCoreChoice blas_core_choice() {
  BlasCoreChoice c;
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE")) c.forced = forced;
  const char* running = openblas_get_corename();
  c.running = running ? running : "";
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the AVX / AVX-512 registers (XCR0).
  c.best = best_blas_core(__builtin_cpu_supports("x86-64-v4"), __builtin_cpu_supports("avx512bf16"),
                          __builtin_cpu_supports("x86-64-v3"));
#endif
  c.upgrade = !c.running.empty() && !c.best.empty() &&
              blas_core_vector_level(c.best) > blas_core_vector_level(c.running);
  return c;
}

std::string blas_core_advice(const BlasCoreChoice& c, BlasAdviceFor reader) {
  if (!c.upgrade) return "";
  const std::string why = "this CPU runs " + c.best + "'s (wider vectors, several times the GEMM rate)";
  if (!c.forced.empty())
    return "OPENBLAS_CORETYPE=" + c.forced + " in the environment holds OpenBLAS to its " + c.running +
           " kernels, but " + why + ": set OPENBLAS_CORETYPE=" + c.best +
           " or unset it (the lsf tool and the benchmarks then choose the best kernels themselves)";
  if (reader == BlasAdviceFor::RestartedProgram)
    return "OpenBLAS runs its " + c.running + " kernels, but " + why + ": the restart with OPENBLAS_CORETYPE=" +
           c.best + " did not happen, so set it before starting the program";
  return "OpenBLAS runs its " + c.running + " kernels, but " + why + ": set OPENBLAS_CORETYPE=" + c.best +
         " before starting the program (the lsf tool and the benchmarks do this themselves)";
}

void reexec_with_best_blas_core(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("LSF_BLAS_REEXEC")) return;
  const BlasCoreChoice c = blas_core_choice();
  if (!c.upgrade) return;
  setenv("OPENBLAS_CORETYPE", c.best.c_str(), 1);
  setenv("LSF_BLAS_REEXEC", "1", 1);
  execv("/proc/self/exe", argv);
  // exec failed (no /proc, say): carry on with the kernels OpenBLAS chose, as if never asked.
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace lsf
