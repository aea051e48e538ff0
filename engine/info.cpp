// `lsf info` and lsf::build_info(): version, compiler, build flags, the BLAS in use, thread
// counts, the CUDA devices, and how many kernels are registered (and built for CUDA).
#include "lsformer/engine/info.h"

#include <omp.h>

#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <vector>

#include "lsformer/engine/blas_core.h"
#include "lsformer/engine/cuda_api.h"
#include "lsformer/engine/dispatch.h"
#include "lsformer/engine/distributed.h"
#include "lsformer/build_info.h"

extern "C" char* openblas_get_config(void);
extern "C" int openblas_get_parallel(void);
extern "C" int openblas_get_num_threads(void);

namespace lsf {

std::string version() { return LSF_VERSION_STRING; }

namespace {
// (A function-local static: sections register from other files' static initialisers.)
std::vector<std::string (*)()>& build_info_sections() {
  static std::vector<std::string (*)()> sections;
  return sections;
}
}  // namespace

void register_build_info_section(std::string (*describe)()) { build_info_sections().push_back(describe); }

std::string build_info() {
  std::ostringstream os;
  const int parallel = openblas_get_parallel();
  os << "lsformer " << LSF_VERSION_STRING << " (" << LSF_BUILD_TYPE << ", " << LSF_CXX_COMPILER << ")\n"
     << "BLAS:     " << LSF_BLAS_NAME << " — " << openblas_get_config() << " (threading: "
     << (parallel == 0 ? "sequential" : parallel == 1 ? "pthreads" : "OpenMP") << ", "
     << openblas_get_num_threads() << " threads)\n";
  // A generic fallback core on a newer CPU (engine/blas_core.h): say so, and how to fix it.
  const BlasCoreChoice blas = blas_core_choice();
  if (blas.upgrade) {
    os << "          " << blas_core_advice(blas) << "\n";
  } else if (!blas.forced.empty()) {
    os << "          OPENBLAS_CORETYPE=" << blas.forced << " (kernels: " << blas.running << ")"
       << (std::getenv("LSF_BLAS_REEXEC") ? ", set as the program started: OpenBLAS's own choice for this CPU was weaker" : "")
       << "\n";
  }
  os << "threads:  " << omp_get_max_threads() << " OpenMP threads (" << omp_get_num_procs()
     << " processors; set with --threads or OMP_NUM_THREADS)\n";
  for (auto describe : build_info_sections()) os << describe();
  os << "CUDA:     option LSF_CUDA=" << LSF_CUDA_OPTION << ", ";
  size_t cuda_kernels = 0;
  for (KernelBase* k : all_kernels())
    if (k->implemented(DeviceType::CUDA)) ++cuda_kernels;
  if (cuda_kernels == 0) {
    os << "no CUDA kernels in this build\n";
  } else {
    os << cuda_kernels << " CUDA kernels built\n";
  }
  // Data parallelism (engine/distributed.h): which process-group backends this build has.
  os << "parallel: " << (dist::mpi_built() ? "MPI" : "no MPI (LSF_MPI)") << ", "
     << (dist::nccl_built() ? "NCCL" : "no NCCL")
     << (dist::mpi_built() ? "; mpirun -np N lsf train ... trains data-parallel\n" : "\n");
  os << "devices:  cpu\n";
  // GPUs are listed through the CUDA-free API (engine/cuda_api.h): nothing in engine/ needs CUDA.
  for (int d = 0; d < cuda::device_count(); ++d) {
    const cuda::DeviceProperties p = cuda::device_properties(d);
    os << "          cuda:" << d << " " << p.name << " (" << p.sm_count << " SMs, " << std::fixed
       << std::setprecision(1) << double(p.total_memory) / double(1 << 30) << " GiB, compute capability "
       << p.major << "." << p.minor << ")\n";
  }
  if (cuda_kernels > 0 && cuda::device_count() == 0)
    os << "          (no usable CUDA device: " << cuda::unavailable_reason() << ")\n";
  os << "kernels:  " << all_kernels().size() << " registered\n";
  return os.str();
}

}  // namespace lsf
