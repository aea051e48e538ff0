// engine/blas_core.h: naming the OpenBLAS kernel family that runs against the best one the CPU
// runs. (That the lsf tool really ends up on the best one is the CTest lsf:blas_core, which runs
// the tool with OPENBLAS_CORETYPE unset.)
#include <cstdlib>

#include "helpers.h"

TEST_CASE("blas_core: vector levels of OpenBLAS's core names") {
  CHECK(lsf::blas_core_vector_level("Prescott") == 0);  // the generic fallback of an unknown CPU
  CHECK(lsf::blas_core_vector_level("Nehalem") == 0);
  CHECK(lsf::blas_core_vector_level("Sandybridge") == 1);
  CHECK(lsf::blas_core_vector_level("Haswell") == 2);
  CHECK(lsf::blas_core_vector_level("Zen") == 2);
  CHECK(lsf::blas_core_vector_level("SkylakeX") == 3);
  CHECK(lsf::blas_core_vector_level("Cooperlake") == 3);
  CHECK(lsf::blas_core_vector_level("SapphireRapids") == 3);
  CHECK(lsf::blas_core_vector_level("") == 0);
  CHECK(lsf::blas_core_vector_level("NoSuchCore") == 0);
}

TEST_CASE("blas_core: the best core for a CPU's features") {
  CHECK(lsf::best_blas_core(true, true, true) == "Cooperlake");
  CHECK(lsf::best_blas_core(true, false, true) == "SkylakeX");
  CHECK(lsf::best_blas_core(false, false, true) == "Haswell");
  CHECK(lsf::best_blas_core(false, false, false).empty());
}

TEST_CASE("blas_core: this process's choice is consistent, and build_info names a mismatch") {
  const lsf::BlasCoreChoice c = lsf::blas_core_choice();
  CHECK_FALSE(c.running.empty());  // the library links a DYNAMIC_ARCH OpenBLAS (Debian's)
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  CHECK(c.forced == (forced ? forced : ""));
  CHECK(c.upgrade == (!c.best.empty() && lsf::blas_core_vector_level(c.best) > lsf::blas_core_vector_level(c.running)));
  const std::string info = lsf::build_info();
  CHECK((info.find("set OPENBLAS_CORETYPE=" + c.best) != std::string::npos) == c.upgrade);
  INFO("OpenBLAS runs " << c.running << ", the CPU's best is " << (c.best.empty() ? "(none known)" : c.best));
  CHECK(info.find(c.running) != std::string::npos);
}

TEST_CASE("blas_core: the advice names the fix, and an environment that forces weaker kernels") {
  lsf::BlasCoreChoice fine;
  fine.running = "SkylakeX";
  fine.best = "SkylakeX";
  CHECK(lsf::blas_core_advice(fine).empty());

  lsf::BlasCoreChoice generic;  // a CPU newer than the OpenBLAS release: its fallback core
  generic.running = "Prescott";
  generic.best = "Cooperlake";
  generic.upgrade = true;
  const std::string fix = lsf::blas_core_advice(generic);
  CHECK(fix.find("OpenBLAS runs its Prescott kernels") != std::string::npos);
  CHECK(fix.find("set OPENBLAS_CORETYPE=Cooperlake") != std::string::npos);
  CHECK(fix.find("in the environment") == std::string::npos);
  CHECK(fix.find("do this themselves") != std::string::npos);
  // Printed by a program whose own restart on the best kernels did not happen: it says that,
  // not that it does the restart itself.
  const std::string after_restart = lsf::blas_core_advice(generic, lsf::BlasAdviceFor::RestartedProgram);
  CHECK(after_restart.find("OpenBLAS runs its Prescott kernels") != std::string::npos);
  CHECK(after_restart.find("the restart with OPENBLAS_CORETYPE=Cooperlake did not happen") != std::string::npos);
  CHECK(after_restart.find("do this themselves") == std::string::npos);

  lsf::BlasCoreChoice forced = generic;  // the user's shell chose the weaker kernels
  forced.running = "Haswell";
  forced.forced = "Haswell";
  const std::string held = lsf::blas_core_advice(forced);
  CHECK(held.find("OPENBLAS_CORETYPE=Haswell in the environment holds OpenBLAS to its Haswell kernels") !=
        std::string::npos);
  CHECK(held.find("set OPENBLAS_CORETYPE=Cooperlake or unset it") != std::string::npos);
  // A forced core is the user's choice, whoever reads it.
  CHECK(lsf::blas_core_advice(forced, lsf::BlasAdviceFor::RestartedProgram) == held);
}
