// Which OpenBLAS kernels run, and whether they are the best this CPU can run.
//
// Why: a DYNAMIC_ARCH OpenBLAS picks its kernel family ("core") once, when it is loaded, from
// the CPU's family and model numbers. A release older than the CPU does not know the model and
// falls back to its generic SSE3 kernels ("Prescott"): Debian 12's OpenBLAS 0.3.21 does this on
// Sapphire / Emerald Rapids Xeons (family 6, models 143 and 207), where its sgemm then runs at a
// quarter of the rate its AVX-512 kernels reach (61 against 270 GFLOP/s on 2 cores, measured in
// bench/RESULTS.md). The environment variable OPENBLAS_CORETYPE overrides the choice, but only
// before the library is loaded, so a running program cannot fix it for itself except by starting
// again: reexec_with_best_blas_core does that for programs (the `lsf` tool calls it first thing),
// and build_info() names the mismatch for everyone else.
#pragma once

#include <string>

namespace lsf {

// What the loaded OpenBLAS runs and what this CPU could run.
struct BlasCoreChoice {
  std::string running;      // the core OpenBLAS chose, e.g. "Prescott", "Haswell", "SkylakeX"
  std::string best;         // the best core this CPU runs: "Cooperlake", "SkylakeX", "Haswell" or "" (none better known)
  bool upgrade = false;     // best runs wider vectors than running (set OPENBLAS_CORETYPE=best)
  std::string forced;       // OPENBLAS_CORETYPE as the process found it ("" when unset)
};

// The vector level an OpenBLAS x86-64 core name's sgemm uses: 3 for AVX-512 (SkylakeX,
// Cooperlake, SapphireRapids), 2 for AVX2 (Haswell, Zen, Excavator), 1 for AVX
// (Sandybridge, Bulldozer, Piledriver, Steamroller), 0 for anything older or unknown.
int blas_core_vector_level(const std::string& core);

// The best OpenBLAS core for a CPU with these features: "Cooperlake" for AVX-512 with bf16,
// "SkylakeX" for the AVX-512 of x86-64-v4, "Haswell" for x86-64-v3 (AVX2 + FMA), else "".
std::string best_blas_core(bool x86_64_v4, bool avx512_bf16, bool x86_64_v3);

// The choice for this process (running is "" when the BLAS is not a DYNAMIC_ARCH OpenBLAS that
// names its core; upgrade is then false).
BlasCoreChoice blas_core_choice();

// Who reads the advice: any program (build_info), or a program that has already tried to
// restart itself on the best core (reexec_with_best_blas_core), which is still on the weaker
// one when the restart failed.
enum class BlasAdviceFor { AnyProgram, RestartedProgram };

// What to do about a weaker core, in one sentence for a person ("" when c.upgrade is false):
// set OPENBLAS_CORETYPE to c.best; where the environment already holds OpenBLAS to the weaker
// core (c.forced), it says so, because the lsf tool and the benchmarks then keep that choice.
std::string blas_core_advice(const BlasCoreChoice& c, BlasAdviceFor reader = BlasAdviceFor::AnyProgram);

// For a program's main(), before it does anything else: when OpenBLAS runs a weaker core than
// the CPU supports and OPENBLAS_CORETYPE is unset, re-executes the program (/proc/self/exe, the
// same argv) with OPENBLAS_CORETYPE set to the best core. Returns only when nothing needed
// doing or the exec failed (the program then simply runs with the slower kernels). A variable
// of its own (LSF_BLAS_REEXEC) stops a second attempt in the started program.
void reexec_with_best_blas_core(char** argv);

}  // namespace lsf
